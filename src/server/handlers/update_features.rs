//! UpdateFeatures 0-2 (`kafka-features.sh upgrade / downgrade / disable`): the quorum
//! leader checks every update against the finalized levels with Kafka's rules and words
//! (`cluster/features.rs`) and commits them in one record, all or none; `validate_only`
//! commits nothing. Refusals are INVALID_UPDATE_VERSION at the top level, as Kafka 4.4
//! answers (v0-1 then list no per-feature results; v2 has none at all).
use std::rc::Rc;

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::str_bytes;
use crate::cluster::features::{FeatureUpdate, UpgradeType};
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: UpdateFeaturesRequest) -> Response {
    let names: Vec<_> = req.feature_updates.iter().map(|u| u.feature.clone()).collect();
    let outcome = if !ctx.access(&meta).allows_cluster(Operation::Alter) {
        Err((ErrorCode::CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.".to_string()))
    } else {
        let updates = req
            .feature_updates
            .iter()
            .map(|u| FeatureUpdate {
                name: u.feature.to_string(),
                level: u.max_version_level,
                upgrade_type: upgrade_type(meta.version, u.allow_downgrade, u.upgrade_type),
            })
            .collect();
        let done = ctx.controller.update_features(updates, req.validate_only).await.map_err(|e| (ErrorCode::from(&e), e.to_string()));
        if done.is_ok() && !req.validate_only {
            // kafka-features.sh describes next (ApiVersions): answer it from the new image.
            ctx.catch_up_with_controller().await;
        }
        done
    };
    let resp = match outcome {
        Ok(()) => {
            // Kafka writes ApiError.NONE's message, "NONE", into each result.
            let results = if meta.version < 2 {
                names
                    .into_iter()
                    .map(|n| UpdatableFeatureResult::default().with_feature(n).with_error_code(0).with_error_message(Some(str_bytes("NONE"))))
                    .collect()
            } else {
                Vec::new()
            };
            UpdateFeaturesResponse::default().with_error_message(None).with_results(results)
        }
        Err((code, message)) => UpdateFeaturesResponse::default().with_error_code(code.code()).with_error_message(Some(str_bytes(&message))),
    };
    meta.respond(&resp)
}

/// v0 has AllowDowngrade (a safe downgrade when set), v1+ the upgrade type; a value
/// that names no type is None (refused with Kafka's words).
fn upgrade_type(version: i16, allow_downgrade: bool, wire: i8) -> Option<UpgradeType> {
    match version {
        0 if allow_downgrade => Some(UpgradeType::SafeDowngrade),
        0 => Some(UpgradeType::Upgrade),
        _ => UpgradeType::from_wire(wire),
    }
}
