//! ACLs as Kafka's StandardAuthorizer defines them: bindings (a resource pattern and an
//! access control entry), filters that select them (DescribeAcls, DeleteAcls), and the
//! authorization decision.
//!
//! The decision, in Kafka's order: a super user is allowed; else the ACLs whose pattern
//! matches the resource (LITERAL equal, LITERAL `*`, PREFIXED a prefix of the name) and
//! whose principal (the session's or `User:*`) and host (the client's or `*`) match are
//! looked at: any matching DENY wins; else any matching ALLOW allows (an ALLOW of READ,
//! WRITE, DELETE or ALTER also allows DESCRIBE, of ALTER_CONFIGS also DESCRIBE_CONFIGS;
//! ALL allows everything); else, when no ACL at all is bound to the resource,
//! `allow.everyone.if.no.acl.found` decides; else denied.
use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Kafka's `ResourceType` codes. ANY and UNKNOWN appear only in filters and requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User,
}

impl ResourceType {
    pub const ANY: i8 = 1;

    pub fn from_code(code: i8) -> Option<ResourceType> {
        Some(match code {
            2 => ResourceType::Topic,
            3 => ResourceType::Group,
            4 => ResourceType::Cluster,
            5 => ResourceType::TransactionalId,
            6 => ResourceType::DelegationToken,
            7 => ResourceType::User,
            _ => return None,
        })
    }

    pub fn code(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
            ResourceType::DelegationToken => 6,
            ResourceType::User => 7,
        }
    }
}

/// The one name a CLUSTER resource has.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name, principal and host that match any.
pub const WILDCARD: &str = "*";
pub const WILDCARD_PRINCIPAL: &str = "User:*";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PatternType {
    Literal,
    Prefixed,
}

impl PatternType {
    pub const ANY: i8 = 1;
    pub const MATCH: i8 = 2;

    pub fn from_code(code: i8) -> Option<PatternType> {
        match code {
            3 => Some(PatternType::Literal),
            4 => Some(PatternType::Prefixed),
            _ => None,
        }
    }

    pub fn code(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }
}

/// Kafka's `AclOperation` (ALL matches every operation in an ACL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens,
    TwoPhaseCommit,
}

impl Operation {
    pub const ANY: i8 = 1;

    pub fn from_code(code: i8) -> Option<Operation> {
        Some(match code {
            2 => Operation::All,
            3 => Operation::Read,
            4 => Operation::Write,
            5 => Operation::Create,
            6 => Operation::Delete,
            7 => Operation::Alter,
            8 => Operation::Describe,
            9 => Operation::ClusterAction,
            10 => Operation::DescribeConfigs,
            11 => Operation::AlterConfigs,
            12 => Operation::IdempotentWrite,
            13 => Operation::CreateTokens,
            14 => Operation::DescribeTokens,
            15 => Operation::TwoPhaseCommit,
            _ => return None,
        })
    }

    pub fn code(self) -> i8 {
        match self {
            Operation::All => 2,
            Operation::Read => 3,
            Operation::Write => 4,
            Operation::Create => 5,
            Operation::Delete => 6,
            Operation::Alter => 7,
            Operation::Describe => 8,
            Operation::ClusterAction => 9,
            Operation::DescribeConfigs => 10,
            Operation::AlterConfigs => 11,
            Operation::IdempotentWrite => 12,
            Operation::CreateTokens => 13,
            Operation::DescribeTokens => 14,
            Operation::TwoPhaseCommit => 15,
        }
    }

