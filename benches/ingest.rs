//! The harness's own cost: how many content chunks per second spark-bench ingests on this
//! machine, and how far its arrival timestamps are from the simulator's ground truth at
//! that load.
//!
//! Run: `cargo bench --bench ingest` (or one case: `-- --per-write 8 --rate 10000 --streams 40
//! --tokens 16000 --transport ws`).
//!
//! Set-up: the embedded simulator (in the same process, so both clocks are the same
//! `Instant`) streams one token per chunk at `rate` chunks/s on each of `streams` concurrent
//! sessions; the client side is spark-bench's real path: transport (HTTP/1.1 keep-alive or
//! WebSocket, plain TCP, no link) → SSE/WS framing → backend decoder → `exchange` record →
//! recorder histograms. For every chunk, the error is (client arrival timestamp − the
//! simulator's write time: the kernel's transmit stamp of its write, or with `SIM_TX_STAMPS=0`
//! the instant before it).
//!
//! Three cases by default:
//! * **one chunk per write** (200k chunks/s offered): every chunk is its own TCP segment. On
//!   loopback each segment costs both ends kernel time (the write, the client's read, the
//!   ACK the client's read sends, and the other side's processing of each, which loopback
//!   runs on the sending thread). On the 2-core VM that is ~15 µs of kernel time per segment
//!   over both threads, more than the user-space work of both, so this case measures the
//!   kernel's TCP cost as much as the harness;
//! * **eight chunks per write** (`chunks_per_write = 8` in the simulator's profile), at 200k
//!   and at 400k chunks/s offered: each chunk is still its own event, decoded, stamped and
//!   recorded on its own, but eight share a segment, as when a server flushes every few
//!   events. The harness keeps up with both rates; its capacity is one core divided by its
//!   CPU time per chunk.
//!
//! Each line says how busy each side was (CPU time over the wall time of the run, in cores),
//! so it shows which side, if any, was the limit.
//!
//! The simulator and the client run on separate tokio runtimes (threads named `sim` and
//! `client`, one worker each unless `SIM_WORKERS` / `CLIENT_WORKERS` say otherwise), so the
//! CPU time each used per chunk is read from `/proc/self/task/*/schedstat` and printed: the
//! `client` figure is the harness's own cost per chunk (the kernel time its reads and ACKs
//! cost included). The client's threads run under SCHED_FIFO 1 when permitted (as a user
//! would run `chrt -f 1 spark-bench run`; `CLIENT_FIFO=0` turns that off): three busy threads
//! (client, simulator, the simulator's timer) share two cores here, and a client thread
//! pre-empted for longer than a stream's gap between writes reads two of its segments at
//! once, which carry one kernel stamp. A real server would not compete for the client's CPU.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use spark_bench::driver::exchange::{
    exchange, Clock, Connector, Conversation, RecordMeta, RequestSpec, Trust,
};
use spark_bench::link::Link;
use spark_bench::plan::Target;
use spark_bench::recorder::Recorder;
use spark_bench::sim::{self, Profile, SimConfig, SimHandle};
use spark_bench::vocab::{ApiFlavour, RequestRecord, TransportKind};

struct Args {
    streams: usize,
    tokens: u32,
    /// (chunks per write, chunks/s per stream) for each case.
    cases: Vec<(u32, f64)>,
    transports: Vec<TransportKind>,
}

fn parse_args() -> Args {
    let mut a = Args {
        streams: 40,
        tokens: 16_000,
        cases: Vec::new(),
        transports: vec![TransportKind::HttpPooled, TransportKind::Ws],
    };
    let (mut per_write, mut rate) = (None, None);
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let val = argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--streams" => a.streams = val.parse().expect("--streams N"),
            "--rate" => rate = Some(val.parse().expect("--rate CHUNKS_PER_S_PER_STREAM")),
            "--tokens" => a.tokens = val.parse().expect("--tokens N"),
            "--per-write" => {
                let n: u32 = val.parse().expect("--per-write CHUNKS");
                assert!((1..=1024).contains(&n), "--per-write must be in [1, 1024]");
                per_write = Some(n);
            }
            "--transport" => {
                a.transports = vec![val.parse().expect("--transport http-pooled|ws|http2")]
            }
            _ => {
                i += 1;
                continue; // cargo bench passes --bench; ignore unknown flags
            }
        }
        i += 2;
    }
    a.cases = if per_write.is_none() && rate.is_none() {
        // One chunk per write at 200k chunks/s offered (bound by the kernel's cost per TCP
        // segment), then eight per write at 200k and at 400k offered.
        vec![(1, 5_000.0), (8, 5_000.0), (8, 10_000.0)]
    } else {
        vec![(per_write.unwrap_or(1), rate.unwrap_or(5_000.0))]
    };
    a
}

