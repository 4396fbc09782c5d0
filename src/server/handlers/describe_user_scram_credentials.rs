//! DescribeUserScramCredentials 0 (`kafka-configs.sh --entity-type users --describe`): the
//! SCRAM credentials of the metadata image, mechanism and iterations only (never salts or
//! keys). All users (null or empty list): every user with a credential; each named user
//! without one → RESOURCE_NOT_FOUND; a user named twice → DUPLICATE_RESOURCE (Kafka's
//! messages).
use std::collections::HashMap;
use std::rc::Rc;

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::DescribeUserScramCredentialsRequest;

use super::str_bytes;
use crate::cluster::security_image::SecurityImage;
use crate::protocol::ErrorCode;
use crate::security::acl::Operation;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeUserScramCredentialsRequest) -> Response {
    // ACLs: DESCRIBE on the cluster (Kafka's KafkaApis).
    if !ctx.access(&meta).allows_cluster(Operation::Describe) {
        return meta.respond(
            &DescribeUserScramCredentialsResponse::default()
                .with_error_code(ErrorCode::CLUSTER_AUTHORIZATION_FAILED.code())
                .with_error_message(Some(str_bytes("Cluster authorization failed."))),
        );
    }
    // The committed credentials: one altered through another shard a moment ago shows.
    let image = ctx.controller.image();
    let security = &image.security;
    let users = req.users.unwrap_or_default();
    let results = if users.is_empty() {
        security.scram_credentials.keys().map(|u| described(security, u)).collect()
    } else {
        let mut times: HashMap<&str, usize> = HashMap::with_capacity(users.len());
        for u in &users {
            *times.entry(&*u.name).or_default() += 1;
        }
        // One result per distinct user, in request order.
        let mut results = Vec::with_capacity(times.len());
        for u in &users {
            let Some(n) = times.remove(&*u.name) else { continue };
            results.push(if n > 1 {
                refused(
                    &u.name,
                    ErrorCode::DUPLICATE_RESOURCE,
                    format!("Cannot describe SCRAM credentials for the same user twice in a single request: {}", &*u.name),
                )
            } else if security.scram_credentials.contains_key(&*u.name) {
                described(security, &u.name)
            } else {
                refused(&u.name, ErrorCode::RESOURCE_NOT_FOUND, format!("Attempt to describe a user credential that does not exist: {}", &*u.name))
            });
        }
        results
    };
    meta.respond(&DescribeUserScramCredentialsResponse::default().with_results(results))
}

fn described(security: &SecurityImage, user: &str) -> DescribeUserScramCredentialsResult {
    let infos = security.scram_credentials.get(user).into_iter().flatten();
    let infos = infos.map(|(m, c)| CredentialInfo::default().with_mechanism(m.wire_type()).with_iterations(c.iterations));
    DescribeUserScramCredentialsResult::default().with_user(str_bytes(user)).with_credential_infos(infos.collect())
}

fn refused(user: &str, code: ErrorCode, message: String) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default().with_user(str_bytes(user)).with_error_code(code.code()).with_error_message(Some(str_bytes(&message)))
}
