//! ApiVersions 0-5. From v5 (KIP-1242) a client may name the cluster id and node id it
//! means to reach: both or neither (one alone is INVALID_REQUEST), and a mismatch is
//! REBOOTSTRAP_REQUIRED (its metadata is stale: an address now serves another node),
//! each without the API list, as Kafka 4.4 answers. Feature levels (v3+) come from the
//! metadata image: what this build supports and what the cluster finalized.
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::cluster::features::supported_features;
use crate::cluster::image::MetadataImage;
use crate::protocol::api_versions::FeatureLevels;
use crate::protocol::{api_versions_response, ErrorCode};
use crate::server::dispatch::{RequestMeta, Response};

/// This node as v5 clients name it: (cluster id, node id); `None` skips the check (a
/// node that does not know its cluster id yet).
pub type NodeIdentity<'a> = Option<(&'a str, i32)>;

/// `unstable`: `unstable.feature.versions.enable` (the supported ranges then include the
/// levels still being built).
pub fn handle(meta: RequestMeta, req: &ApiVersionsRequest, node: NodeIdentity<'_>, image: &MetadataImage, unstable: bool) -> Response {
    if meta.version >= 5 {
        let e = identity_error(req.cluster_id.as_deref(), req.node_id, node);
        if e != ErrorCode::NONE {
            return meta.respond(&ApiVersionsResponse::default().with_error_code(e.code()));
        }
    }
    meta.respond(&api_versions_response(meta.version, &feature_levels(image, unstable)))
}

fn feature_levels(image: &MetadataImage, unstable: bool) -> FeatureLevels<'_> {
    FeatureLevels {
        supported: supported_features(unstable).map(|f| (f.name, f.min, f.max)).collect(),
        finalized: image.features.iter().collect(),
        epoch: image.applied_index as i64,
    }
}

/// KIP-1242's check of the cluster id and node id a v5 request names (`None` / -1: not
/// named) against this node's.
fn identity_error(cluster_id: Option<&str>, node_id: i32, node: NodeIdentity<'_>) -> ErrorCode {
    match (cluster_id, node_id >= 0) {
        (None, false) => ErrorCode::NONE,
        (Some(_), false) | (None, true) => ErrorCode::INVALID_REQUEST,
        (Some(cluster), true) => match node {
            Some((ours, id)) if cluster != ours || node_id != id => ErrorCode::REBOOTSTRAP_REQUIRED,
            _ => ErrorCode::NONE,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kip_1242_identity_check_as_kafka_4_4_answers() {
        let node = Some(("c1", 1));
        assert_eq!(identity_error(None, -1, node), ErrorCode::NONE);
        assert_eq!(identity_error(Some("c1"), 1, node), ErrorCode::NONE);
        assert_eq!(identity_error(Some("c1"), -1, node), ErrorCode::INVALID_REQUEST);
        assert_eq!(identity_error(None, 1, node), ErrorCode::INVALID_REQUEST);
        assert_eq!(identity_error(Some("c1"), 2, node), ErrorCode::REBOOTSTRAP_REQUIRED);
        assert_eq!(identity_error(Some("other"), 1, node), ErrorCode::REBOOTSTRAP_REQUIRED);
        assert_eq!(identity_error(Some("other"), 1, None), ErrorCode::NONE);
    }
}
