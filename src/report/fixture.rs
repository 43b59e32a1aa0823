//! Synthetic runs for tests, examples and the browser check: records built in code from a
//! seeded model of two targets × four transports, fed through a real [`Recorder`] and
//! written with the real [`RunWriter`], so the directory is exactly what `spark-bench run`
//! writes. Not a simulator: nothing goes over a socket.
//!
//! The model: an emulated 40 ms RTT link; `sim-gpu` (~650 ms server TTFT, ~65 tok/s, one
//! token per chunk) and `sim-wafer` (~100 ms, ~1000 tok/s in bursts of 1–8 tokens); `http`
//! pays DNS + TCP + TLS on every request, `http-pooled` on ~10 % of sessions' first requests,
//! `http2` once per target, `ws` once per session (plus the upgrade) and has less API work per
//! request and reports server timing. One request in 150 on `http` fails with a 500.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::link::Link;
use crate::plan::{Cell, Load, Plan, Target};
use crate::recorder::Recorder;
use crate::rng::Rng;
use crate::store::{RunStatus, RunWriter};
use crate::vocab::{
    ApiFlavour, Chaining, Chunk, ConnectionScope, OutcomeKind, RequestKind, RequestRecord,
    ServerTiming, SessionRecord, TokenSource, TransportKind,
};

/// Knobs of a synthetic run.
#[derive(Debug, Clone)]
pub struct SyntheticOptions {
    /// Measured requests in total (spread over the 8 cells, whole sessions).
    pub requests: u64,
    /// Seed of every random draw.
    pub seed: u64,
    /// Requests per session.
    pub turns: u32,
    /// Output tokens per request, inclusive range.
    pub tokens: (u32, u32),
    /// `load.concurrency` written to the plan (the model itself runs sessions one by one).
    pub concurrency: u32,
    /// Scenario name.
    pub scenario: String,
    /// Final status written to the manifest.
    pub status: RunStatus,
}

impl Default for SyntheticOptions {
    fn default() -> Self {
        SyntheticOptions {
            requests: 192,
            seed: 7,
            turns: 6,
            tokens: (250, 450),
            concurrency: 1,
            scenario: "snake game".into(),
            status: RunStatus::Complete,
        }
    }
}

const MS: u64 = 1_000_000;
const RTT: u64 = 40 * MS;

/// Writes a synthetic run of about `n_requests` measured requests under `dir` (a results
/// root) and returns the run directory.
pub fn synthetic_run(dir: &Path, n_requests: u64, seed: u64) -> anyhow::Result<PathBuf> {
    synthetic_run_with(
        dir,
        &SyntheticOptions {
            requests: n_requests,
            seed,
            ..SyntheticOptions::default()
        },
    )
}

/// Writes a synthetic run with explicit options; returns the run directory.
pub fn synthetic_run_with(dir: &Path, o: &SyntheticOptions) -> anyhow::Result<PathBuf> {
    write_run(dir, o, &plan(o), None)
}

/// Writes `count` shards of one synthetic plan under `root/shard-I/` (for timing `merge` on
/// large inputs without running them): `total` measured requests in all, each shard's
/// records drawn with its own seed, every manifest naming the same whole plan and plan hash,
/// and clock anchors 1 ms apart. Returns the shard directories in index order.
pub fn synthetic_shards(
    root: &Path,
    count: u32,
    total: u64,
    tokens: u32,
) -> anyhow::Result<Vec<PathBuf>> {
    anyhow::ensure!(count > 0, "at least one shard");
    let base = SyntheticOptions {
        requests: total / u64::from(count),
        seed: 100,
        tokens: (tokens, tokens),
        concurrency: count.max(4),
        ..SyntheticOptions::default()
    };
    let whole = plan(&base);
    let hash = crate::plan::shard::plan_hash(&whole);
    let origin: u64 = 1_795_000_000_000_000_000;
    (0..count)
        .map(|index| {
            let mut shard = whole.clone();
            shard.shard = Some(crate::plan::shard::Shard {
                index,
                count,
                plan_hash: hash.clone(),
                plan_load: whole.load.clone(),
                plan_sessions: whole.load.sessions,
            });
            let o = SyntheticOptions {
                seed: base.seed + u64::from(index),
                ..base.clone()
            };
            let anchor = crate::clock::Anchor {
                origin_unix_ns: origin + u64::from(index) * 1_000_000,
                uncertainty_ns: 500,
                how: "synthetic fixture".into(),
            };
            write_run(
                &root.join(format!("shard-{index}")),
                &o,
                &shard,
                Some(anchor),
            )
        })
        .collect()
}

