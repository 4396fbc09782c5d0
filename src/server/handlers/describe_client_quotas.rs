//! DescribeClientQuotas 0-1 (`kafka-configs.sh --describe --entity-type users|clients|ips`):
//! the quotas of the committed image whose entity the filter matches, as Kafka's
//! ClientQuotasImage answers. A component matches an entity that has that type with the
//! given name (MATCH_EXACT), the default (MATCH_DEFAULT) or any name (MATCH_SPECIFIED);
//! every component must match; `strict` also refuses entities with other types.
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::str_bytes;
use std::rc::Rc;

use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::security::client_quotas::{EntityName, QuotaEntity};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

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
        Ok(()) => DescribeClientQuotasResponse::default().with_error_message(None).with_entries(Some(matching(ctx, &req))),
        Err((code, message)) => {
            DescribeClientQuotasResponse::default().with_error_code(code.code()).with_error_message(Some(str_bytes(&message))).with_entries(None)
        }
    };
    meta.respond(&response)
}

/// The committed image's entities the (checked) filter matches, with their values.
fn matching(ctx: &ShardContext, req: &DescribeClientQuotasRequest) -> Vec<EntryData> {
    let image = ctx.controller.image();
    image
        .security
        .client_quotas
        .iter()
        .filter(|(entity, _)| matches(entity, req))
        .map(|(entity, values)| {
            let entity =
                entity.components().map(|(t, name)| EntityData::default().with_entity_type(str_bytes(t)).with_entity_name(name.map(str_bytes))).collect();
            let values = values.iter().map(|(k, v)| ValueData::default().with_key(str_bytes(k.name())).with_value(v.0)).collect();
            EntryData::default().with_entity(entity).with_values(values)
        })
        .collect()
}

fn matches(entity: &QuotaEntity, req: &DescribeClientQuotasRequest) -> bool {
    let component = |t: &str| match t {
        USER => entity.user.as_ref(),
        CLIENT_ID => entity.client_id.as_ref(),
        _ => entity.ip.as_ref(),
    };
    let all_match = req.components.iter().all(|c| {
        let Some(name) = component(c.entity_type.as_str()) else { return false };
        match c.match_type {
            MATCH_EXACT => matches!(name, EntityName::Named(n) if Some(n.as_str()) == c._match.as_deref()),
            MATCH_DEFAULT => *name == EntityName::Default,
            _ => true,
        }
    });
    // Strict: the entity has no type the filter does not name.
    all_match && (!req.strict || entity.components().count() == req.components.len())
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
