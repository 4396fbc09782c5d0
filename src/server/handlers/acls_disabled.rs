//! DescribeAcls, CreateAcls and DeleteAcls 1-3: shardlog has no authorizer, so these
//! answer exactly as Kafka 4.1 does without `authorizer.class.name`: SECURITY_DISABLED,
//! "No Authorizer is configured." (DescribeAcls at the top level, "... on the broker"; CreateAcls for every
//! creation; DeleteAcls for every filter). Kafka's tools print that message and exit.
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsResponse};
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsResponse};

use super::str_bytes;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};

/// Kafka's messages, word for word: DescribeAcls has its own.
const MESSAGE: &str = "No Authorizer is configured.";
const DESCRIBE_MESSAGE: &str = "No Authorizer is configured on the broker";

pub fn describe(meta: RequestMeta) -> Response {
    meta.respond(&DescribeAclsResponse::default().with_error_code(ErrorCode::SECURITY_DISABLED.code()).with_error_message(Some(str_bytes(DESCRIBE_MESSAGE))))
}

pub fn create(meta: RequestMeta, req: CreateAclsRequest) -> Response {
    let results = req
        .creations
        .iter()
        .map(|_| AclCreationResult::default().with_error_code(ErrorCode::SECURITY_DISABLED.code()).with_error_message(Some(str_bytes(MESSAGE))))
        .collect();
    meta.respond(&CreateAclsResponse::default().with_results(results))
}

pub fn delete(meta: RequestMeta, req: DeleteAclsRequest) -> Response {
    let results = req
        .filters
        .iter()
        .map(|_| DeleteAclsFilterResult::default().with_error_code(ErrorCode::SECURITY_DISABLED.code()).with_error_message(Some(str_bytes(MESSAGE))))
        .collect();
    meta.respond(&DeleteAclsResponse::default().with_filter_results(results))
}