fn write_run(
    dir: &Path,
    o: &SyntheticOptions,
    plan: &Plan,
    anchor: Option<crate::clock::Anchor>,
) -> anyhow::Result<PathBuf> {
    let mut w = RunWriter::create(
        dir,
        plan,
        &[
            "spark-bench".into(),
            "run".into(),
            "scenarios/snake.toml".into(),
        ],
    )?;
    let mut rec = Recorder::new();
    let turns = o.turns.max(1);
    let per_cell = o.requests.div_ceil(8).max(u64::from(turns));
    let sessions = per_cell.div_ceil(u64::from(turns)) as u32;
    let mut clock = 0u64;
    let mut id = 0u64;
    for target in ["sim-gpu", "sim-wafer"] {
        for transport in TransportKind::ALL {
            let mut rng = Rng::derive(
                o.seed,
                u64::from(target == "sim-wafer") * 16 + transport as u64,
            );
            let mut target_conn_open = false;
            // One warm-up session of one request, then the measured sessions.
            for session in 0..=sessions {
                let warmup = session == 0;
                let n = if warmup { 1 } else { turns };
                let start = clock;
                let mut failed = 0;
                let mut session_conn_open = false;
                for turn in 0..n {
                    let pays_setup = match transport.connection_scope() {
                        ConnectionScope::Request => true,
                        ConnectionScope::Pool => turn == 0 && (session <= 1 || rng.below(10) == 0),
                        ConnectionScope::Cell => !target_conn_open,
                        ConnectionScope::Session => !session_conn_open,
                    };
                    target_conn_open = true;
                    session_conn_open = true;
                    let r = request(
                        &mut rng, o, id, target, transport, session, turn, warmup, clock,
                        pays_setup,
                    );
                    id += 1;
                    if !r.is_ok() {
                        failed += 1;
                    }
                    clock = r.end_ns.unwrap_or(clock) + 200 * MS; // tool time before the next turn
                    w.write_request(&r)?;
                    rec.add_request(&r);
                }
                let s = SessionRecord {
                    target: target.into(),
                    transport,
                    session,
                    warmup,
                    start_ns: start,
                    end_ns: clock - 200 * MS,
                    requests: n,
                    failed,
                    interrupted: false,
                };
                w.write_session(&s)?;
                rec.add_session(&s);
            }
            clock += 1_000 * MS;
        }
    }
    if let Some(anchor) = anchor {
        w.set_clock(anchor);
    }
    let summary = crate::recorder::Summary::from_recorder(&rec);
    Ok(w.finish(o.status, &rec, &summary)?)
}

