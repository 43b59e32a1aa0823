//! The recording proxy's side towards the upstream: dialling it (TCP, TLS for https) and
//! which request headers are never forwarded to it.
//!
//! Owns: the upstream byte stream and the hop-by-hop header list, for both the HTTP relay
//! (`relay`) and the WebSocket pump (`ws`). Does not own: speaking HTTP or WebSocket over
//! the stream (`relay`, `ws`).

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::Shared;
use crate::vocab::Scheme;

/// Any upstream byte stream (TCP or TLS over TCP).
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Dials the upstream with `TCP_NODELAY`, over TLS for https (ALPN `alpn`).
pub(crate) async fn dial(shared: &Shared, alpn: &[&[u8]]) -> anyhow::Result<Box<dyn Io>> {
    let up = &shared.upstream;
    let tcp = TcpStream::connect((up.host.as_str(), up.port))
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to the upstream {}: {e}", up.authority()))?;
    let _ = tcp.set_nodelay(true);
    match up.scheme {
        Scheme::Http => Ok(Box::new(tcp)),
        Scheme::Https => {
            let cfg = crate::tls::public_client_config(alpn)?;
            let name = rustls::pki_types::ServerName::try_from(up.host.clone())
                .map_err(|e| anyhow::anyhow!("bad upstream host {:?}: {e}", up.host))?;
            let tls = tokio_rustls::TlsConnector::from(cfg)
                .connect(name, tcp)
                .await
                .map_err(|e| anyhow::anyhow!("TLS to the upstream {}: {e}", up.authority()))?;
            Ok(Box::new(tls))
        }
    }
}

/// Headers never forwarded (hop-by-hop, or set by the upstream connection itself).
pub(crate) fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authorization"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
            | "content-length"
    )
}
