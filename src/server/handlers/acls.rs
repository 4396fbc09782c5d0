//! CreateAcls, DescribeAcls and DeleteAcls 1-3 with an authorizer configured
//! (`authorizer_class_name`; without one, `acls_disabled.rs` answers): ACLs kept in the
//! metadata log by the controller, checked as Kafka's AclControlManager checks them
//! (INVALID_REQUEST with its messages), applied on every broker.
//!
//! Describing needs DESCRIBE on the cluster, creating and deleting ALTER
//! (CLUSTER_AUTHORIZATION_FAILED otherwise), as in Kafka.
use std::rc::Rc;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource, DescribeAclsResponse};
use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};

use super::str_bytes;
use crate::protocol::ErrorCode;
use crate::security::acl::{check_new_binding, AclBinding, AclFilter, Operation, PatternFilter, PatternType, Permission, ResourceType};
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

const NOT_AUTHORIZED: &str = "Cluster authorization failed.";

pub fn describe(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DescribeAclsRequest) -> Response {
    let refused = |code: ErrorCode, message: &str| {
        meta.respond(&DescribeAclsResponse::default().with_error_code(code.code()).with_error_message(Some(str_bytes(message))))
    };
    if !ctx.access(&meta).allows_cluster(Operation::Describe) {
        return refused(ErrorCode::CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED);
    }
    let filter = match filter(
        req.resource_type_filter,
        req.resource_name_filter.as_deref(),
        req.pattern_type_filter,
        req.principal_filter.as_deref(),
        req.host_filter.as_deref(),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(message) => return refused(ErrorCode::INVALID_REQUEST, &message),
    };
    // The committed ACLs: one created through another shard a moment ago shows.
    let image = ctx.controller.image();
    // The set is ordered by resource first, so a resource's ACLs are adjacent.
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for b in image.security.acls.iter().filter(|b| filter.matches(b)) {
        let same = resources.last().is_some_and(|r| {
            r.resource_type == b.resource_type.code() && r.resource_name.as_str() == b.resource_name && r.pattern_type == b.pattern_type.code()
        });
        if !same {
            resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(b.resource_type.code())
                    .with_resource_name(str_bytes(&b.resource_name))
                    .with_pattern_type(b.pattern_type.code()),
            );
        }
        let r = resources.last_mut().expect("pushed above");
        r.acls.push(
            AclDescription::default()
                .with_principal(str_bytes(&b.principal))
                .with_host(str_bytes(&b.host))
                .with_operation(b.operation.code())
                .with_permission_type(b.permission.code()),
        );
    }
    meta.respond(&DescribeAclsResponse::default().with_resources(resources))
}

pub async fn create(ctx: &Rc<ShardContext>, meta: RequestMeta, req: CreateAclsRequest) -> Response {
    let failed = |code: ErrorCode, message: &str| AclCreationResult::default().with_error_code(code.code()).with_error_message(Some(str_bytes(message)));
    if !ctx.access(&meta).allows_cluster(Operation::Alter) {
        let results = req.creations.iter().map(|_| failed(ErrorCode::CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED)).collect();
        return meta.respond(&CreateAclsResponse::default().with_results(results));
    }
    let checked: Vec<Result<AclBinding, String>> = req.creations.iter().map(|c| binding(c, meta.version)).collect();
    let valid: Vec<AclBinding> = checked.iter().filter_map(|c| c.as_ref().ok().cloned()).collect();
    let outcome = if valid.is_empty() { Ok(()) } else { ctx.controller.create_acls(valid).await };
    let results = checked
        .iter()
        .map(|c| match (c, &outcome) {
            (Err(message), _) => failed(ErrorCode::INVALID_REQUEST, message),
            (Ok(_), Err(e)) => failed(ErrorCode::from(e), &e.to_string()),
            (Ok(_), Ok(())) => AclCreationResult::default(),
        })
        .collect();
    if outcome.is_ok() {
        ctx.catch_up_with_controller().await;
    }
    meta.respond(&CreateAclsResponse::default().with_results(results))
}

