//! `authorized_operations` bit sets, as Kafka 4.1 answers them with no authorizer
//! configured: every operation the resource type supports (Kafka's
//! `AclEntry.supportedOperations`), one bit per `AclOperation` code
//! (`Utils.to32BitField`). Checked against a real Kafka 4.1 node by
//! tests/integration/test_admin_compat.py.
//!
//! "Not requested" is the schema default, `INT32_MIN`.

/// What a response carries when the client did not ask for authorized operations.
pub const NOT_REQUESTED: i32 = i32::MIN;

/// Kafka's `AclOperation` codes (org.apache.kafka.common.acl.AclOperation).
pub mod op {
    pub const READ: u8 = 3;
    pub const WRITE: u8 = 4;
    pub const CREATE: u8 = 5;
    pub const DELETE: u8 = 6;
    pub const ALTER: u8 = 7;
    pub const DESCRIBE: u8 = 8;
    pub const CLUSTER_ACTION: u8 = 9;
    pub const DESCRIBE_CONFIGS: u8 = 10;
    pub const ALTER_CONFIGS: u8 = 11;
    pub const IDEMPOTENT_WRITE: u8 = 12;
}

const fn bits(ops: &[u8]) -> i32 {
    let mut field = 0i32;
    let mut i = 0;
    while i < ops.len() {
        assert!(ops[i] < 31, "an operation code is a bit of an int32");
        field |= 1 << ops[i];
        i += 1;
    }
    field
}

/// A topic: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
pub const TOPIC: i32 = bits(&[op::READ, op::WRITE, op::CREATE, op::DELETE, op::ALTER, op::DESCRIBE, op::DESCRIBE_CONFIGS, op::ALTER_CONFIGS]);

/// A group: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
pub const GROUP: i32 = bits(&[op::READ, op::DELETE, op::DESCRIBE, op::DESCRIBE_CONFIGS, op::ALTER_CONFIGS]);

/// The cluster: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
/// IDEMPOTENT_WRITE (the token operations belong to USER resources, not the cluster).
pub const CLUSTER: i32 = bits(&[op::CREATE, op::ALTER, op::DESCRIBE, op::CLUSTER_ACTION, op::DESCRIBE_CONFIGS, op::ALTER_CONFIGS, op::IDEMPOTENT_WRITE]);

/// `set` when the client asked, else `NOT_REQUESTED`.
pub fn if_requested(requested: bool, set: i32) -> i32 {
    if requested {
        set
    } else {
        NOT_REQUESTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values a Kafka 4.1 node without an authorizer answers (read off the wire).
    #[test]
    fn kafka_values() {
        assert_eq!(TOPIC, 3576);
        assert_eq!(GROUP, 3400);
        assert_eq!(CLUSTER, 8096);
        assert_eq!(if_requested(false, TOPIC), -2147483648);
    }
}
