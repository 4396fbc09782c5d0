//! StreamsGroupTopologyDescriptionUpdate 0 (KIP-1331): a Kafka 4.4 broker stores topology
//! descriptions only through its `group.streams.topology.description.plugin.class`, unset
//! by default, and then answers UNSUPPORTED_VERSION with these words; shardlog has no such
//! plugin, so it answers as a default Kafka 4.4 broker. Clients send it only when a
//! heartbeat said TopologyDescriptionRequired, which shardlog never says.
use std::rc::Rc;

use kafka_protocol::messages::{StreamsGroupTopologyDescriptionUpdateRequest, StreamsGroupTopologyDescriptionUpdateResponse};

use super::str_bytes;
use crate::protocol::ErrorCode;
use crate::server::dispatch::{RequestMeta, Response};
use crate::server::shard::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, meta: RequestMeta, _req: StreamsGroupTopologyDescriptionUpdateRequest) -> Response {
    let message = ctx.image().features.streams_groups_enabled().then_some("The broker has no streams group topology description plugin configured.");
    meta.respond(
        &StreamsGroupTopologyDescriptionUpdateResponse::default()
            .with_error_code(ErrorCode::UNSUPPORTED_VERSION.code())
            .with_error_message(message.map(str_bytes)),
    )
}