pub async fn delete(ctx: &Rc<ShardContext>, meta: RequestMeta, req: DeleteAclsRequest) -> Response {
    let failed = |code: ErrorCode, message: &str| DeleteAclsFilterResult::default().with_error_code(code.code()).with_error_message(Some(str_bytes(message)));
    if !ctx.access(&meta).allows_cluster(Operation::Alter) {
        let results = req.filters.iter().map(|_| failed(ErrorCode::CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED)).collect();
        return meta.respond(&DeleteAclsResponse::default().with_filter_results(results));
    }
    let checked: Vec<Result<AclFilter, String>> = req
        .filters
        .iter()
        .map(|f| {
            filter(
                f.resource_type_filter,
                f.resource_name_filter.as_deref(),
                f.pattern_type_filter,
                f.principal_filter.as_deref(),
                f.host_filter.as_deref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclFilter> = checked.iter().filter_map(|f| f.as_ref().ok().cloned()).collect();
    let outcome = if valid.is_empty() { Ok(Vec::new()) } else { ctx.controller.delete_acls(valid).await };
    let mut deleted = match &outcome {
        Ok(d) => d.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    let results = checked
        .iter()
        .map(|f| match (f, &outcome) {
            (Err(message), _) => failed(ErrorCode::INVALID_REQUEST, message),
            (Ok(_), Err(e)) => failed(ErrorCode::from(e), &e.to_string()),
            (Ok(_), Ok(_)) => DeleteAclsFilterResult::default().with_matching_acls(deleted.next().unwrap_or_default().iter().map(matching).collect()),
        })
        .collect();
    if outcome.is_ok() {
        ctx.catch_up_with_controller().await;
    }
    meta.respond(&DeleteAclsResponse::default().with_filter_results(results))
}

fn matching(b: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type.code())
        .with_resource_name(str_bytes(&b.resource_name))
        .with_pattern_type(b.pattern_type.code())
        .with_principal(str_bytes(&b.principal))
        .with_host(str_bytes(&b.host))
        .with_operation(b.operation.code())
        .with_permission_type(b.permission.code())
}

/// A creation as a binding, checked as Kafka checks it (v0 has no pattern type: LITERAL).
fn binding(c: &AclCreation, version: i16) -> Result<AclBinding, String> {
    let resource_type = ResourceType::from_code(c.resource_type).ok_or_else(|| format!("Invalid resourceType {}", c.resource_type))?;
    let pattern = if version == 0 { PatternType::Literal.code() } else { c.resource_pattern_type };
    let pattern_type = PatternType::from_code(pattern).ok_or_else(|| format!("Invalid patternType {pattern}"))?;
    let operation = Operation::from_code(c.operation).ok_or_else(|| format!("Invalid operation {}", c.operation))?;
    let permission = Permission::from_code(c.permission_type).ok_or_else(|| format!("Invalid permissionType {}", c.permission_type))?;
    let b = AclBinding {
        resource_type,
        resource_name: c.resource_name.to_string(),
        pattern_type,
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation,
        permission,
    };
    check_new_binding(&b)?;
    Ok(b)
}

/// A request's filter fields as a filter; an unknown code is INVALID_REQUEST (Kafka's
/// "filter is unknown").
fn filter(
    resource_type: i8,
    name: Option<&str>,
    pattern: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    let any_or = |code: i8, any: i8, known: bool, what: &str| if code == any || known { Ok(()) } else { Err(format!("Unknown {what} {code}")) };
    any_or(resource_type, ResourceType::ANY, ResourceType::from_code(resource_type).is_some(), "resource type")?;
    any_or(operation, Operation::ANY, Operation::from_code(operation).is_some(), "operation")?;
    any_or(permission, Permission::ANY, Permission::from_code(permission).is_some(), "permission type")?;
    let pattern = PatternFilter::from_code(pattern).ok_or_else(|| format!("Unknown pattern type {pattern}"))?;
    let owned = |s: Option<&str>| s.map(str::to_string);
    Ok(AclFilter {
        resource_type: ResourceType::from_code(resource_type),
        resource_name: owned(name),
        pattern,
        principal: owned(principal),
        host: owned(host),
        operation: Operation::from_code(operation),
        permission: Permission::from_code(permission),
    })
}
