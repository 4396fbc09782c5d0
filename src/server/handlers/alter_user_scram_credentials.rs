//! AlterUserScramCredentials 0 (`kafka-configs.sh --entity-type users --alter
//! --add-config 'SCRAM-SHA-512=[password=...]'`): credentials checked here as Kafka's
//! ScramControlManager checks them, derived to their stored form (salt, StoredKey,
//! ServerKey: the salted password goes no further than this broker), and committed by
//! the controller in one metadata record.
//!
//! Per user: named twice in one request → DUPLICATE_RESOURCE; empty name →
//! UNACCEPTABLE_CREDENTIAL; unknown mechanism → UNSUPPORTED_SASL_MECHANISM; iterations out
//! of 4096..=16384 → UNACCEPTABLE_CREDENTIAL; deleting a credential that does not exist →
//! RESOURCE_NOT_FOUND. Results come as Kafka orders them: deletions, upsertions, errors.
use std::rc::Rc;

use indexmap::IndexMap;
use kafka_protocol::messages::alter_user_scram_credentials_request::{ScramCredentialDeletion, ScramCredentialUpsertion};
use kafka_protocol::messages::alter_user_scram_credentials_response::{AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult};
use kafka_protocol::messages::AlterUserScramCredentialsRequest;
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::controller::ScramUpsertion;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::security::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

type Refusal = (ErrorCode, &'static str);

/// What the request asks for one user (a user may appear once in a request).
enum Plan {
    Delete(ScramMechanism),
    Upsert(ScramUpsertion),
    Refused(Refusal),
}

const TWICE: Refusal = (ErrorCode::DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request");
const MISSING: Refusal = (ErrorCode::RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist");

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: AlterUserScramCredentialsRequest) -> Response {
    // ACLs: ALTER on the cluster, else every user is CLUSTER_AUTHORIZATION_FAILED.
    if !ctx.access(&meta).allows_cluster(Operation::Alter) {
        let users: IndexMap<&StrBytes, ()> = req.deletions.iter().map(|d| &d.name).chain(req.upsertions.iter().map(|u| &u.name)).map(|u| (u, ())).collect();
        let results = users
            .keys()
            .map(|u| {
                AlterUserScramCredentialsResult::default()
                    .with_user((*u).clone())
                    .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code())
                    .with_error_message(Some(StrBytes::from_static_str("Cluster authorization failed.")))
            })
            .collect();
        return meta.respond(&AlterUserScramCredentialsResponse::default().with_results(results));
    }
    let mut plans: IndexMap<StrBytes, Plan> = IndexMap::new();
    let image = ctx.controller.image();
    // A deletion of nothing is refused here, in order (so the user's later alterations
    // are skipped, as Kafka's are), and again by the controller against its own image.
    let exists = |d: &ScramCredentialDeletion, m: ScramMechanism| image.security.scram_credential(&d.name, m).map(|_| Plan::Delete(m)).ok_or(MISSING);
    let alterations = req.deletions.iter().map(|d| (&d.name, check_user_and_mechanism(&d.name, d.mechanism).and_then(|m| exists(d, m))));
    let alterations = alterations.chain(req.upsertions.iter().map(|u| (&u.name, check_upsertion(u).map(Plan::Upsert))));
    for (user, plan) in alterations.collect::<Vec<_>>() {
        match plans.get_mut(user) {
            // The first refusal of a user stands.
            Some(Plan::Refused(_)) => {}
            Some(earlier) => *earlier = Plan::Refused(TWICE),
            None => {
                plans.insert(user.clone(), plan.unwrap_or_else(Plan::Refused));
            }
        }
    }
    let mut deletions = Vec::new();
    let mut upsertions = Vec::new();
    let mut refused = Vec::new();
    for (user, plan) in plans {
        match plan {
            Plan::Delete(m) => deletions.push((user, m)),
            Plan::Upsert(u) => upsertions.push(u),
            Plan::Refused(why) => refused.push((user, why)),
        }
    }
    let result = |user: &str| AlterUserScramCredentialsResult::default().with_user(str_bytes(user));
    let mut results = Vec::with_capacity(deletions.len() + upsertions.len() + refused.len());
    if !deletions.is_empty() || !upsertions.is_empty() {
        let upserted: Vec<String> = upsertions.iter().map(|u| u.user.clone()).collect();
        let wanted = deletions.iter().map(|(u, m)| (u.to_string(), *m)).collect();
        match ctx.controller.alter_scram_credentials(upsertions, wanted).await {
            Ok(missing) => {
                for (user, _) in deletions {
                    if missing.iter().any(|(u, _)| u.as_str() == user.as_str()) {
                        refused.push((user, MISSING));
                    } else {
                        results.push(result(&user));
                    }
                }
                results.extend(upserted.iter().map(|u| result(u)));
                ctx.catch_up_with_controller().await;
            }
            Err(e) => {
                // Nothing was written: every user asked for gets the controller's error.
                let (code, message) = (ErrorCode::from(&e), e.to_string());
                for user in deletions.iter().map(|(u, _)| u.as_str()).chain(upserted.iter().map(String::as_str)) {
                    results.push(result(user).with_error_code(code.code()).with_error_message(Some(str_bytes(&message))));
                }
            }
        }
    }
    for (user, (code, message)) in refused {
        results.push(result(&user).with_error_code(code.code()).with_error_message(Some(StrBytes::from_static_str(message))));
    }
    meta.respond(&AlterUserScramCredentialsResponse::default().with_results(results))
}

fn check_user_and_mechanism(user: &str, mechanism: i8) -> Result<ScramMechanism, Refusal> {
    if user.is_empty() {
        return Err((ErrorCode::UNACCEPTABLE_CREDENTIAL, "Username must not be empty"));
    }
    ScramMechanism::from_type(mechanism).ok_or((ErrorCode::UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
}

/// Checked as Kafka checks it, then derived to the stored form.
fn check_upsertion(u: &ScramCredentialUpsertion) -> Result<ScramUpsertion, Refusal> {
    let mechanism = check_user_and_mechanism(&u.name, u.mechanism)?;
    if u.iterations < MIN_ITERATIONS {
        return Err((ErrorCode::UNACCEPTABLE_CREDENTIAL, "Too few iterations"));
    }
    if u.iterations > MAX_ITERATIONS {
        return Err((ErrorCode::UNACCEPTABLE_CREDENTIAL, "Too many iterations"));
    }
    let credential = ScramCredential::from_salted_password(mechanism, u.salt.to_vec(), &u.salted_password, u.iterations);
    Ok(ScramUpsertion { user: u.name.to_string(), mechanism, credential })
}
