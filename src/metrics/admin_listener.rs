//! The HTTP admin listener (`admin_listener`, default 127.0.0.1:9644): `GET /metrics`
//! (OpenMetrics text for Prometheus), `GET /v1/status/live`, `GET /v1/status/ready`, and
//! `GET /v1/cluster/shards` (leaders and replicas per broker and shard, JSON).
//!
//! It runs on its own thread with tiny_http, never on a shard: a scrape only sends each
//! shard a message and waits for its copy of the counters (`AdminSource` does that), so
//! the shards' hot path sees one extra task per scrape and nothing else.
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

/// What the admin listener serves; implemented by the broker (`server/admin.rs`).
pub trait AdminSource: Send + Sync + 'static {
    /// The body of GET /metrics.
    fn metrics(&self) -> String;
    /// Ok when the broker is ready for traffic, else why not.
    fn ready(&self) -> Result<(), String>;
    /// The body of GET /v1/cluster/shards (JSON: leaders and replicas per broker and
    /// shard), or why there is none yet.
    fn cluster_shards(&self) -> Result<String, String>;
    /// The body of GET /v1/remote-log (JSON: every tiered partition's remote log in
    /// figures), or why there is none yet.
    fn remote_log(&self) -> Result<String, String>;
}

/// The running listener; the thread serves until the process exits.
pub struct AdminListener {
    pub local_addr: SocketAddr,
}

/// Binds `addr` now (a taken port fails the broker's start with a clear message) and
/// serves it on a thread named `admin`.
///
/// The thread, and the threads tiny_http starts from it (they inherit the policy), run
/// under SCHED_IDLE: every shard owns a core, so a scrape's rendering may only use a core
/// when its shard is idle, never preempt a shard mid-request. Under full load a scrape
/// waits for idle time rather than adding to request latency.
pub fn start(addr: &str, source: Arc<dyn AdminSource>) -> io::Result<AdminListener> {
    let (bound_tx, bound_rx) = std::sync::mpsc::channel::<io::Result<SocketAddr>>();
    let addr_owned = addr.to_string();
    std::thread::Builder::new().name("admin".into()).spawn(move || {
        lower_to_idle_priority();
        let server = match tiny_http::Server::http(&addr_owned) {
            Ok(s) => s,
            Err(e) => {
                let _ = bound_tx.send(Err(io::Error::other(format!("admin_listener {addr_owned}: {e}"))));
                return;
            }
        };
        let Some(local) = server.server_addr().to_ip() else {
            let _ = bound_tx.send(Err(io::Error::other(format!("admin_listener {addr_owned}: not an IP address"))));
            return;
        };
        let _ = bound_tx.send(Ok(local));
        for request in server.incoming_requests() {
            let response = answer(request.method(), request.url(), source.as_ref());
            if let Err(e) = request.respond(response) {
                tracing::debug!(error = %e, "admin listener: cannot write a response");
            }
        }
    })?;
    let local_addr = bound_rx.recv().map_err(|_| io::Error::other(format!("admin_listener {addr}: the admin thread stopped")))??;
    Ok(AdminListener { local_addr })
}

/// SCHED_IDLE for the calling thread (best effort: a failure is logged, the listener
/// still serves).
fn lower_to_idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads a valid sched_param; pid 0 = the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        tracing::warn!(error = %io::Error::last_os_error(), "admin listener: cannot lower its thread to SCHED_IDLE; scrapes compete with the shards for CPU");
    }
}

type Response = tiny_http::Response<std::io::Cursor<Vec<u8>>>;

fn with_type(body: String, status: u16, content_type: &str) -> Response {
    let header = tiny_http::Header::from_bytes("Content-Type", content_type).expect("a valid header");
    tiny_http::Response::from_string(body).with_status_code(status).with_header(header)
}

fn answer(method: &tiny_http::Method, url: &str, source: &dyn AdminSource) -> Response {
    if !matches!(method, tiny_http::Method::Get | tiny_http::Method::Head) {
        return with_type("only GET\n".into(), 405, "text/plain");
    }
    // Query strings (Prometheus adds none, but a browser might) do not change the answer.
    let path = url.split('?').next().unwrap_or("");
    match path {
        "/metrics" => with_type(source.metrics(), 200, super::exposition::CONTENT_TYPE),
        "/v1/status/live" => with_type("{\"live\":true}\n".into(), 200, "application/json"),
        "/v1/status/ready" => match source.ready() {
            Ok(()) => with_type("{\"ready\":true}\n".into(), 200, "application/json"),
            Err(why) => with_type(format!("{}\n", serde_json::json!({"ready": false, "reason": why})), 503, "application/json"),
        },
        "/v1/cluster/shards" => match source.cluster_shards() {
            Ok(body) => with_type(body, 200, "application/json"),
            Err(why) => with_type(format!("{}\n", serde_json::json!({"error": why})), 503, "application/json"),
        },
        "/v1/remote-log" => match source.remote_log() {
            Ok(body) => with_type(body, 200, "application/json"),
            Err(why) => with_type(format!("{}\n", serde_json::json!({"error": why})), 503, "application/json"),
        },
        _ => with_type("not found: try /metrics, /v1/status/live, /v1/status/ready, /v1/cluster/shards, /v1/remote-log\n".into(), 404, "text/plain"),
    }
}
