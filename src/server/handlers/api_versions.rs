use crate::protocol::api_versions_response;
use crate::server::dispatch::{RequestMeta, Response};

pub fn handle(meta: RequestMeta) -> Response {
    meta.respond(&api_versions_response(meta.version))
}
