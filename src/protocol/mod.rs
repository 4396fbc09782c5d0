//! Kafka wire protocol glue (placeholder until the protocol branch lands).
pub mod record_batch;
