//! Rates over spans too short to resolve (`vocab::MIN_RATE_SPAN_NS`): a raw-socket HTTP/1.1
//! server written here (nothing shared with `src/sim`) writes a whole chat-completions SSE
//! stream, every content chunk and the terminal events, in ONE write, so the client reads
//! every token in one read and stamps them all alike. The decode span is 0: the decode rate
//! must be undefined (`None`, never infinite or 1e9-scale), counted in the cell's
//! `rate_span_unresolved`, and absent from the `decode_tok_s` histogram, while TPOT (a time)
//! stays a finite 0 and `output_tok_s` (over E2E from the intended start) stays defined.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use spark_bench::driver::exchange::{
    exchange, Clock, Connector, Conversation, RecordMeta, RequestSpec, Trust,
};
use spark_bench::link::Link;
use spark_bench::plan::{targets, Target};
use spark_bench::recorder::{CellKey, Metric, Recorder, Summary};
use spark_bench::vocab::{ApiFlavour, OutcomeKind, TokenSource, TransportKind};

const DELTAS: u32 = 6;

/// The whole response (head and chat-completions SSE body) as one buffer.
fn whole_response() -> Vec<u8> {
    let body = crate::conn_lifecycle::chat_sse_body(DELTAS as usize);
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Reads one request (head + `Content-Length` body) and answers it with one write.
async fn serve_one(mut s: TcpStream) {
    s.set_nodelay(true).unwrap();
    let mut buf = Vec::new();
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                break;
            }
        }
        let mut chunk = [0u8; 8192];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    // ONE write: every content chunk and the terminal events together.
    s.write_all(&whole_response()).await.unwrap();
    // Keep the socket open until the client is done with it.
    let _ = s.read(&mut [0u8; 64]).await;
}

async fn one_write_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve_one(s));
        }
    });
    format!("http://{addr}/v1")
}

fn target(base_url: &str) -> Target {
    Target {
        name: "one-read".into(),
        base_url: Some(base_url.into()),
        sim_profile: None,
        api: ApiFlavour::ChatCompletions,
        model: "m".into(),
        ws_warmup: false,
        request_timing: false,
        request_timeout: std::time::Duration::from_secs(10),
        stall_timeout: std::time::Duration::from_secs(5),
        ..targets::builtin("sim-gpu").unwrap()
    }
}

#[tokio::test]
async fn every_token_in_one_read_has_no_decode_rate_and_is_counted() {
    let base_url = one_write_server().await;
    let t = target(&base_url);
    let clock = Clock::start();
    let kind = TransportKind::Http;
    let c =
        Arc::new(Connector::new(&t, kind, Trust::PublicRoots, Link::default(), clock, 1).unwrap());
    let mut s = c.session();
    let mut conv = Conversation::new("be brief", t.api, kind, false);
    conv.add_user_message("hi");
    let spec = RequestSpec {
        max_output_tokens: 16,
        ..Default::default()
    };
    let meta = RecordMeta {
        intended_ns: clock.now_ns(),
        ..Default::default()
    };
    let (r, reply) = exchange(
        &mut s,
        &t,
        &mut conv,
        &spec,
        &meta,
        &CancellationToken::new(),
    )
    .await;

    assert!(reply.ok);
    assert_eq!(r.outcome, OutcomeKind::Ok, "{r:?}");
    assert_eq!(r.output_tokens, DELTAS);
    assert_eq!(r.token_source, TokenSource::ServerUsage);
    assert_eq!(r.chunks.len(), DELTAS as usize);
    // The premise: one read, one stamp for every chunk, so the decode span is 0.
    assert!(
        r.chunks.iter().all(|c| c.at_ns == r.chunks[0].at_ns),
        "chunks were not read together: {:?}",
        r.chunks
    );
    assert_eq!(r.first_token_ns, r.last_token_ns);

    // Decode rate: undefined, not infinite.
    assert_eq!(r.decode_tok_s(), None);
    assert!(r.rate_span_unresolved(r.chunks.len() as u64));
    // TPOT is a time: a real, finite 0 ("all at once").
    assert_eq!(r.tpot_ns(), Some(0.0));
    // Output rate: over E2E from the intended start (connect + request + response), which
    // a whole loopback exchange cannot finish within the 50 µs floor.
    let e2e = r.e2e_ns().unwrap();
    let out = r.output_tok_s().expect("E2E is resolvable");
    assert!(out.is_finite() && out > 0.0, "{out}");
    assert_eq!(out, f64::from(DELTAS) * 1e9 / e2e as f64);

    // Recorded: nothing in the decode histogram, one request counted instead.
    let mut rec = Recorder::new();
    rec.add_request(&r);
    let cell = rec.cell(&CellKey::new("one-read", "http")).unwrap();
    assert_eq!(cell.ok(), 1);
    assert!(cell.histogram(Metric::DecodeTokS).is_none());
    assert_eq!(cell.histogram(Metric::Tpot).map(|h| h.len()), Some(1));
    assert_eq!(cell.histogram(Metric::OutputTokS).map(|h| h.len()), Some(1));
    assert_eq!(cell.rate_span_unresolved, 1);
    let summary = Summary::from_recorder(&rec);
    let sc = summary.cell("one-read", "http").unwrap();
    assert_eq!(sc.rate_span_unresolved, 1);
    assert!(sc.metric(Metric::DecodeTokS).is_none());
    assert!(sc.metric(Metric::OutputTokS).unwrap().max.is_finite());
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["cells"][0]["rate_span_unresolved"], 1);
}