#[allow(clippy::too_many_arguments)]
fn request(
    rng: &mut Rng,
    o: &SyntheticOptions,
    id: u64,
    target: &str,
    transport: TransportKind,
    session: u32,
    turn: u32,
    warmup: bool,
    intended: u64,
    pays_setup: bool,
) -> RequestRecord {
    let gpu = target == "sim-gpu";
    let ws = transport == TransportKind::Ws;
    let jitter = |rng: &mut Rng, base: u64, sigma: f64| (rng.lognormal(base as f64, sigma)) as u64;
    let dispatch = intended + jitter(rng, 40_000, 0.3);
    let [dns, tcp, tls, upgrade] = if pays_setup {
        setup_phases(rng, ws, turn)
    } else {
        [None; 4]
    };
    let setup: u64 = [dns, tcp, tls, upgrade].iter().flatten().sum();
    let written = dispatch + setup + jitter(rng, 250_000, 0.3);
    // API work per request: full-history HTTP requests are re-parsed and re-authenticated;
    // the WebSocket's continuation is cheaper.
    let api = if ws {
        jitter(rng, 4 * MS, 0.3)
    } else {
        jitter(rng, 22 * MS, 0.3)
    };
    let model_ttft = if gpu {
        jitter(rng, 620 * MS, 0.2)
    } else {
        jitter(rng, 95 * MS, 0.2)
    };
    let server_recv = written + RTT / 2;
    let headers = (!ws).then(|| server_recv + api + MS + RTT / 2);
    let first_event = headers.map_or(server_recv + api + RTT / 2, |h| h + 200_000);
    let first_token = server_recv + api + model_ttft + RTT / 2;
    let tokens = if warmup {
        16
    } else {
        o.tokens.0 + rng.below(u64::from(o.tokens.1.saturating_sub(o.tokens.0)) + 1) as u32
    };
    let chunks = synthetic_chunks(rng, gpu, tokens, first_token);
    let last = chunks.last().map_or(first_token, |c| c.at_ns);
    let fail = transport == TransportKind::Http && !warmup && rng.below(150) == 0;
    let mut r = RequestRecord {
        id,
        target: target.into(),
        transport,
        session,
        // One scenario turn per session: a user request, then tool results.
        turn: 0,
        request: turn,
        step: turn,
        kind: kind_of(warmup, turn),
        warmup,
        chaining: if ws {
            Chaining::PreviousResponseId
        } else {
            Chaining::FullHistory
        },
        response_id: Some(format!("resp_{id:06}")),
        intended_ns: intended,
        dispatch_ns: dispatch,
        dns_ns: dns,
        tcp_connect_ns: tcp,
        tls_handshake_ns: tls,
        ws_upgrade_ns: upgrade,
        request_written_ns: Some(written),
        response_headers_ns: headers,
        first_event_ns: Some(first_event),
        first_token_ns: Some(first_token),
        last_token_ns: Some(last),
        end_ns: Some(last + 400_000),
        connection_reused: !pays_setup,
        connection_id: id,
        protocol: transport.wire_protocol(),
        alpn: Some(alpn_of(transport).into()),
        bytes_sent: if ws {
            700
        } else {
            2_000 + u64::from(turn) * 1_600
        },
        bytes_received: u64::from(tokens) * 60 + 400,
        input_tokens: Some(400 + turn * 450),
        cached_input_tokens: (turn > 0).then_some(turn * 400),
        output_tokens: tokens,
        token_source: TokenSource::ServerUsage,
        tool_calls: u32::from(turn + 1 < o.turns),
        server_timing: ws.then(|| ServerTiming {
            source: "websocket-timing".into(),
            ttft_ms: Some((api + model_ttft) as f64 / 1e6),
            total_ms: Some((api + model_ttft + (last - first_token)) as f64 / 1e6),
            api_overhead_ms: Some(api as f64 / 1e6),
            queue_ms: Some(0.1),
        }),
        chunks,
        ..Default::default()
    };
    if fail {
        fail_with_500(&mut r, headers);
    }
    r
}

/// A warm-up, the session's user request (turn 0), or a tool result.
fn kind_of(warmup: bool, turn: u32) -> RequestKind {
    if warmup {
        RequestKind::Warmup
    } else if turn == 0 {
        RequestKind::User
    } else {
        RequestKind::ToolResult
    }
}

/// The ALPN a synthetic TLS connection negotiated.
fn alpn_of(transport: TransportKind) -> &'static str {
    if transport == TransportKind::Http2 {
        "h2"
    } else {
        "http/1.1"
    }
}

