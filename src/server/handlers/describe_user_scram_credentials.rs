//! DescribeUserScramCredentials 0: shardlog stores no SCRAM credentials (it has no SASL),
//! so it answers as Kafka 4.1 with none defined: all users (null or empty list) → no
//! results; each named user → RESOURCE_NOT_FOUND; a user named twice → DUPLICATE_RESOURCE.
use std::collections::HashMap;

use kafka_protocol::messages::describe_user_scram_credentials_response::{
    DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::DescribeUserScramCredentialsRequest;

use super::str_bytes;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};

pub fn handle(meta: RequestMeta, req: DescribeUserScramCredentialsRequest) -> Response {
    let users = req.users.unwrap_or_default();
    let mut times: HashMap<&str, usize> = HashMap::with_capacity(users.len());
    for u in &users {
        *times.entry(&*u.name).or_default() += 1;
    }
    let mut results = Vec::with_capacity(times.len());
    // One result per distinct user, in request order.
    for u in &users {
        let Some(n) = times.remove(&*u.name) else { continue };
        let (code, message) = if n > 1 {
            (ErrorCode::DUPLICATE_RESOURCE, format!("Cannot describe SCRAM credentials for the same user twice in a single request: {}", &*u.name))
        } else {
            (ErrorCode::RESOURCE_NOT_FOUND, format!("Attempt to describe a user credential that does not exist: {}", &*u.name))
        };
        results.push(
            DescribeUserScramCredentialsResult::default()
                .with_user(u.name.clone())
                .with_error_code(code.code())
                .with_error_message(Some(str_bytes(&message))),
        );
    }
    meta.respond(&DescribeUserScramCredentialsResponse::default().with_results(results))
}
