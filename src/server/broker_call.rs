//! One request to another broker's inter-broker listener and its response (the
//! transaction coordinator's WriteTxnMarkers and AddPartitionsToTxn verification): a
//! connection per call (`replication::peer_connection`, secured as that listener is),
//! bounded in time and in the response size it accepts. Not a hot path: one call per
//! transaction end and leader broker, so the codecs are kafka-protocol's.
use std::time::Duration;

use futures::FutureExt;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};

use crate::cluster::image::BrokerMeta;
use crate::replication::peer_connection::PeerConnection;
use crate::security::peer_security::PeerSecurity;

/// Largest response accepted (a WriteTxnMarkers answer is a few bytes per partition).
const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Sends `req` as `api_key` v`version` to `broker` and decodes the answer, within `timeout`.
pub async fn call<Req, Resp>(
    broker: &BrokerMeta,
    security: &PeerSecurity,
    client_id: &str,
    api_key: ApiKey,
    version: i16,
    req: &Req,
    timeout: Duration,
) -> Result<Resp, String>
where
    Req: Encodable + HeaderVersion,
    Resp: Decodable + HeaderVersion,
{
    let exchange = async {
        let mut conn = PeerConnection::connect(broker, security, client_id.to_string()).await.map_err(|e| e.to_string())?;
        conn.call(api_key, version, req, MAX_RESPONSE_BYTES).await.map_err(|e| e.to_string())
    };
    futures::select! {
        r = exchange.fuse() => r,
        _ = glommio::timer::sleep(timeout).fuse() => Err(format!("broker {} did not answer within {timeout:?}", broker.id)),
    }
}