/// The connection phases a request pays on a new connection: DNS, TCP, TLS, WebSocket upgrade.
fn setup_phases(rng: &mut Rng, ws: bool, turn: u32) -> [Option<u64>; 4] {
    let jitter = |rng: &mut Rng, base: u64, sigma: f64| (rng.lognormal(base as f64, sigma)) as u64;
    [
        (!ws || turn == 0).then(|| jitter(rng, 300_000, 0.3)),
        Some(RTT + jitter(rng, 150_000, 0.3)),
        Some(RTT + jitter(rng, 1_500_000, 0.2)),
        ws.then(|| RTT + jitter(rng, 400_000, 0.3)),
    ]
}

/// The content chunks of a synthetic response: one token per chunk every ~15 ms on the GPU
/// profile, 1-8 tokens per chunk at ~1 ms per token on the wafer-scale one.
fn synthetic_chunks(rng: &mut Rng, gpu: bool, tokens: u32, first_token: u64) -> Vec<Chunk> {
    let jitter = |rng: &mut Rng, base: u64, sigma: f64| (rng.lognormal(base as f64, sigma)) as u64;
    let mut chunks = Vec::new();
    let mut at = first_token;
    let mut left = tokens;
    while left > 0 {
        let (n, gap) = if gpu {
            (1, jitter(rng, 15_400_000, 0.15))
        } else {
            let n = (1 + rng.below(8) as u32).min(left);
            (n, jitter(rng, u64::from(n) * 1_000_000, 0.25))
        };
        if !chunks.is_empty() {
            at += gap;
        }
        chunks.push(Chunk {
            at_ns: at,
            tokens: n,
            text_bytes: n * 4,
        });
        left -= n;
    }
    chunks
}

/// Turns a synthetic request into an HTTP 500 that ended with its headers.
fn fail_with_500(r: &mut RequestRecord, headers: Option<u64>) {
    r.outcome = OutcomeKind::HttpStatus;
    r.http_status = Some(500);
    r.error = Some("status 500: simulated fault".into());
    r.first_event_ns = None;
    r.first_token_ns = None;
    r.last_token_ns = None;
    r.chunks.clear();
    r.output_tokens = 0;
    r.end_ns = headers;
}

fn plan(o: &SyntheticOptions) -> Plan {
    let target = |name: &str, profile: &str, hardware: &str| Target {
        name: name.into(),
        base_url: None,
        sim_profile: Some(profile.into()),
        api: ApiFlavour::Responses,
        model: name.into(),
        api_key_env: None,
        hardware: hardware.into(),
        headers: BTreeMap::new(),
        store: false,
        ws_warmup: false,
        request_timing: true,
        request_timeout: Duration::from_secs(300),
        stall_timeout: Duration::from_secs(30),
        transports: TransportKind::ALL.to_vec(),
        net: Default::default(),
        ignore_eos: false,
        sim_profile_file: None,
    };
    let targets = [
        target("sim-gpu", "gpu", "GPU (simulated)"),
        target("sim-wafer", "wafer", "Wafer-scale (simulated)"),
    ];
    Plan {
        scenario_name: o.scenario.clone(),
        scenario_path: "scenarios/snake.toml".into(),
        scenario_hash: "sha256:5a1e0000000000000000000000000000000000000000000000000000000000ff"
            .into(),
        seed: o.seed,
        system_prompt: "You are a coding assistant.".into(),
        cells: targets
            .iter()
            .flat_map(|t| {
                TransportKind::ALL.into_iter().map(|transport| Cell {
                    cache: Default::default(),
                    target: t.clone(),
                    transport,
                })
            })
            .collect(),
        sessions: Default::default(),
        load: Load {
            sessions: 0,
            concurrency: o.concurrency,
            warmup_sessions: 1,
            session_interval: None,
            schedule: Default::default(),
            salt_key: 0,
            ..Default::default()
        },
        link: "rtt=40ms".parse::<Link>().unwrap_or_default(),
        link_for_real_targets: false,
        description: "Build a snake game in an agent loop (synthetic report fixture).".into(),
        gate: BTreeMap::new(),
        warnings: Vec::new(),
        scenario_source: format!("name = {:?}\n", o.scenario),
        workload: None,
        slo: Default::default(),
        shard: None,
    }
}
