//! One plain HTTP/1.1 GET before a run, on a connection of its own (`run --url` without
//! `--model` asks `GET {URL}/models` which models the server serves).
//!
//! Owns: dialling the endpoint (TLS and proxy as a run's connections have them), the GET,
//! and reading its body up to a limit within a timeout.
//! Does not own: what the body means (the caller parses it), run connections or timing.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use tokio_rustls::TlsConnector;

use super::connect::dial;
use super::Trust;
use crate::clock::Clock;
use crate::link::{Emulator, Link};
use crate::vocab::{BaseUrl, Proxy, Scheme};

/// The largest body read, bytes.
pub const BODY_MAX: usize = 4 << 20;

/// `GET {endpoint}{path}` with `headers`: the status and the body, or why there is none.
pub async fn get(
    endpoint: &BaseUrl,
    path: &str,
    trust: &Trust,
    proxy: Option<&Proxy>,
    headers: &[(http::HeaderName, http::HeaderValue)],
    timeout: Duration,
) -> Result<(u16, Bytes), String> {
    let work = async {
        let tls = match endpoint.scheme {
            Scheme::Http => None,
            Scheme::Https => Some(TlsConnector::from(
                trust
                    .client_config(&[b"http/1.1"])
                    .map_err(|e| format!("TLS set-up: {e}"))?,
            )),
        };
        let d = dial(
            endpoint,
            tls.as_ref(),
            proxy,
            &Link::default(),
            &Emulator::default(),
            Clock::start(),
            0,
        )
        .await
        .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(d.io))
            .await
            .map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = http::Request::get(format!("{}{path}", endpoint.prefix))
            .header(http::header::HOST, endpoint.authority())
            .header(http::header::ACCEPT, "application/json");
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("building the request: {e}"))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = resp.status().as_u16();
        let body = Limited::new(resp.into_body(), BODY_MAX)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs())))
}
