//! Routes a decoded request to its handler in `handlers/`.
use std::rc::Rc;

use kafka_protocol::messages::{ApiKey, RequestKind};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

use super::handlers;
use super::shard::ShardContext;
use crate::protocol::produce_input::ProduceInput;
use crate::protocol::produce_request_view::ProduceRequestView;
use crate::protocol::response_errors::ResponseErrors;
use crate::protocol::throttle_time::ThrottleTime;
use crate::protocol::{encode_response, DecodedRequest, ResponseBufs};
use crate::security::principal::Principal;

/// What a request gets back.
pub enum Response {
    /// The response frame(s), written in order (a Fetch response's record bytes may be
    /// file slices, sent with `sendfile`).
    Frames(ResponseBufs),
    /// Nothing is sent (Produce with acks=0), as Kafka does.
    NoResponse,
    /// The connection is closed without a response (the client reconnects and retries).
    Close,
}

/// Request context a handler needs to answer.
#[derive(Clone, Copy, Debug)]
pub struct RequestMeta {
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    /// The client's address (JoinGroup records it as the member's client host).
    pub peer: Option<std::net::SocketAddr>,
    /// The listener the request came in on (index into `ShardContext::listeners.all`):
    /// brokers are advertised at their endpoint of the same listener, as Kafka does.
    pub listener: u8,
    /// Who sent it (ACLs are checked against it).
    pub principal: Principal,
    /// The connection authenticated with a delegation token (it may not manage tokens).
    pub token_authenticated: bool,
    /// The time its client must wait before the next request (client quotas, set before
    /// the handler runs): every response carries it.
    pub throttle_time_ms: i32,
}

/// Where a connection came from: the client's address, the listener it reached, and who
/// it authenticated as.
#[derive(Clone, Copy, Debug)]
pub struct Origin {
    pub peer: Option<std::net::SocketAddr>,
    pub listener: u8,
    pub principal: Principal,
    pub token_authenticated: bool,
}

impl RequestMeta {
    /// The context of a decoded request that came in from `origin`.
    pub fn of(req: &DecodedRequest, origin: Origin) -> RequestMeta {
        RequestMeta {
            api_key: req.api_key,
            version: req.version,
            correlation_id: req.header.correlation_id,
            peer: origin.peer,
            listener: origin.listener,
            principal: origin.principal,
            token_authenticated: origin.token_authenticated,
            throttle_time_ms: 0,
        }
    }

    /// Encodes `body` as this request's response frame, counting its error codes in the
    /// shard's metrics (Kafka's ErrorsPerSec).
    pub fn respond<R: Encodable + HeaderVersion + ThrottleTime + ResponseErrors + Clone>(&self, body: &R) -> Response {
        // Produce and Fetch count theirs where they are answered (their hot-path writers
        // build no response structs).
        if !matches!(self.api_key, ApiKey::Produce | ApiKey::Fetch) {
            let api = self.api_key as i16;
            crate::metrics::with(|m| body.error_codes(&mut |code| m.record_error(api, code, 1)));
        }
        let throttled;
        let body = if self.throttle_time_ms > 0 {
            // Rare (a client over its quota): the copy is cheaper than threading the time
            // through every handler.
            let mut b = body.clone();
            b.set_throttle_time_ms(self.throttle_time_ms);
            throttled = b;
            &throttled
        } else {
            body
        };
        match encode_response(self.correlation_id, self.api_key, self.version, body) {
            Ok(frame) => Response::Frames(smallvec::smallvec![frame.freeze().into()]),
            Err(e) => {
                // Our own response failed to encode: a bug, not client input. Closing the
                // connection (no response) is what the client can recover from.
                tracing::error!(api = ?self.api_key, version = self.version, error = %e, "cannot encode response");
                Response::Close
            }
        }
    }
}

/// A Produce request the hot path read in place (`protocol/produce_request_view.rs`).
pub async fn dispatch_produce_view(ctx: &Rc<ShardContext>, view: ProduceRequestView, origin: Origin, throttle_time_ms: i32) -> Response {
    let meta = RequestMeta {
        api_key: ApiKey::Produce,
        version: view.version(),
        correlation_id: view.correlation_id(),
        peer: origin.peer,
        listener: origin.listener,
        principal: origin.principal,
        token_authenticated: origin.token_authenticated,
        throttle_time_ms,
    };
    handlers::produce::handle(ctx, meta, ProduceInput::View(view)).await
}

