//! ACL checks of requests (issue 24, point 4), Kafka's StandardAuthorizer on every shard.
//!
//! Each shard keeps the authorizer built from the ACLs of the image it applied and
//! rebuilds it only when the ACL set changes (one pointer comparison per request). Without
//! `authorizer_class_name` nothing is checked: `Access::allows` is true without a lookup.
use std::cell::RefCell;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;

use crate::security::acl::{AclSet, Authorizer, AuthorizerSettings, Operation, ResourceType, CLUSTER_NAME};
use crate::security::principal::Principal;

use super::dispatch::RequestMeta;
use super::shard::ShardContext;

pub struct Authorization {
    settings: Option<Arc<AuthorizerSettings>>,
    current: RefCell<Option<(AclSet, Rc<Authorizer>)>>,
}

impl Authorization {
    pub fn new(settings: Option<AuthorizerSettings>) -> Authorization {
        Authorization { settings: settings.map(Arc::new), current: RefCell::new(None) }
    }

    /// Whether an authorizer is configured (else the ACL APIs answer SECURITY_DISABLED).
    pub fn enabled(&self) -> bool {
        self.settings.is_some()
    }

    fn authorizer(&self, settings: &Arc<AuthorizerSettings>, acls: &AclSet) -> Rc<Authorizer> {
        let mut current = self.current.borrow_mut();
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
pub struct Access {
    authorizer: Option<Rc<Authorizer>>,
    principal: Principal,
    host: Option<IpAddr>,
}

impl Access {
    /// Everything allowed (no authorizer, or a check Kafka does not make).
    pub fn unchecked() -> Access {
        Access { authorizer: None, principal: Principal::ANONYMOUS, host: None }
    }

    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.authorize(self.principal.as_str(), self.host, operation, resource_type, name),
        }
    }

    /// Whether some resource of the type allows `operation` (Kafka's
    /// authorizeByResourceType: an idempotent producer with WRITE on any topic).
    pub fn allows_any(&self, operation: Operation, resource_type: ResourceType) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.authorize_any(self.principal.as_str(), self.host, operation, resource_type),
        }
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
    pub fn access(&self, meta: &RequestMeta) -> Access {
        let Some(settings) = &self.authorization.settings else {
            return Access::unchecked();
        };
        let image = self.image();
        let authorizer = self.authorization.authorizer(settings, &image.security.acls);
        Access { authorizer: Some(authorizer), principal: meta.principal, host: meta.peer.map(|p| p.ip()) }
    }
}
