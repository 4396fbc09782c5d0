//! The delegation-token APIs as Kafka 4.4 answers them (KafkaApis, then the controller's
//! DelegationTokenControlManager): CreateDelegationToken 1-3, RenewDelegationToken 1-2,
//! ExpireDelegationToken 1-2, DescribeDelegationToken 1-3. This broker decides (it holds
//! the secret Renew and Expire name tokens by, their HMAC) and the quorum records the
//! token as it now is (`security/delegation_token.rs` has the lifetime rules).
//!
//! Refused as Kafka refuses: without `delegation_token_secret_key` every API answers
//! DELEGATION_TOKEN_AUTH_DISABLED; on a PLAINTEXT listener, on an SSL one without a client
//! certificate, or on a connection that itself authenticated with a token,
//! DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (a token must come from a real credential).
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use bytes::Bytes;
use kafka_protocol::messages::describe_delegation_token_response::{DescribedDelegationToken, DescribedDelegationTokenRenewer};
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenRequest, DescribeDelegationTokenResponse, ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse, RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};

use super::str_bytes;
use crate::protocol::ErrorCode;
use crate::security::acl::{Operation, ResourceType};
use crate::security::delegation_token::{self, DelegationToken, TokenLifetimes, TokenRefusal};
use crate::security::listeners::SecurityProtocol;
use crate::security::principal::Principal;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Kafka's `allowTokenRequests`: not over PLAINTEXT, not anonymously over SSL, not with a
/// session that a token authenticated.
fn token_requests_allowed(ctx: &ShardContext, meta: &RequestMeta) -> bool {
    let protocol = ctx.listeners.all.get(usize::from(meta.listener)).map(|l| l.protocol);
    !(meta.token_authenticated
        || protocol == Some(SecurityProtocol::Plaintext)
        || (protocol == Some(SecurityProtocol::Ssl) && meta.principal == Principal::ANONYMOUS))
}

/// The secret and lifetimes, or the error every API answers when tokens are off.
fn enabled(ctx: &ShardContext, meta: &RequestMeta) -> Result<(std::sync::Arc<[u8]>, TokenLifetimes), ErrorCode> {
    if !token_requests_allowed(ctx, meta) {
        return Err(ErrorCode::DELEGATION_TOKEN_REQUEST_NOT_ALLOWED);
    }
    // Validated at start (`Config::validate`).
    ctx.config.delegation_tokens().ok().flatten().ok_or(ErrorCode::DELEGATION_TOKEN_AUTH_DISABLED)
}

/// `(type, name)` of a `Type:name` principal.
fn split(principal: &str) -> (&str, &str) {
    principal.split_once(':').unwrap_or(("User", principal))
}

pub async fn create(ctx: &Rc<ShardContext>, meta: RequestMeta, req: CreateDelegationTokenRequest) -> Response {
    let requester = meta.principal.as_str().to_string();
    let owner = match (&req.owner_principal_type, &req.owner_principal_name) {
        (Some(t), Some(n)) if !n.is_empty() => format!("{}:{}", &**t, &**n),
        _ => requester.clone(),
    };
    let (owner_type, owner_name) = split(&owner);
    let (requester_type, requester_name) = split(&requester);
    let answer = CreateDelegationTokenResponse::default()
        .with_principal_type(str_bytes(owner_type))
        .with_principal_name(str_bytes(owner_name))
        .with_token_requester_principal_type(str_bytes(requester_type))
        .with_token_requester_principal_name(str_bytes(requester_name));
    let refuse = |code: ErrorCode| meta.respond(&answer.clone().with_error_code(code.code()));
    let (secret, lifetimes) = match enabled(ctx, &meta) {
        Ok(e) => e,
        Err(code) => return refuse(code),
    };
    // A token for someone else needs CREATE_TOKENS on that user (KIP-373).
    if owner != requester && !ctx.access(&meta).allows(Operation::CreateTokens, ResourceType::User, &owner) {
        return refuse(ErrorCode::DELEGATION_TOKEN_AUTHORIZATION_FAILED);
    }
    if req.renewers.iter().any(|r| &*r.principal_type != "User") {
        return refuse(ErrorCode::INVALID_PRINCIPAL_TYPE);
    }
    let renewers = req.renewers.iter().map(|r| format!("User:{}", &*r.principal_name)).collect();
    // Kafka's token ids are random UUIDs in URL-safe base64.
    let token_id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    let token = DelegationToken::create(token_id, owner.clone(), requester.clone(), renewers, req.max_lifetime_ms, now_ms(), lifetimes);
    let hmac = delegation_token::hmac(&secret, &token.token_id);
    if let Err(e) = ctx.controller.put_delegation_token(token.clone()).await {
        return refuse(ErrorCode::from(&e));
    }
    ctx.catch_up_with_controller().await;
    meta.respond(
        &answer
            .with_issue_timestamp_ms(token.issue_ms)
            .with_expiry_timestamp_ms(token.expiry_ms)
            .with_max_timestamp_ms(token.max_ms)
            .with_token_id(str_bytes(&token.token_id))
            .with_hmac(Bytes::from(hmac)),
    )
}

/// The token a Renew or Expire names by its HMAC, checked for the requester.
fn named_token(ctx: &ShardContext, secret: &[u8], hmac: &[u8]) -> Result<DelegationToken, ErrorCode> {
    // The committed tokens: one created through another shard a moment ago is found.
    let image = ctx.controller.image();
    image.security.token_by_hmac(secret, hmac).cloned().ok_or(ErrorCode::DELEGATION_TOKEN_NOT_FOUND)
}

