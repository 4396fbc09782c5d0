//! One member's current assignment → its target (Kafka 4.4's CurrentAssignmentBuilder):
//! being written.
