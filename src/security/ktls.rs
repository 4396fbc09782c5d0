//! Kernel TLS (kTLS): whether this kernel can take over a connection's record layer
//! after the handshake, so `sendfile` keeps serving fetches from the page cache.
//!
//! Only the probe exists so far: connections are encrypted in user space
//! (`tls_stream.rs`) either way. The machines this was built on run kernels without
//! `CONFIG_TLS` (no `tls` upper-layer protocol), where nothing could test a kTLS path.
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

/// Whether `setsockopt(TCP_ULP, "tls")` works on a connected loopback socket.
pub fn kernel_tls_available() -> Result<(), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    let ulp = b"tls";
    // SAFETY: setsockopt on a descriptor `stream` owns, with a valid buffer and length.
    let rc = unsafe { libc::setsockopt(stream.as_raw_fd(), libc::SOL_TCP, libc::TCP_ULP, ulp.as_ptr().cast(), ulp.len() as libc::socklen_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("setsockopt(TCP_ULP, \"tls\"): {} (a kernel without CONFIG_TLS, or the tls module not loaded)", std::io::Error::last_os_error()))
    }
}