fn target(sim: &SimHandle) -> Target {
    spark_bench::plan::targets::running_sim("sim-firehose", "sim-firehose", &sim.base_url)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}

async fn run_one(
    args: &Args,
    (per_write, rate): (u32, f64),
    kind: TransportKind,
    sim_rt: &tokio::runtime::Handle,
) {
    let mut profile = Profile::builtin("fast").expect("fast profile");
    profile.decode_tok_s = rate;
    profile.chunk_tokens = vec![1.0];
    profile.step_jitter = 0.0;
    profile.capacity = 4096;
    profile.chunks_per_write = per_write;
    let mut cfg = SimConfig::new(profile);
    // Ground truth from the kernel's transmit stamps unless SIM_TX_STAMPS=0 (then the
    // instant before the simulator's write, and one `recvmsg` less per write).
    cfg.tx_stamps = std::env::var("SIM_TX_STAMPS").map_or(true, |v| v != "0");
    let sim = sim_rt
        .spawn(sim::spawn(cfg))
        .await
        .expect("simulator task")
        .expect("simulator");
    let t = Arc::new(target(&sim));
    let clock = Clock::start();
    let connector = Arc::new(
        Connector::new(&t, kind, Trust::PublicRoots, Link::default(), clock, 1).expect("connector"),
    );
    let cpu_before = thread_cpu();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..args.streams {
        let connector = connector.clone();
        let t = t.clone();
        let tokens = args.tokens;
        tasks.push(tokio::spawn(async move {
            let mut conn = connector.session();
            let mut conv = Conversation::new("bench", ApiFlavour::Responses, kind, false);
            conv.add_user_message(&format!("Stream {s}: write a long file."));
            let meta = RecordMeta {
                id: s as u64,
                session: s as u32,
                intended_ns: clock.now_ns(),
                ..Default::default()
            };
            let spec = RequestSpec {
                max_output_tokens: tokens,
                ..Default::default()
            };
            exchange(
                &mut conn,
                &t,
                &mut conv,
                &spec,
                &meta,
                &CancellationToken::new(),
            )
            .await
            .0
        }));
    }
    let mut records: Vec<RequestRecord> = Vec::new();
    for task in tasks {
        records.push(task.await.expect("stream task"));
    }
    let wall = started.elapsed();
    let cpu_after = thread_cpu();

    let mut recorder = Recorder::new();
    let mut errors_ns = Vec::new();
    let mut chunks = 0u64;
    let mut failed = 0;
    let (mut first, mut last) = (u64::MAX, 0u64);
    for r in &records {
        recorder.add_request(r);
        if !r.is_ok() {
            failed += 1;
            continue;
        }
        let id = r.response_id.as_deref().expect("response id");
        let truth = sim.trace.get(id).expect("trace");
        assert_eq!(
            truth.chunk_writes.len(),
            r.chunks.len(),
            "chunk count vs trace"
        );
        for (c, w) in r.chunks.iter().zip(&truth.chunk_writes) {
            let written = clock.ns(w.at);
            errors_ns.push(c.at_ns.saturating_sub(written));
        }
        chunks += r.chunks.len() as u64;
        first = first.min(r.dispatch_ns);
        last = last.max(r.last_token_ns.unwrap_or(0));
    }
    errors_ns.sort_unstable();
    let span_s = (last.saturating_sub(first)) as f64 / 1e9;
    // The steady state: from when the last stream began streaming to when the first ended,
    // every stream is active (the whole span also counts connection set-up and ramp-up).
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.is_ok()).collect();
    let from = ok
        .iter()
        .filter_map(|r| r.chunks.first())
        .map(|c| c.at_ns)
        .max()
        .unwrap_or(0);
    let to = ok
        .iter()
        .filter_map(|r| r.chunks.last())
        .map(|c| c.at_ns)
        .min()
        .unwrap_or(0);
    let steady: u64 = ok
        .iter()
        .map(|r| {
            r.chunks
                .iter()
                .filter(|c| c.at_ns >= from && c.at_ns < to)
                .count() as u64
        })
        .sum();
    let window_s = to.saturating_sub(from) as f64 / 1e9;
    let steady_rate = steady as f64 / window_s.max(1e-9);
    println!(
        "{:<12} streams {:>3} × {:>6.0} chunks/s offered: ingested {:>8} chunks in {:>5.2} s = {:>8.0} chunks/s; all streams active: {:>8.0} chunks/s over {:.2} s ({} failed; wall {:.2} s)",
        kind.as_str(),
        args.streams,
        rate,
        chunks,
        span_s,
        chunks as f64 / span_s,
        steady_rate,
        window_s,
        failed,
        wall.as_secs_f64()
    );
    println!(
        "{:<12} timestamp error vs ground truth: p50 {:>4} µs  p90 {:>4} µs  p99 {:>5} µs  p99.9 {:>5} µs  max {:>6} µs",
        "",
        percentile(&errors_ns, 0.50) / 1000,
        percentile(&errors_ns, 0.90) / 1000,
        percentile(&errors_ns, 0.99) / 1000,
        percentile(&errors_ns, 0.999) / 1000,
        errors_ns.last().copied().unwrap_or(0) / 1000,
    );
    let used = |name: &str| {
        let get = |m: &std::collections::BTreeMap<String, u64>| m.get(name).copied().unwrap_or(0);
        get(&cpu_after).saturating_sub(get(&cpu_before)) as f64
    };
    let per_chunk = |name: &str| used(name) / chunks.max(1) as f64 / 1000.0;
    let cores = |name: &str| used(name) / wall.as_nanos().max(1) as f64;
    println!(
        "{:<12} CPU per chunk (busy, in cores): client (harness) {:.2} µs ({:.2}), simulator {:.2} µs ({:.2}), timer thread {:.2} µs ({:.2})",
        "",
        per_chunk("client"),
        cores("client"),
        per_chunk("sim"),
        cores("sim"),
        per_chunk("spark-bench-tim"),
        cores("spark-bench-tim"),
    );
    sim_rt.spawn(sim.shutdown()).await.expect("shutdown");
}