/// `throttle_time_ms`: what the client's quotas gave this request before it is handled.
pub async fn dispatch(ctx: &Rc<ShardContext>, req: DecodedRequest, origin: Origin, throttle_time_ms: i32) -> Response {
    let meta = RequestMeta { throttle_time_ms, ..RequestMeta::of(&req, origin) };
    // Only the group and topic-mutation APIs want it (no String per request for the others).
    let client_id = || req.header.client_id.as_deref().unwrap_or("").to_string();
    match req.body {
        RequestKind::ApiVersions(r) => {
            let image = ctx.image();
            let node = (!image.cluster_id.is_empty()).then(|| (image.cluster_id.as_str(), ctx.config.node_id));
            handlers::api_versions::handle(meta, &r, node, &image, ctx.config.unstable_feature_versions_enable)
        }
        RequestKind::Metadata(r) => handlers::metadata::handle(ctx, meta, r).await,
        RequestKind::Produce(r) => handlers::produce::handle(ctx, meta, ProduceInput::Decoded(r)).await,
        RequestKind::Fetch(r) => handlers::fetch::handle(ctx, meta, r, req.header.client_id.as_deref().unwrap_or("")).await,
        RequestKind::ListOffsets(r) => handlers::list_offsets::handle(ctx, meta, r).await,
        RequestKind::OffsetForLeaderEpoch(r) => handlers::offset_for_leader_epoch::handle(ctx, meta, r).await,
        RequestKind::CreateTopics(r) => handlers::create_topics::handle(ctx, meta, r, client_id()).await,
        RequestKind::DeleteTopics(r) => handlers::delete_topics::handle(ctx, meta, r, client_id()).await,
        RequestKind::CreatePartitions(r) => handlers::create_partitions::handle(ctx, meta, r, client_id()).await,
        RequestKind::DeleteRecords(r) => handlers::delete_records::handle(ctx, meta, r).await,
        RequestKind::DescribeConfigs(r) => handlers::describe_configs::handle(ctx, meta, r).await,
        RequestKind::IncrementalAlterConfigs(r) => handlers::incremental_alter_configs::handle(ctx, meta, r).await,
        RequestKind::AlterConfigs(r) => handlers::alter_configs::handle(ctx, meta, r).await,
        RequestKind::DescribeCluster(r) => handlers::describe_cluster::handle(ctx, meta, r),
        RequestKind::DescribeQuorum(r) => handlers::describe_quorum::handle(ctx, meta, r).await,
        RequestKind::ElectLeaders(r) => handlers::elect_leaders::handle(ctx, meta, r).await,
        RequestKind::AlterPartitionReassignments(r) => handlers::alter_partition_reassignments::handle(ctx, meta, r).await,
        RequestKind::ListPartitionReassignments(r) => handlers::list_partition_reassignments::handle(ctx, meta, r),
        RequestKind::DescribeLogDirs(r) => handlers::describe_log_dirs::handle(ctx, meta, r).await,
        RequestKind::AlterReplicaLogDirs(r) => handlers::alter_replica_log_dirs::handle(ctx, meta, r).await,
        RequestKind::DescribeTopicPartitions(r) => handlers::describe_topic_partitions::handle(ctx, meta, r).await,
        RequestKind::ListConfigResources(r) => handlers::list_config_resources::handle(ctx, meta, r),
        RequestKind::DescribeAcls(r) if ctx.authorization.enabled() => handlers::acls::describe(ctx, meta, r),
        RequestKind::CreateAcls(r) if ctx.authorization.enabled() => handlers::acls::create(ctx, meta, r).await,
        RequestKind::DeleteAcls(r) if ctx.authorization.enabled() => handlers::acls::delete(ctx, meta, r).await,
        RequestKind::DescribeAcls(_) => handlers::acls_disabled::describe(meta),
        RequestKind::CreateAcls(r) => handlers::acls_disabled::create(meta, r),
        RequestKind::DeleteAcls(r) => handlers::acls_disabled::delete(meta, r),
        RequestKind::AlterClientQuotas(r) => handlers::alter_client_quotas::handle(ctx, meta, r).await,
        RequestKind::UpdateFeatures(r) => handlers::update_features::handle(ctx, meta, r).await,
        RequestKind::AddRaftVoter(r) => handlers::quorum_membership::add_raft_voter(ctx, meta, r).await,
        RequestKind::RemoveRaftVoter(r) => handlers::quorum_membership::remove_raft_voter(ctx, meta, r).await,
        RequestKind::UnregisterBroker(r) => handlers::quorum_membership::unregister_broker(ctx, meta, r).await,
        RequestKind::CreateDelegationToken(r) => handlers::delegation_tokens::create(ctx, meta, r).await,
        RequestKind::RenewDelegationToken(r) => handlers::delegation_tokens::renew(ctx, meta, r).await,
        RequestKind::ExpireDelegationToken(r) => handlers::delegation_tokens::expire(ctx, meta, r).await,
        RequestKind::DescribeDelegationToken(r) => handlers::delegation_tokens::describe(ctx, meta, r),
        RequestKind::DescribeClientQuotas(r) => handlers::describe_client_quotas::handle(ctx, meta, r),
        RequestKind::DescribeUserScramCredentials(r) => handlers::describe_user_scram_credentials::handle(ctx, meta, r),
        RequestKind::AlterUserScramCredentials(r) => handlers::alter_user_scram_credentials::handle(ctx, meta, r).await,
        RequestKind::ListTransactions(r) => handlers::list_transactions::handle(ctx, meta, r).await,
        RequestKind::DescribeTransactions(r) => handlers::describe_transactions::handle(ctx, meta, r).await,
        RequestKind::InitProducerId(r) => handlers::init_producer_id::handle(ctx, meta, r).await,
        RequestKind::FindCoordinator(r) => handlers::find_coordinator::handle(ctx, meta, r).await,
        RequestKind::AddPartitionsToTxn(r) => handlers::add_partitions_to_txn::handle(ctx, meta, r).await,
        RequestKind::AddOffsetsToTxn(r) => handlers::add_offsets_to_txn::handle(ctx, meta, r).await,
        RequestKind::EndTxn(r) => handlers::end_txn::handle(ctx, meta, r).await,
        RequestKind::TxnOffsetCommit(r) => handlers::txn_offset_commit::handle(ctx, meta, r).await,
        RequestKind::WriteTxnMarkers(r) => handlers::write_txn_markers::handle(ctx, meta, r).await,
        RequestKind::DescribeProducers(r) => handlers::describe_producers::handle(ctx, meta, r).await,
        RequestKind::JoinGroup(r) => handlers::join_group::handle(ctx, meta, r, client_id()).await,
        RequestKind::SyncGroup(r) => handlers::sync_group::handle(ctx, meta, r).await,
        RequestKind::Heartbeat(r) => handlers::heartbeat::handle(ctx, meta, r).await,
        RequestKind::LeaveGroup(r) => handlers::leave_group::handle(ctx, meta, r).await,
        RequestKind::OffsetCommit(r) => handlers::offset_commit::handle(ctx, meta, r).await,
        RequestKind::OffsetFetch(r) => handlers::offset_fetch::handle(ctx, meta, r).await,
        RequestKind::DescribeGroups(r) => handlers::describe_groups::handle(ctx, meta, r).await,
        RequestKind::ListGroups(r) => handlers::list_groups::handle(ctx, meta, r).await,
        RequestKind::DeleteGroups(r) => handlers::delete_groups::handle(ctx, meta, r).await,
        RequestKind::OffsetDelete(r) => handlers::offset_delete::handle(ctx, meta, r).await,
        RequestKind::ConsumerGroupHeartbeat(r) => handlers::consumer_group_heartbeat::handle(ctx, meta, r, client_id()).await,
        RequestKind::ConsumerGroupDescribe(r) => handlers::consumer_group_describe::handle(ctx, meta, r).await,
        RequestKind::ShareGroupHeartbeat(r) => handlers::share_group_heartbeat::handle(ctx, meta, r, client_id()).await,
        RequestKind::StreamsGroupHeartbeat(r) => handlers::streams_group_heartbeat::handle(ctx, meta, r, client_id()).await,
        RequestKind::StreamsGroupDescribe(r) => handlers::streams_group_describe::handle(ctx, meta, r).await,
        RequestKind::StreamsGroupTopologyDescriptionUpdate(r) => handlers::streams_group_topology_description_update::handle(ctx, meta, r).await,
        RequestKind::ShareGroupDescribe(r) => handlers::share_group_describe::handle(ctx, meta, r).await,
        RequestKind::ShareFetch(r) => handlers::share_fetch::handle(ctx, meta, r).await,
        RequestKind::ShareAcknowledge(r) => handlers::share_acknowledge::handle(ctx, meta, r).await,
        RequestKind::InitializeShareGroupState(r) => handlers::share_group_state::initialize(ctx, meta, r).await,
        RequestKind::ReadShareGroupState(r) => handlers::share_group_state::read(ctx, meta, r).await,
        RequestKind::WriteShareGroupState(r) => handlers::share_group_state::write(ctx, meta, r).await,
        RequestKind::DeleteShareGroupState(r) => handlers::share_group_state::delete(ctx, meta, r).await,
        RequestKind::ReadShareGroupStateSummary(r) => handlers::share_group_state::summary(ctx, meta, r).await,
        RequestKind::DescribeShareGroupOffsets(r) => handlers::describe_share_group_offsets::handle(ctx, meta, r).await,
        RequestKind::AlterShareGroupOffsets(r) => handlers::alter_share_group_offsets::handle(ctx, meta, r).await,
        RequestKind::DeleteShareGroupOffsets(r) => handlers::delete_share_group_offsets::handle(ctx, meta, r).await,
        // On a SASL listener these are answered by the connection's authenticator until
        // the client is authenticated; here (after it, or on another listener) they are out
        // of place.
        RequestKind::SaslHandshake(_) | RequestKind::SaslAuthenticate(_) => super::sasl_authenticator::not_on_this_listener(meta, meta.api_key),
        other => {
            // decode_request admits only APIs in our ApiVersions table; reaching here
            // means the table and this match disagree.
            tracing::error!(api = ?meta.api_key, "no handler for an admitted API; closing connection");
            drop(other);
            Response::Close
        }
    }
}
