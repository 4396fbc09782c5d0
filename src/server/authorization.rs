//! ACL checks of requests (issue 24, point 4), Kafka's StandardAuthorizer on every shard.
//!
//! Each shard keeps the authorizer built from the ACLs of the image it applied and
//! rebuilds it only when the ACL set changes (one pointer comparison per request). Without
//! `authorizer_class_name` nothing is checked: `Access::allows` is true without a lookup.
//!
//! A denial is checked once more against the ACLs the controller committed (read at most
//! once per request, on the deny path only): an ACL created through another shard a moment
//! ago may not be applied here yet, and the client that created it expects it in force.
use std::cell::{OnceCell, RefCell};
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;

use crate::security::acl::{AclSet, Authorizer, AuthorizerSettings, Operation, ResourceType, CLUSTER_NAME};
use crate::security::principal::Principal;

use super::dispatch::RequestMeta;
use super::shard::ShardContext;

pub struct Authorization {
    settings: Option<Arc<AuthorizerSettings>>,
    /// Built from the applied image's ACLs.
    current: RefCell<Option<(AclSet, Rc<Authorizer>)>>,
    /// Built from the committed image's ACLs while this shard lags behind them.
    committed: RefCell<Option<(AclSet, Rc<Authorizer>)>>,
}

impl Authorization {
    pub fn new(settings: Option<AuthorizerSettings>) -> Authorization {
        Authorization { settings: settings.map(Arc::new), current: RefCell::new(None), committed: RefCell::new(None) }
    }

    /// Whether an authorizer is configured (else the ACL APIs answer SECURITY_DISABLED).
    pub fn enabled(&self) -> bool {
        self.settings.is_some()
    }

    fn authorizer(&self, settings: &Arc<AuthorizerSettings>, acls: &AclSet) -> Rc<Authorizer> {
        Self::cached(&self.current, settings, acls)
    }

    fn cached(slot: &RefCell<Option<(AclSet, Rc<Authorizer>)>>, settings: &Arc<AuthorizerSettings>, acls: &AclSet) -> Rc<Authorizer> {
        let mut current = slot.borrow_mut();
        match &*current {
            Some((built_from, authorizer)) if Arc::ptr_eq(built_from, acls) => authorizer.clone(),
            _ => {
                let authorizer = Rc::new(Authorizer::new(settings.clone(), acls));
                *current = Some((acls.clone(), authorizer.clone()));
                authorizer
            }
        }
    }
}

/// What one request may do: its principal and address against the shard's authorizer.
pub struct Access<'a> {
    ctx: Option<&'a ShardContext>,
    authorizer: Option<Rc<Authorizer>>,
    /// The authorizer over the committed ACLs, when they differ from the applied ones
    /// (looked up on the first denial).
    committed: OnceCell<Option<Rc<Authorizer>>>,
    principal: Principal,
    host: Option<IpAddr>,
}

impl Access<'_> {
    /// Everything allowed (no authorizer, or a check Kafka does not make).
    pub fn unchecked() -> Access<'static> {
        Access { ctx: None, authorizer: None, committed: OnceCell::new(), principal: Principal::ANONYMOUS, host: None }
    }

    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        let Some(a) = &self.authorizer else { return true };
        let check = |a: &Authorizer| a.authorize(self.principal.as_str(), self.host, operation, resource_type, name);
        check(a) || self.committed().is_some_and(|c| check(&c))
    }

    /// The authorizer over the committed ACLs if this shard has not applied them yet.
    fn committed(&self) -> Option<Rc<Authorizer>> {
        let ctx = self.ctx?;
        self.committed
            .get_or_init(|| {
                let settings = ctx.authorization.settings.as_ref()?;
                let committed = ctx.controller.image();
                let applied = ctx.image();
                if Arc::ptr_eq(&committed.security.acls, &applied.security.acls) {
                    return None;
                }
                Some(Authorization::cached(&ctx.authorization.committed, settings, &committed.security.acls))
            })
            .clone()
    }

    /// Whether some resource of the type allows `operation` (Kafka's
    /// authorizeByResourceType: an idempotent producer with WRITE on any topic).
    pub fn allows_any(&self, operation: Operation, resource_type: ResourceType) -> bool {
        let Some(a) = &self.authorizer else { return true };
        let check = |a: &Authorizer| a.authorize_any(self.principal.as_str(), self.host, operation, resource_type);
        check(a) || self.committed().is_some_and(|c| check(&c))
    }

    pub fn allows_topic(&self, operation: Operation, topic: &str) -> bool {
        self.allows(operation, ResourceType::Topic, topic)
    }

    pub fn allows_group(&self, operation: Operation, group: &str) -> bool {
        self.allows(operation, ResourceType::Group, group)
    }

    pub fn allows_cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    pub fn allows_transactional_id(&self, operation: Operation, id: &str) -> bool {
        self.allows(operation, ResourceType::TransactionalId, id)
    }

    /// Kafka's `authorized_operations` bit set: which of the `supported` operations (one
    /// bit per AclOperation code) the principal may do to the resource.
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str, supported: i32) -> i32 {
        if self.authorizer.is_none() {
            return supported;
        }
        (0..31)
            .filter(|bit| supported & (1 << bit) != 0)
            .filter(|&bit| Operation::from_code(bit as i8).is_some_and(|op| self.allows(op, resource_type, name)))
            .fold(0, |set, bit| set | (1 << bit))
    }

    /// Whether checks are made at all.
    pub fn is_checked(&self) -> bool {
        self.authorizer.is_some()
    }
}

impl ShardContext {
    /// What the request `meta` may do, against the ACLs this shard has applied.
    pub fn access(&self, meta: &RequestMeta) -> Access<'_> {
        let Some(settings) = &self.authorization.settings else {
            return Access::unchecked();
        };
        let image = self.image();
        let authorizer = self.authorization.authorizer(settings, &image.security.acls);
        Access { ctx: Some(self), authorizer: Some(authorizer), committed: OnceCell::new(), principal: meta.principal, host: meta.peer.map(|p| p.ip()) }
    }
}