/// CPU time (ns) used so far by this process's threads, summed by thread name (Linux
/// `/proc/self/task/*/schedstat`; empty elsewhere).
fn thread_cpu() -> std::collections::BTreeMap<String, u64> {
    let mut by_name = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let ns: u64 = std::fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
            .unwrap_or(0);
        *by_name.entry(name.trim().to_string()).or_insert(0) += ns;
    }
    by_name
}

/// Set when a client thread asked for SCHED_FIFO and was refused.
static FIFO_REFUSED: AtomicBool = AtomicBool::new(false);
/// Client threads started so far.
static STARTED: AtomicUsize = AtomicUsize::new(0);

/// Puts the calling thread under SCHED_FIFO priority 1, or notes that it was refused.
fn realtime_here() {
    if !spark_bench::priority::fifo_current_thread(1) {
        FIFO_REFUSED.store(true, Ordering::SeqCst);
    }
}

fn main() {
    let args = parse_args();
    let workers = |var: &str| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1)
    };
    // The harness's threads under SCHED_FIFO 1 when permitted (as `chrt -f 1 spark-bench
    // run`), unless CLIENT_FIFO=0: see the module comment.
    let fifo = std::env::var("CLIENT_FIFO").map_or(true, |v| v != "0");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers("CLIENT_WORKERS"))
        .thread_name("client")
        .on_thread_start(move || {
            if fifo {
                realtime_here();
            }
            STARTED.fetch_add(1, Ordering::SeqCst);
        })
        .enable_all()
        .build()
        .expect("runtime");
    let sim_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers("SIM_WORKERS"))
        .thread_name("sim")
        .enable_all()
        .build()
        .expect("runtime");
    // Start the client's workers now, so the line below can say how they are scheduled.
    rt.block_on(async { tokio::spawn(async {}).await })
        .expect("client worker");
    println!(
        "spark-bench ingest benchmark on {} cores ({}); client threads {}:",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::env::consts::ARCH,
        match (fifo, FIFO_REFUSED.load(Ordering::SeqCst)) {
            (false, _) => "under the normal scheduler (CLIENT_FIFO=0)",
            (true, false) => "under SCHED_FIFO 1",
            (true, true) => "under the normal scheduler (SCHED_FIFO was refused)",
        }
    );
    for &case in &args.cases {
        println!(
            "{} chunk(s) per write, {} streams × {} chunks/s offered:",
            case.0, args.streams, case.1
        );
        for &kind in &args.transports {
            rt.block_on(run_one(&args, case, kind, sim_rt.handle()));
        }
    }
}