    /// Whether an ALLOW of `self` grants `wanted` (ALL grants all; READ, WRITE, DELETE and
    /// ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS).
    fn allows(self, wanted: Operation) -> bool {
        use Operation::*;
        self == All
            || self == wanted
            || (wanted == Describe && matches!(self, Read | Write | Delete | Alter))
            || (wanted == DescribeConfigs && self == AlterConfigs)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Permission {
    Deny,
    Allow,
}

impl Permission {
    pub const ANY: i8 = 1;

    pub fn from_code(code: i8) -> Option<Permission> {
        match code {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }

    pub fn code(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }
}

/// One ACL (Kafka's AclBinding): who may or may not do what to which resources.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `Type:name`, e.g. `User:alice`, or `User:*`.
    pub principal: String,
    /// A client address, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// Every ACL of the cluster. Shared (`Arc`) between image versions until it changes, so a
/// shard can tell in one pointer comparison whether its authorizer is current.
pub type AclSet = Arc<BTreeSet<AclBinding>>;

/// Why a binding cannot be created (Kafka's INVALID_REQUEST messages).
pub fn check_new_binding(b: &AclBinding) -> Result<(), String> {
    if b.resource_name.is_empty() {
        return Err("Resource name should not be empty".into());
    }
    if b.resource_type == ResourceType::Cluster && b.resource_name != CLUSTER_NAME {
        return Err(format!("The only valid name for the CLUSTER resource is {CLUSTER_NAME}"));
    }
    check_principal(&b.principal)?;
    Ok(())
}

/// `Type:name` with both parts present (Kafka's SecurityUtils.parseKafkaPrincipal).
pub fn check_principal(principal: &str) -> Result<(), String> {
    match principal.split_once(':') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok(()),
        _ => Err(format!("expected a string in format principalType:principalName but got {principal}")),
    }
}

/// A filter over bindings (DescribeAcls, DeleteAcls); None = any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatternFilter {
    Any,
    /// Every binding that would apply to the named resource: LITERAL equal, LITERAL `*`,
    /// PREFIXED a prefix of it.
    Match,
    Exactly(PatternType),
}

impl PatternFilter {
    pub fn from_code(code: i8) -> Option<PatternFilter> {
        match code {
            PatternType::ANY => Some(PatternFilter::Any),
            PatternType::MATCH => Some(PatternFilter::Match),
            c => PatternType::from_code(c).map(PatternFilter::Exactly),
        }
    }
}

impl AclFilter {
    pub fn matches(&self, b: &AclBinding) -> bool {
        let name_ok = match (&self.resource_name, self.pattern) {
            (None, _) => true,
            (Some(n), PatternFilter::Match) => match b.pattern_type {
                PatternType::Literal => b.resource_name == *n || b.resource_name == WILDCARD,
                PatternType::Prefixed => n.starts_with(&b.resource_name),
            },
            (Some(n), _) => b.resource_name == *n,
        };
        let pattern_ok = match self.pattern {
            PatternFilter::Any | PatternFilter::Match => true,
            PatternFilter::Exactly(p) => b.pattern_type == p,
        };
        self.resource_type.is_none_or(|t| t == b.resource_type)
            && name_ok
            && pattern_ok
            && self.principal.as_ref().is_none_or(|p| *p == b.principal)
            && self.host.as_ref().is_none_or(|h| *h == b.host)
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission.is_none_or(|p| p == b.permission)
    }
}

/// Kafka's `super.users` and `allow.everyone.if.no.acl.found`.
#[derive(Clone, Debug, Default)]
pub struct AuthorizerSettings {
    pub super_users: HashSet<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

/// The entry part of a binding, as the authorizer keeps it under its resource pattern.
#[derive(Debug)]
struct Entry {
    principal: String,
    host: Host,
    operation: Operation,
    permission: Permission,
}

/// An ACL's host, parsed once: `*`, an address, or a string no client address equals.
#[derive(Debug)]
enum Host {
    Any,
    Ip(IpAddr),
    Never,
}

impl Host {
    fn of(host: &str) -> Host {
        if host == WILDCARD {
            Host::Any
        } else {
            host.parse().map_or(Host::Never, Host::Ip)
        }
    }

    fn matches(&self, client: Option<IpAddr>) -> bool {
        match self {
            Host::Any => true,
            Host::Ip(ip) => client == Some(*ip),
            Host::Never => false,
        }
    }
}

/// The ACLs of one resource type, indexed for the decision.
#[derive(Debug, Default)]
struct TypeAcls {
    literal: HashMap<String, Vec<Entry>>,
    wildcard: Vec<Entry>,
    /// (prefix, entries), one per prefix.
    prefixed: Vec<(String, Vec<Entry>)>,
}

/// The decision over one ACL set; rebuilt when the set changes.
#[derive(Debug)]
pub struct Authorizer {
    settings: Arc<AuthorizerSettings>,
    by_type: HashMap<ResourceType, TypeAcls>,
}

impl Authorizer {
    pub fn new(settings: Arc<AuthorizerSettings>, acls: &BTreeSet<AclBinding>) -> Authorizer {
        let mut by_type: HashMap<ResourceType, TypeAcls> = HashMap::new();
        for b in acls {
            let t = by_type.entry(b.resource_type).or_default();
            let entry = Entry { principal: b.principal.clone(), host: Host::of(&b.host), operation: b.operation, permission: b.permission };
            match b.pattern_type {
                PatternType::Literal if b.resource_name == WILDCARD => t.wildcard.push(entry),
                PatternType::Literal => t.literal.entry(b.resource_name.clone()).or_default().push(entry),
                PatternType::Prefixed => match t.prefixed.iter_mut().find(|(p, _)| *p == b.resource_name) {
                    Some((_, entries)) => entries.push(entry),
                    None => t.prefixed.push((b.resource_name.clone(), vec![entry])),
                },
            }
        }
        Authorizer { settings, by_type }
    }

