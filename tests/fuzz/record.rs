//! Fuzz target for `spark-bench record`'s request path: whatever bytes a client sends (HTTP/1.1
//! request heads and bodies, sized, chunked, pipelined, cut short; WebSocket upgrades), split
//! into writes at random, go to one recording proxy (`capture::record_with`, over real TCP on
//! 127.0.0.1) in front of a tiny upstream that answers every request with a short SSE stream.
//!
//! Invariants: no panic; the proxy answers or closes within the header timeout plus a margin
//! (never holds a client for good); anything it answers starts with an HTTP/1.1 status line;
//! after each input it still serves a valid request (200 with the upstream's bytes).

use std::sync::OnceLock;
use std::time::Duration;

use spark_bench::capture::{self, Bounds, Config};
use spark_bench::rng::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::engine::{pick, Target};

pub const RECORD: Target = Target {
    name: "record",
    dict: &[
        b"POST /v1/chat/completions HTTP/1.1\r\n",
        b"POST /v1/responses HTTP/1.1\r\n",
        b"GET /v1/responses HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
        b"Host: x\r\n",
        b"Content-Length: 5\r\n",
        b"Content-Length: 99999999999\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Expect: 100-continue\r\n",
        b"\r\n",
        b"0\r\n\r\n",
        b"ffffffff\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}",
        b"{\"type\":\"response.create\",\"input\":\"hi\"}",
    ],
    generate,
    run,
};

/// The header timeout of the fuzzed proxy: short, so a stalled input costs little.
const HEADER_TIMEOUT: Duration = Duration::from_millis(300);
/// The most one input may hold a connection: the timeout plus a margin for a loaded machine.
const ANSWER_LIMIT: Duration = Duration::from_secs(5);
/// The proxy's body limit here: small, so over-limit bodies are cheap to send.
const BODY_LIMIT: u64 = 4096;

const SSE: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n";

struct Proxy {
    rt: tokio::runtime::Runtime,
    addr: std::net::SocketAddr,
}

/// One proxy and upstream for the whole fuzz run.
fn proxy() -> &'static Proxy {
    static P: OnceLock<Proxy> = OnceLock::new();
    P.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let addr = rt.block_on(async {
            let up = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let up_addr = up.local_addr().unwrap();
            tokio::spawn(upstream(up));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let config = Config {
                upstream: spark_bench::vocab::BaseUrl::parse(&format!("http://{up_addr}/v1"))
                    .unwrap(),
            };
            let bounds = Bounds {
                header_timeout: HEADER_TIMEOUT,
                max_request_body: BODY_LIMIT,
            };
            tokio::spawn(capture::record_with(
                listener,
                config,
                bounds,
                spark_bench::clock::Clock::start(),
                std::future::pending::<()>(),
            ));
            addr
        });
        Proxy { rt, addr }
    })
}

/// An upstream that answers every HTTP/1.1 request head with a short SSE stream and closes.
async fn upstream(l: tokio::net::TcpListener) {
    while let Ok((mut s, _)) = l.accept().await {
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{SSE}",
                SSE.len()
            );
            let _ = s.write_all(resp.as_bytes()).await;
            // Drain what else comes (a body) until the client closes.
            while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
        });
    }
}

fn generate(r: &mut Rng) -> Vec<u8> {
    let path = pick(
        r,
        &["/v1/chat/completions", "/v1/responses", "/v1/models", "/x"],
    );
    let body = pick(
        r,
        &[
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true}",
            "{\"model\":\"m\",\"input\":\"hi\",\"stream\":true}",
            "not json",
            "",
        ],
    );
    let mut out = Vec::new();
    for _ in 0..r.below(3) + 1 {
        out.extend_from_slice(format!("POST {path} HTTP/1.1\r\nHost: x\r\n").as_bytes());
        match r.below(4) {
            0 => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                out.extend_from_slice(
                    format!("{:x}\r\n{body}\r\n0\r\n\r\n", body.len()).as_bytes(),
                );
            }
            1 => {
                // Over the limit, declared.
                let n = BODY_LIMIT + 1 + r.below(100_000);
                out.extend_from_slice(format!("Content-Length: {n}\r\n\r\n").as_bytes());
                out.extend(std::iter::repeat_n(b' ', r.below(8192) as usize));
            }
            _ => {
                out.extend_from_slice(
                    format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes(),
                );
            }
        }
    }
    out
}

/// Sends `input` in random pieces, then half-closes; returns what the proxy answered.
async fn exchange(
    addr: std::net::SocketAddr,
    input: &[u8],
    r: &mut Rng,
) -> Result<Vec<u8>, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut rd, mut wr) = tcp.into_split();
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < input.len() {
        let n = (r.below((input.len() - at) as u64) + 1) as usize;
        pieces.push(input[at..at + n].to_vec());
        at += n;
    }
    let writer = tokio::spawn(async move {
        for p in pieces {
            if wr.write_all(&p).await.is_err() {
                return;
            }
        }
        // Leave the connection open (no shutdown): the proxy must end it on its own.
        tokio::time::sleep(ANSWER_LIMIT * 2).await;
        drop(wr);
    });
    let mut got = Vec::new();
    let read = tokio::time::timeout(ANSWER_LIMIT, async {
        let mut buf = vec![0u8; 8192];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    writer.abort();
    if read.is_err() {
        return Err(format!(
            "the proxy held the connection over {ANSWER_LIMIT:?} (answered {} bytes)",
            got.len()
        ));
    }
    Ok(got)
}

fn run(input: &[u8], r: &mut Rng) -> Result<(), String> {
    let p = proxy();
    p.rt.block_on(async {
        let got = exchange(p.addr, input, r).await?;
        if !got.is_empty() && !got.starts_with(b"HTTP/1.1 ") && !got.starts_with(b"\x00") {
            // HTTP/2 frames start with a length; anything else must be an HTTP/1.1 answer.
            return Err(format!(
                "answer is not HTTP: {:?}",
                String::from_utf8_lossy(&got[..got.len().min(80)])
            ));
        }
        let ok = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}";
        let got = exchange(p.addr, ok, &mut Rng::new(1)).await?;
        if !got.starts_with(b"HTTP/1.1 200") || !got.ends_with(SSE.as_bytes()) {
            return Err(format!(
                "the proxy no longer serves a valid request: {:?}",
                String::from_utf8_lossy(&got[..got.len().min(200)])
            ));
        }
        Ok(())
    })
}
