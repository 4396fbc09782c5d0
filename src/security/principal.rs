//! A session's principal, as Kafka names it (`User:alice`; `User:ANONYMOUS` for a
//! connection that did not authenticate).
//!
//! Interned so requests carry it as a copyable pointer: each distinct name is stored once
//! for the life of the process. The names come only from authenticated identities (PLAIN
//! users of the config, SCRAM users of the metadata log, certificates the trust store
//! signed), so the set stays as small as the cluster's users.
use std::collections::HashSet;
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Principal(&'static str);

impl Principal {
    pub const ANONYMOUS: Principal = Principal("User:ANONYMOUS");

    /// The principal named `name` (`Type:name`). Takes a lock: called once per
    /// authenticated connection, never per request.
    pub fn intern(name: &str) -> Principal {
        static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
        let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        let names = names.get_or_insert_with(HashSet::new);
        if let Some(known) = names.get(name) {
            return Principal(known);
        }
        let stored: &'static str = Box::leak(name.to_string().into_boxed_str());
        names.insert(stored);
        Principal(stored)
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// The name without its type (`alice` of `User:alice`): what quotas are set for.
    pub fn name(self) -> &'static str {
        self.0.split_once(':').map_or(self.0, |(_, name)| name)
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_returns_the_same_name() {
        let a = Principal::intern("User:alice");
        assert_eq!(a, Principal::intern(&String::from("User:alice")));
        assert!(std::ptr::eq(a.as_str(), Principal::intern("User:alice").as_str()));
        assert_ne!(a, Principal::ANONYMOUS);
        assert_eq!(Principal::intern("User:ANONYMOUS").as_str(), "User:ANONYMOUS");
    }
}
