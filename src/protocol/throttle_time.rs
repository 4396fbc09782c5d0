//! `throttle_time_ms` of a response body: how long a client over its quota waits before
//! its next request (KIP-219). Set once for every response a throttled request gets
//! (`server::dispatch::RequestMeta::respond`).
use kafka_protocol::messages::*;

pub trait ThrottleTime {
    /// Sets the field; responses without one (SASL, DescribeQuorum, WriteTxnMarkers:
    /// never throttled by Kafka) ignore it.
    fn set_throttle_time_ms(&mut self, ms: i32);
}

macro_rules! with_field {
    ($($t:ident),* $(,)?) => {
        $(impl ThrottleTime for $t {
            fn set_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = ms;
            }
        })*
    };
}

macro_rules! without_field {
    ($($t:ident),* $(,)?) => {
        $(impl ThrottleTime for $t {
            fn set_throttle_time_ms(&mut self, _ms: i32) {}
        })*
    };
}

with_field!(
    ProduceResponse,
    FetchResponse,
    DescribeAclsResponse,
    DeleteAclsResponse,
    CreateAclsResponse,
    AddPartitionsToTxnResponse,
    SyncGroupResponse,
    OffsetFetchResponse,
    OffsetDeleteResponse,
    LeaveGroupResponse,
    FindCoordinatorResponse,
    OffsetCommitResponse,
    ListPartitionReassignmentsResponse,
    JoinGroupResponse,
    ElectLeadersResponse,
    DescribeUserScramCredentialsResponse,
    DescribeTopicPartitionsResponse,
    DescribeLogDirsResponse,
    DescribeClientQuotasResponse,
    AlterClientQuotasResponse,
    ConsumerGroupHeartbeatResponse,
    AlterUserScramCredentialsResponse,
    TxnOffsetCommitResponse,
    OffsetForLeaderEpochResponse,
    MetadataResponse,
    ListTransactionsResponse,
    ListOffsetsResponse,
    ListGroupsResponse,
    ListConfigResourcesResponse,
    InitProducerIdResponse,
    IncrementalAlterConfigsResponse,
    HeartbeatResponse,
    EndTxnResponse,
    DescribeTransactionsResponse,
    DescribeProducersResponse,
    DescribeGroupsResponse,
    DescribeConfigsResponse,
    DescribeClusterResponse,
    DeleteTopicsResponse,
    DeleteRecordsResponse,
    DeleteGroupsResponse,
    CreateTopicsResponse,
    CreatePartitionsResponse,
    ConsumerGroupDescribeResponse,
    AlterReplicaLogDirsResponse,
    AlterPartitionReassignmentsResponse,
    AlterConfigsResponse,
    AddOffsetsToTxnResponse,
    ApiVersionsResponse,
    CreateDelegationTokenResponse,
    RenewDelegationTokenResponse,
    ExpireDelegationTokenResponse,
    DescribeDelegationTokenResponse,
    UpdateFeaturesResponse,
    ShareGroupHeartbeatResponse,
    StreamsGroupHeartbeatResponse,
    StreamsGroupDescribeResponse,
    StreamsGroupTopologyDescriptionUpdateResponse,
    ShareGroupDescribeResponse,
    ShareFetchResponse,
    ShareAcknowledgeResponse,
    DescribeShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    AddRaftVoterResponse,
    RemoveRaftVoterResponse,
    UnregisterBrokerResponse,
);

without_field!(
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
    DescribeQuorumResponse,
    WriteTxnMarkersResponse,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateResponse,
    WriteShareGroupStateResponse,
    DeleteShareGroupStateResponse,
    ReadShareGroupStateSummaryResponse
);
