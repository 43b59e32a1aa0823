//! A plain test client for the simulator (hyper client conn, tokio-rustls, tokio-tungstenite),
//! written here on purpose: it must not share code with spark-bench's own transport.
//!
//! Both test binaries use it, each a part: an item only one of them reads carries a
//! targeted `allow(dead_code)` naming the binary that does.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use spark_bench::link::{BoxIo, Link};
use spark_bench::sim::{self, Profile, SimConfig, SimHandle};
use spark_bench::tls::SelfSigned;
use tokio_tungstenite::tungstenite::Message;

/// Timing-sensitive tests (rates, link phases) hold this so they do not share the two CI
/// cores with each other.
#[allow(dead_code)] // taken by the timing tests only
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub async fn sim(profile: &str) -> SimHandle {
    sim::spawn(SimConfig::new(Profile::builtin(profile).unwrap()))
        .await
        .unwrap()
}

/// Opens a TCP (+ client-side link) (+ TLS) connection; returns it with the phase times.
pub struct Opened {
    pub io: BoxIo,
    #[allow(dead_code)] // read by the timing tests only
    pub tcp: Duration,
    #[allow(dead_code)] // read by the timing tests only
    pub tls: Duration,
}

pub async fn open(
    addr: std::net::SocketAddr,
    cert: Option<&SelfSigned>,
    link: Option<Link>,
    alpn: &[&[u8]],
) -> Opened {
    let t0 = Instant::now();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    if let Some(l) = &link {
        l.connect_delay().await;
    }
    let tcp_t = t0.elapsed();
    let mut io: BoxIo = Box::pin(tcp);
    if let Some(l) = &link {
        io = l.wrap(io, 7, None).0;
    }
    let t1 = Instant::now();
    if let Some(cert) = cert {
        let connector = tokio_rustls::TlsConnector::from(cert.client_config(alpn).unwrap());
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = connector.connect(name, io).await.unwrap();
        io = Box::pin(tls);
    }
    Opened {
        io,
        tcp: tcp_t,
        tls: t1.elapsed(),
    }
}

pub type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

pub async fn h1(io: BoxIo) -> Sender {
    let (tx, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    tx
}

pub async fn h1_to(h: &SimHandle) -> Sender {
    h1(open(h.addr, None, None, &[]).await.io).await
}

/// One SSE event as the client saw it.
#[derive(Debug, Clone)]
pub struct Ev {
    #[allow(dead_code)] // read by the timing tests only
    pub at: Instant,
    pub event: Option<String>,
    pub data: String,
}

impl Ev {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }
}

pub struct Reply {
    #[allow(dead_code)] // read by the timing tests only
    pub sent_at: Instant,
    #[allow(dead_code)] // read by the timing tests only
    pub head_at: Instant,
    pub status: u16,
    pub headers: http::HeaderMap,
    pub events: Vec<Ev>,
    #[allow(dead_code)] // read by tests/integration only
    pub body: String,
    /// The body ended with an error (reset) rather than cleanly.
    #[allow(dead_code)] // read by tests/integration only
    pub body_error: bool,
}

impl Reply {
    #[allow(dead_code)] // used by tests/integration only
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
    pub fn data(&self) -> Vec<Value> {
        self.events
            .iter()
            .filter(|e| e.data != "[DONE]")
            .map(Ev::json)
            .collect()
    }
}

pub async fn post(tx: &mut Sender, path: &str, body: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = http::Request::post(format!("/v1{path}"))
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("authorization", "Bearer sk-test");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    send(tx, req).await
}

#[allow(dead_code)] // used by tests/integration only
pub async fn get(tx: &mut Sender, path: &str) -> Reply {
    let req = http::Request::get(format!("/v1{path}"))
        .header("host", "localhost")
        .body(Full::new(Bytes::new()))
        .unwrap();
    send(tx, req).await
}

async fn send(tx: &mut Sender, req: http::Request<Full<Bytes>>) -> Reply {
    tx.ready().await.unwrap();
    let sent_at = Instant::now();
    let resp = tx
        .send_request(req)
        .await
        .unwrap_or_else(|e| panic!("request failed: {e:?}"));
    let head_at = Instant::now();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut body = resp.into_body();
    let mut text = String::new();
    let mut events = Vec::new();
    let mut pending = String::new();
    let mut body_error = false;
    loop {
        match body.frame().await {
            None => break,
            Some(Err(_)) => {
                body_error = true;
                break;
            }
            Some(Ok(f)) => {
                let at = Instant::now();
                if let Ok(d) = f.into_data() {
                    let s = String::from_utf8_lossy(&d).to_string();
                    text.push_str(&s);
                    pending.push_str(&s);
                    while let Some(i) = pending.find("\n\n") {
                        let block: String = pending[..i].to_string();
                        pending.drain(..i + 2);
                        let mut ev = Ev {
                            at,
                            event: None,
                            data: String::new(),
                        };
                        for line in block.lines() {
                            if let Some(e) = line.strip_prefix("event: ") {
                                ev.event = Some(e.to_string());
                            } else if let Some(d) = line.strip_prefix("data: ") {
                                ev.data = d.to_string();
                            }
                        }
                        events.push(ev);
                    }
                }
            }
        }
    }
    Reply {
        sent_at,
        head_at,
        status,
        headers,
        events,
        body: text,
        body_error,
    }
}

pub type Ws = tokio_tungstenite::WebSocketStream<BoxIo>;

pub async fn ws_over(io: BoxIo, url: &str, headers: &[(&str, &str)]) -> Ws {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    tokio_tungstenite::client_async(req, io).await.unwrap().0
}

#[allow(dead_code)] // used by tests/integration only
pub async fn ws_to(h: &SimHandle, headers: &[(&str, &str)]) -> Ws {
    ws_over(open(h.addr, None, None, &[]).await.io, &h.ws_url(), headers).await
}

pub async fn ws_send(ws: &mut Ws, v: Value) -> Instant {
    ws.send(Message::text(v.to_string())).await.unwrap();
    Instant::now()
}

/// Reads JSON text frames until one of type `until` (or `error`) arrives.
pub async fn ws_until(ws: &mut Ws, until: &str) -> Vec<(Instant, Value)> {
    let mut out = Vec::new();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), ws.next())
            .await
            .expect("ws event timeout");
        match m {
            Some(Ok(Message::Text(t))) => {
                let v: Value =
                    serde_json::from_str(t.as_str()).unwrap_or(Value::String(t.to_string()));
                let ty = v["type"].as_str().unwrap_or("").to_string();
                out.push((Instant::now(), v));
                if ty == until || ty == "error" {
                    return out;
                }
            }
            Some(Ok(_)) => {}
            _ => return out,
        }
    }
}

#[allow(dead_code)] // used by tests/integration only
pub fn types(evs: &[(Instant, Value)]) -> Vec<String> {
    evs.iter()
        .map(|(_, v)| v["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

pub fn create(input: &str, extra: Value) -> Value {
    let mut v = serde_json::json!({"type": "response.create", "model": "sim", "store": false,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": input}]}]});
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}
