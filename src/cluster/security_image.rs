//! The cluster's security state in the metadata image (issue 24): SCRAM credentials, by
//! user and mechanism (Kafka's UserScramCredentialRecords), and ACLs (Kafka's
//! AccessControlEntryRecords), client quotas (ClientQuotaRecords) and delegation tokens
//! (DelegationTokenRecords: never their HMACs).
//!
//! Small and rarely changed, it travels in snapshots as one JSON section
//! (`controller/snapshot.rs`), so a new kind of security record needs no new snapshot layout.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::security::acl::AclSet;
use crate::security::client_quotas::ClientQuotas;
use crate::security::delegation_token::{self, DelegationToken};
use crate::security::scram::{ScramCredential, ScramMechanism};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityImage {
    /// user → mechanism → credential; a user without credentials has no entry.
    #[serde(default)]
    pub scram_credentials: BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>,
    /// Every ACL; identical bindings are one (creating one twice changes nothing).
    #[serde(default)]
    pub acls: AclSet,
    /// Client quotas by entity (Kafka's ClientQuotaRecords).
    #[serde(default)]
    pub client_quotas: ClientQuotas,
    /// Delegation tokens by id.
    #[serde(default)]
    pub delegation_tokens: BTreeMap<String, DelegationToken>,
}

impl SecurityImage {
    pub fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.scram_credentials.get(user)?.get(&mechanism)
    }

    pub fn set_scram_credential(&mut self, user: &str, mechanism: ScramMechanism, credential: ScramCredential) {
        self.scram_credentials.entry(user.to_string()).or_default().insert(mechanism, credential);
    }

    /// Removes one credential; the user's entry goes with its last one.
    pub fn remove_scram_credential(&mut self, user: &str, mechanism: ScramMechanism) -> bool {
        let Some(by_mechanism) = self.scram_credentials.get_mut(user) else { return false };
        let removed = by_mechanism.remove(&mechanism).is_some();
        if by_mechanism.is_empty() {
            self.scram_credentials.remove(user);
        }
        removed
    }

    /// The token whose HMAC (under `secret`) is `hmac` (Renew/ExpireDelegationToken name
    /// tokens so). Compared in constant time; tokens are few.
    pub fn token_by_hmac(&self, secret: &[u8], hmac: &[u8]) -> Option<&DelegationToken> {
        use subtle::ConstantTimeEq;
        self.delegation_tokens.values().find(|t| bool::from(delegation_token::hmac(secret, &t.token_id).ct_eq(hmac)))
    }
}
