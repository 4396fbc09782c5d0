//! DescribeClientQuotas 0-1 (`kafka-configs.sh --describe --entity-type users|clients`
//! asks it beside the SCRAM credentials): the filter is checked as Kafka's
//! ClientQuotasImage checks it; no quota can be set yet (AlterClientQuotas is not
//! served), so a valid filter matches no entity.
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::str_bytes;
use std::rc::Rc;

use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::shard::ShardContext;
use crate::server::dispatch::{RequestMeta, Response};

/// Kafka's entity types (ClientQuotaEntity) and match types.
const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

pub fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeClientQuotasRequest) -> Response {
    // ACLs: DESCRIBE_CONFIGS on the cluster (Kafka's KafkaApis).
    let allowed = ctx.access(&meta).allows_cluster(Operation::DescribeConfigs);
    let checked = if allowed { check_filter(&req) } else { Err((ErrorCode::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.".to_string())) };
    let response = match checked {
        Ok(()) => DescribeClientQuotasResponse::default().with_entries(Some(Vec::new())),
        Err((code, message)) => DescribeClientQuotasResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(str_bytes(&message)))
            .with_entries(None),
    };
    meta.respond(&response)
}

fn check_filter(req: &DescribeClientQuotasRequest) -> Result<(), (ErrorCode, String)> {
    let invalid = |m: String| (ErrorCode::INVALID_REQUEST, m);
    let mut seen: Vec<&str> = Vec::with_capacity(req.components.len());
    for c in &req.components {
        let t = c.entity_type.as_str();
        if t.is_empty() {
            return Err(invalid("Invalid empty entity type.".into()));
        }
        if seen.contains(&t) {
            return Err(invalid(format!("Entity type {t} cannot appear more than once in the filter.")));
        }
        if ![USER, CLIENT_ID, IP].contains(&t) {
            return Err((ErrorCode::UNSUPPORTED_VERSION, format!("Unsupported entity type {t}")));
        }
        match (c.match_type, c._match.is_some()) {
            (MATCH_EXACT, false) => return Err(invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.".into())),
            (MATCH_DEFAULT, true) => return Err(invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.".into())),
            (MATCH_SPECIFIED, true) => return Err(invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.".into())),
            (MATCH_EXACT | MATCH_DEFAULT | MATCH_SPECIFIED, _) => {}
            (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
        }
        seen.push(t);
    }
    if seen.contains(&IP) && (seen.contains(&USER) || seen.contains(&CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.".into(),
        ));
    }
    Ok(())
}
