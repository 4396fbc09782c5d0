//! The controller listener over mutual TLS (Kafka's `CONTROLLER:SSL` with
//! `ssl.client.auth=required`): every raft RPC, broker registration, heartbeat and
//! forwarded request between nodes rides on TLS, and each side proves itself by
//! certificate. A node whose certificate no trusted CA signed fails the handshake; one
//! whose principal may not act for the cluster (neither in `super.users` nor allowed
//! CLUSTER_ACTION by the ACLs, when an authorizer is configured) is refused after it,
//! before its first request is read — so it can neither vote, replicate, register nor
//! forward. tokio-rustls, because the controller runs on tokio.
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::cluster::image::MetadataImage;
use crate::security::acl::{Authorizer, AuthorizerSettings, Operation, ResourceType, CLUSTER_NAME};
use crate::security::peer_security::{MutualTls, PeerSecurity};
use crate::security::ssl_principal::SslPrincipalMapper;

/// A controller connection: plain TCP or TLS over it, either side.
pub trait RpcStream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> RpcStream for T {}

pub struct RpcTls {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
    principals: Arc<SslPrincipalMapper>,
    /// None: no authorizer configured, every node with a trusted certificate is in (as
    /// Kafka without an authorizer).
    authorizer: Option<Arc<AuthorizerSettings>>,
    handshake_timeout: Duration,
}

impl std::fmt::Debug for RpcTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcTls").field("authorizer", &self.authorizer.is_some()).finish_non_exhaustive()
    }
}

impl RpcTls {
    pub fn new(m: MutualTls, authorizer: Option<AuthorizerSettings>) -> RpcTls {
        RpcTls {
            acceptor: TlsAcceptor::from(m.server),
            connector: TlsConnector::from(m.client),
            principals: m.principals,
            authorizer: authorizer.map(Arc::new),
            handshake_timeout: m.handshake_timeout,
        }
    }

    /// The server side: the handshake (bounded), then the peer's principal checked
    /// against the cluster's current ACLs. Err says why the peer is refused.
    pub async fn accept(&self, tcp: TcpStream, image: &MetadataImage) -> Result<(Box<dyn RpcStream>, String), String> {
        let stream = tokio::time::timeout(self.handshake_timeout, self.acceptor.accept(tcp))
            .await
            .map_err(|_| format!("no TLS handshake within {:?}", self.handshake_timeout))?
            .map_err(|e| format!("TLS handshake: {e}"))?;
        let cert = stream.get_ref().1.peer_certificates().and_then(|c| c.first()).ok_or("no client certificate")?;
        let principal = self.principals.principal_of(cert.as_ref())?;
        if !self.may_act_for_the_cluster(&principal, image) {
            return Err(format!("{principal} may not act for the cluster (CLUSTER_ACTION: add it to super.users)"));
        }
        Ok((Box::new(stream), principal))
    }

    fn may_act_for_the_cluster(&self, principal: &str, image: &MetadataImage) -> bool {
        match &self.authorizer {
            None => true,
            Some(settings) => Authorizer::new(settings.clone(), &image.security.acls).authorize(
                principal,
                None,
                Operation::ClusterAction,
                ResourceType::Cluster,
                CLUSTER_NAME,
            ),
        }
    }

    /// The client side: the handshake with the peer at `addr` (its certificate must name
    /// the host unless `ssl.endpoint.identification.algorithm` is empty), bounded.
    pub async fn connect(&self, tcp: TcpStream, addr: &str) -> Result<Box<dyn RpcStream>, String> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
        let name = PeerSecurity::server_name(host)?;
        let stream = tokio::time::timeout(self.handshake_timeout, self.connector.connect(name, tcp))
            .await
            .map_err(|_| format!("no TLS handshake within {:?}", self.handshake_timeout))?
            .map_err(|e| format!("TLS handshake: {e}"))?;
        Ok(Box::new(stream))
    }
}