    /// May `principal`, connected from `host`, do `operation` to the named resource?
    pub fn authorize(&self, principal: &str, host: Option<IpAddr>, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        if self.settings.super_users.contains(principal) {
            return true;
        }
        let Some(t) = self.by_type.get(&resource_type) else {
            return self.settings.allow_everyone_if_no_acl_found;
        };
        let sections = t.literal.get(name).into_iter().chain(std::iter::once(&t.wildcard));
        let sections = sections.chain(t.prefixed.iter().filter(|(p, _)| name.starts_with(p.as_str())).map(|(_, e)| e));
        let (mut bound, mut allowed) = (false, false);
        for entries in sections {
            for e in entries {
                bound = true;
                let who = e.principal == principal || e.principal == WILDCARD_PRINCIPAL;
                if !who || !e.host.matches(host) {
                    continue;
                }
                match e.permission {
                    // A DENY denies its own operation only (or everything, as ALL): a DENY
                    // of READ does not deny DESCRIBE.
                    Permission::Deny if e.operation == Operation::All || e.operation == operation => return false,
                    Permission::Deny => {}
                    Permission::Allow => allowed |= e.operation.allows(operation),
                }
            }
        }
        if bound {
            allowed
        } else {
            self.settings.allow_everyone_if_no_acl_found
        }
    }
}

impl Authorizer {
    /// Whether the principal may do `operation` to some resource of the type (Kafka's
    /// authorizeByResourceType, simplified): a super user; or an ALLOW that grants it, with
    /// no DENY of it on every resource (`*`); or no ACL of the type at all and
    /// `allow.everyone.if.no.acl.found`.
    pub fn authorize_any(&self, principal: &str, host: Option<IpAddr>, operation: Operation, resource_type: ResourceType) -> bool {
        if self.settings.super_users.contains(principal) {
            return true;
        }
        let Some(t) = self.by_type.get(&resource_type) else {
            return self.settings.allow_everyone_if_no_acl_found;
        };
        let applies = |e: &&Entry| (e.principal == principal || e.principal == WILDCARD_PRINCIPAL) && e.host.matches(host);
        if t.wildcard.iter().filter(applies).any(|e| e.permission == Permission::Deny && (e.operation == Operation::All || e.operation == operation)) {
            return false;
        }
        let all = t.literal.values().chain(t.prefixed.iter().map(|(_, e)| e)).chain(std::iter::once(&t.wildcard));
        all.flatten().filter(applies).any(|e| e.permission == Permission::Allow && e.operation.allows(operation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(t: ResourceType, name: &str, p: PatternType, principal: &str, op: Operation, perm: Permission) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern_type: p,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn authorizer(acls: &[AclBinding], super_users: &[&str], allow_if_none: bool) -> Authorizer {
        let settings = AuthorizerSettings { super_users: super_users.iter().map(|s| s.to_string()).collect(), allow_everyone_if_no_acl_found: allow_if_none };
        Authorizer::new(Arc::new(settings), &acls.iter().cloned().collect())
    }

    const H: Option<IpAddr> = None;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    use Operation::*;
    use PatternType::*;
    use Permission::*;
    use ResourceType::*;

    #[test]
    fn literal_prefixed_and_wildcard_patterns() {
        let a = authorizer(
            &[
                acl(Topic, "orders", Literal, "User:alice", Read, Allow),
                acl(Topic, "logs-", Prefixed, "User:alice", Write, Allow),
                acl(Topic, "*", Literal, "User:bob", Describe, Allow),
            ],
            &[],
            false,
        );
        assert!(a.authorize("User:alice", H, Read, Topic, "orders"));
        assert!(!a.authorize("User:alice", H, Read, Topic, "orders2"), "a literal is not a prefix");
        assert!(a.authorize("User:alice", H, Write, Topic, "logs-app"));
        assert!(!a.authorize("User:alice", H, Write, Topic, "log"));
        assert!(a.authorize("User:bob", H, Describe, Topic, "anything"));
        assert!(!a.authorize("User:bob", H, Read, Topic, "anything"));
        assert!(!a.authorize("User:carol", H, Describe, Topic, "orders"));
        // No ACL on groups at all: the default decides.
        assert!(!a.authorize("User:alice", H, Read, Group, "g"));
    }

    #[test]
    fn deny_wins_and_implication_is_for_allow_only() {
        let a = authorizer(
            &[
                acl(Topic, "t", Literal, "User:*", All, Allow),
                acl(Topic, "t", Literal, "User:eve", Read, Deny),
                acl(Group, "g", Literal, "User:alice", Read, Allow),
                acl(Cluster, CLUSTER_NAME, Literal, "User:alice", AlterConfigs, Allow),
            ],
            &[],
            false,
        );
        assert!(!a.authorize("User:eve", H, Read, Topic, "t"), "DENY beats ALLOW ALL");
        assert!(a.authorize("User:eve", H, Describe, Topic, "t"), "a DENY of READ does not deny DESCRIBE");
        assert!(a.authorize("User:eve", H, Write, Topic, "t"));
        assert!(a.authorize("User:alice", H, Describe, Group, "g"), "READ implies DESCRIBE");
        assert!(!a.authorize("User:alice", H, Delete, Group, "g"));
        assert!(a.authorize("User:alice", H, DescribeConfigs, Cluster, CLUSTER_NAME), "ALTER_CONFIGS implies DESCRIBE_CONFIGS");
        assert!(!a.authorize("User:alice", H, Describe, Cluster, CLUSTER_NAME));
    }

    #[test]
    fn hosts_super_users_and_the_no_acl_default() {
        let mut only_from = acl(Topic, "t", Literal, "User:alice", Read, Allow);
        only_from.host = "10.0.0.1".into();
        let a = authorizer(&[only_from], &["User:admin"], true);
        assert!(a.authorize("User:alice", ip("10.0.0.1"), Read, Topic, "t"));
        assert!(!a.authorize("User:alice", ip("10.0.0.2"), Read, Topic, "t"), "bound to the resource: no default");
        assert!(a.authorize("User:admin", ip("10.0.0.2"), Delete, Topic, "t"), "super users pass");
        assert!(a.authorize("User:anyone", H, Read, Topic, "unbound"), "allow.everyone.if.no.acl.found");
        let strict = authorizer(&[], &[], false);
        assert!(!strict.authorize("User:anyone", H, Read, Topic, "unbound"));
    }

    #[test]
    fn filters_select_as_kafka_does() {
        let lit = acl(Topic, "orders", Literal, "User:alice", Read, Allow);
        let pre = acl(Topic, "ord", Prefixed, "User:bob", Write, Deny);
        let wild = acl(Topic, "*", Literal, "User:bob", Read, Allow);
        let group = acl(Group, "orders", Literal, "User:alice", Read, Allow);
        let any =
            AclFilter { resource_type: None, resource_name: None, pattern: PatternFilter::Any, principal: None, host: None, operation: None, permission: None };
        let all = [&lit, &pre, &wild, &group];
        let selected = |f: &AclFilter| all.iter().filter(|b| f.matches(b)).count();
        assert_eq!(selected(&any), 4);
        let matching = AclFilter { resource_type: Some(Topic), resource_name: Some("orders".into()), pattern: PatternFilter::Match, ..any.clone() };
        assert_eq!(selected(&matching), 3, "literal, prefix and wildcard apply to topic orders");
        let exact = AclFilter { resource_type: Some(Topic), resource_name: Some("orders".into()), pattern: PatternFilter::Exactly(Literal), ..any.clone() };
        assert_eq!(selected(&exact), 1);
        let by_principal = AclFilter { principal: Some("User:bob".into()), permission: Some(Deny), ..any.clone() };
        assert_eq!(selected(&by_principal), 1);
    }

    #[test]
    fn authorize_any_finds_some_topic() {
        let a = authorizer(&[acl(Topic, "t-", Prefixed, "User:alice", Write, Allow)], &[], false);
        assert!(a.authorize_any("User:alice", H, Write, Topic));
        assert!(!a.authorize_any("User:bob", H, Write, Topic));
        let denied = authorizer(&[acl(Topic, "t-", Prefixed, "User:alice", Write, Allow), acl(Topic, "*", Literal, "User:alice", All, Deny)], &[], false);
        assert!(!denied.authorize_any("User:alice", H, Write, Topic));
    }

    #[test]
    fn new_bindings_are_checked() {
        assert!(check_new_binding(&acl(Cluster, "other", Literal, "User:a", Alter, Allow)).is_err());
        assert!(check_new_binding(&acl(Topic, "", Literal, "User:a", Read, Allow)).is_err());
        assert!(check_new_binding(&acl(Topic, "t", Literal, "alice", Read, Allow)).is_err());
        assert!(check_new_binding(&acl(Topic, "t", Literal, "User:a", Read, Allow)).is_ok());
    }
}