fn refusal_code(r: TokenRefusal) -> ErrorCode {
    match r {
        TokenRefusal::Expired => ErrorCode::DELEGATION_TOKEN_EXPIRED,
        TokenRefusal::OwnerMismatch => ErrorCode::DELEGATION_TOKEN_OWNER_MISMATCH,
    }
}

pub async fn renew(ctx: &Rc<ShardContext>, meta: RequestMeta, req: RenewDelegationTokenRequest) -> Response {
    let refuse = |code: ErrorCode| meta.respond(&RenewDelegationTokenResponse::default().with_error_code(code.code()).with_expiry_timestamp_ms(-1));
    let (secret, lifetimes) = match enabled(ctx, &meta) {
        Ok(e) => e,
        Err(code) => return refuse(code),
    };
    let renewed =
        named_token(ctx, &secret, &req.hmac).and_then(|t| t.renewed(meta.principal.as_str(), req.renew_period_ms, now_ms(), lifetimes).map_err(refusal_code));
    let token = match renewed {
        Ok(t) => t,
        Err(code) => return refuse(code),
    };
    if let Err(e) = ctx.controller.put_delegation_token(token.clone()).await {
        return refuse(ErrorCode::from(&e));
    }
    ctx.catch_up_with_controller().await;
    meta.respond(&RenewDelegationTokenResponse::default().with_expiry_timestamp_ms(token.expiry_ms))
}

pub async fn expire(ctx: &Rc<ShardContext>, meta: RequestMeta, req: ExpireDelegationTokenRequest) -> Response {
    let refuse = |code: ErrorCode| meta.respond(&ExpireDelegationTokenResponse::default().with_error_code(code.code()).with_expiry_timestamp_ms(-1));
    let (secret, _) = match enabled(ctx, &meta) {
        Ok(e) => e,
        Err(code) => return refuse(code),
    };
    let expired = named_token(ctx, &secret, &req.hmac)
        .and_then(|t| t.expired(meta.principal.as_str(), req.expiry_time_period_ms, now_ms()).map(|e| (t, e)).map_err(refusal_code));
    let (token, outcome) = match expired {
        Ok(x) => x,
        Err(code) => return refuse(code),
    };
    let (written, expiry_ms) = match outcome {
        // Kafka answers a removal with the (negative) period it was asked for.
        None => (ctx.controller.remove_delegation_token(token.token_id).await, req.expiry_time_period_ms),
        Some(t) => {
            let expiry = t.expiry_ms;
            (ctx.controller.put_delegation_token(t).await, expiry)
        }
    };
    if let Err(e) = written {
        return refuse(ErrorCode::from(&e));
    }
    ctx.catch_up_with_controller().await;
    meta.respond(&ExpireDelegationTokenResponse::default().with_expiry_timestamp_ms(expiry_ms))
}

pub fn describe(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeDelegationTokenRequest) -> Response {
    let (secret, _) = match enabled(ctx, &meta) {
        Ok(e) => e,
        Err(code) => return meta.respond(&DescribeDelegationTokenResponse::default().with_error_code(code.code())),
    };
    // An empty owner list asks for nothing; null for every token the principal may see.
    let owners: Option<Vec<String>> = req.owners.map(|o| o.iter().map(|p| format!("{}:{}", &*p.principal_type, &*p.principal_name)).collect());
    if owners.as_ref().is_some_and(|o| o.is_empty()) {
        return meta.respond(&DescribeDelegationTokenResponse::default());
    }
    let me = meta.principal.as_str();
    let access = ctx.access(&meta);
    let image = ctx.controller.image();
    let tokens = image
        .security
        .delegation_tokens
        .values()
        .filter(|t| owners.as_ref().is_none_or(|o| o.iter().any(|p| t.may_renew(p))))
        // Kafka's filterToken: the owner or a renewer, DESCRIBE_TOKENS on the owner, or
        // DESCRIBE on the token.
        .filter(|t| {
            t.may_renew(me)
                || access.allows(Operation::DescribeTokens, ResourceType::User, &t.owner)
                || access.allows(Operation::Describe, ResourceType::DelegationToken, &t.token_id)
        })
        .map(|t| described(t, &secret))
        .collect();
    meta.respond(&DescribeDelegationTokenResponse::default().with_tokens(tokens))
}

fn described(t: &DelegationToken, secret: &[u8]) -> DescribedDelegationToken {
    let (owner_type, owner_name) = split(&t.owner);
    let (requester_type, requester_name) = split(&t.requester);
    DescribedDelegationToken::default()
        .with_principal_type(str_bytes(owner_type))
        .with_principal_name(str_bytes(owner_name))
        .with_token_requester_principal_type(str_bytes(requester_type))
        .with_token_requester_principal_name(str_bytes(requester_name))
        .with_issue_timestamp(t.issue_ms)
        .with_expiry_timestamp(t.expiry_ms)
        .with_max_timestamp(t.max_ms)
        .with_token_id(str_bytes(&t.token_id))
        .with_hmac(Bytes::from(delegation_token::hmac(secret, &t.token_id)))
        .with_renewers(
            t.renewers
                .iter()
                .map(|r| {
                    let (ty, name) = split(r);
                    DescribedDelegationTokenRenewer::default().with_principal_type(str_bytes(ty)).with_principal_name(str_bytes(name))
                })
                .collect(),
        )
}
