//! AlterClientQuotas 0-1 (`kafka-configs.sh --alter --entity-type users|clients|ips
//! --add-config producer_byte_rate=...`): each entry checked as Kafka's
//! ClientQuotaControlManager checks it, the valid ones committed by the controller in
//! one metadata record (nothing with `validate_only`). Each entry gets its own answer.
use std::rc::Rc;

use kafka_protocol::messages::alter_client_quotas_request::EntryData as RequestEntry;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};

use super::str_bytes;
use crate::controller::QuotaAlteration;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::security::client_quotas::{EntityName, QuotaEntity, QuotaKey, QuotaValue, CLIENT_ID, IP, USER};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

type Refusal = (ErrorCode, String);

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AlterClientQuotasRequest) -> Response {
    // ACLs: ALTER_CONFIGS on the cluster (Kafka's KafkaApis).
    let allowed = ctx.access(&meta).allows_cluster(Operation::AlterConfigs);
    let checked: Vec<Result<QuotaAlteration, Refusal>> = req
        .entries
        .iter()
        .map(|e| if allowed { check_entry(e) } else { Err((ErrorCode::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.".into())) })
        .collect();
    let valid: Vec<QuotaAlteration> = checked.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
    // One record for every valid entry: all or none of them are committed.
    let committed = if req.validate_only || valid.is_empty() {
        Ok(())
    } else {
        let done = ctx.controller.alter_client_quotas(valid).await.map_err(|e| (ErrorCode::from(&e), e.to_string()));
        // The client reads its quotas back next (kafka-configs --describe).
        ctx.catch_up_with_controller().await;
        done
    };
    let entries = req
        .entries
        .iter()
        .zip(checked)
        .map(|(e, result)| {
            let entity =
                e.entity.iter().map(|c| EntityData::default().with_entity_type(c.entity_type.clone()).with_entity_name(c.entity_name.clone())).collect();
            let outcome = result.and_then(|_| committed.clone());
            let (code, message) = match outcome {
                Ok(()) => (ErrorCode::NONE, None),
                Err((code, message)) => (code, Some(str_bytes(&message))),
            };
            EntryData::default().with_entity(entity).with_error_code(code.code()).with_error_message(message)
        })
        .collect();
    meta.respond(&AlterClientQuotasResponse::default().with_entries(entries))
}

fn invalid(message: String) -> Refusal {
    (ErrorCode::INVALID_REQUEST, message)
}

/// One entry: its entity and its operations, as Kafka's ClientQuotaControlManager
/// validates them.
fn check_entry(e: &RequestEntry) -> Result<QuotaAlteration, Refusal> {
    let entity = check_entity(e)?;
    let mut ops: Vec<(QuotaKey, Option<QuotaValue>)> = Vec::with_capacity(e.ops.len());
    for op in &e.ops {
        let name = op.key.as_str();
        let key = QuotaKey::from_name(name)
            .filter(|k| k.is_client_key() == entity.ip.is_none())
            .ok_or_else(|| invalid(format!("Invalid configuration key {name}")))?;
        if ops.iter().any(|(k, _)| *k == key) {
            // Kafka's words for a key given twice (it names the entity, not the key).
            return Err(invalid(format!("Ignoring duplicate entity {}", java_entity(&entity))));
        }
        if op.remove {
            ops.push((key, None));
            continue;
        }
        let v = op.value;
        if v.is_nan() || v <= 0.0 {
            return Err(invalid(format!("Quota {name} must be greater than 0")));
        }
        if key.is_whole_number() && (v.fract() != 0.0 || v > i64::MAX as f64) {
            return Err(invalid(format!("{name} cannot be a fractional value.")));
        }
        ops.push((key, Some(QuotaValue(v))));
    }
    Ok(QuotaAlteration { entity, ops })
}

fn check_entity(e: &RequestEntry) -> Result<QuotaEntity, Refusal> {
    if e.entity.is_empty() {
        return Err(invalid("Invalid empty client quota entity".into()));
    }
    let mut entity = QuotaEntity::default();
    for c in &e.entity {
        let name = EntityName::from_wire(c.entity_name.as_deref());
        let slot = match c.entity_type.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            IP => &mut entity.ip,
            other => return Err(invalid(format!("Unhandled client quota entity type: {other}"))),
        };
        // A type given twice: the last name counts (Kafka reads the entity into a map).
        *slot = Some(name);
    }
    if entity.ip.is_some() && (entity.user.is_some() || entity.client_id.is_some()) {
        // "shouldnot": Kafka's words, kept so clients and scripts matching them still do.
        return Err(invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId".into()));
    }
    if let Some(EntityName::Named(ip)) = &entity.ip {
        if ip.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(format!("{ip} is not a valid IP or resolvable host.")));
        }
    }
    Ok(entity)
}

/// An entity as Kafka's `ClientQuotaEntity.toString` prints it (a Java HashMap: client-id
/// before user; a default entity's name is null).
fn java_entity(entity: &QuotaEntity) -> String {
    let name = |n: &EntityName| match n {
        EntityName::Default => "null".to_string(),
        EntityName::Named(s) => s.to_string(),
    };
    let entries: Vec<String> = [(CLIENT_ID, &entity.client_id), (USER, &entity.user), (IP, &entity.ip)]
        .into_iter()
        .filter_map(|(t, n)| n.as_ref().map(|n| format!("{t}={}", name(n))))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", entries.join(", "))
}
