//! The command-line interface: the clap type tree and its help text. No I/O here.
//!
//! Owns: every subcommand's flags. Does not own: `run`'s load flags, which are
//! `scenario::LoadKnobs` (shared with the scenario's `[load]` table), flattened in.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::link::Link;
use crate::vocab::{ApiFlavour, TransportKind};

/// Measure how fast streaming LLM APIs feel: round-trip overhead, time to first token,
/// per-token time and throughput, over HTTP-SSE, HTTP/2 and the Responses WebSocket mode.
///
/// Quick start, offline, against the embedded simulator's GPU-class and wafer-scale
/// profiles over an emulated 40 ms link: `spark-bench run scenarios/snake.toml`
///
/// Exit codes: 0 success; 1 `compare` (or `run --baseline`) found a regression; 2 usage,
/// configuration or runtime error; 3 `run` wrote its results but a measured cell's requests
/// all failed (or its error rate passed --max-error-rate); 4 `compare` (or `run
/// --baseline`) decided nothing; 130 interrupted by Ctrl-C (results written, marked
/// interrupted).
///
/// Every subcommand that prints results takes --json (one JSON object on stdout) and
/// -q/--quiet (no progress or status lines on stderr; results, warnings and errors still
/// print).
#[derive(Debug, Parser)]
#[command(name = "spark-bench", version, about, long_about, max_term_width = 100)]
pub struct Cli {
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
// Built once per process, so `run`'s larger argument set costs nothing worth a `Box` (which
// would change every `let Command::Run(args) = …` in tests).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a scenario against targets over transports and measure every phase.
    #[command(long_about = RUN_ABOUT)]
    Run(RunArgs),
    /// Start the embedded simulator: an OpenAI-compatible streaming server.
    Serve(ServeArgs),
    /// Render charts, a Markdown report and an HTML page from results directories.
    Report(ReportArgs),
    /// Compare a candidate run against a baseline: the CI regression gate (exit 1 on
    /// regression, 4 when it decided nothing).
    Compare(CompareArgs),
    /// Measure this machine's ceiling: chunks/s the harness ingests, its timestamp error, and
    /// the highest request rate it can drive on time.
    #[command(long_about = CALIBRATE_ABOUT)]
    Calibrate(CalibrateArgs),
    /// Record a live agent session through a proxy: a scenario that replays it and a
    /// results directory of the session as it ran.
    #[command(long_about = RECORD_ABOUT)]
    Record(RecordArgs),
    /// Merge the results directories of one plan's shards (`run --shard I/N`) into one,
    /// as if one machine had run the whole plan.
    #[command(long_about = MERGE_ABOUT)]
    Merge(MergeArgs),
    /// Draw the gate's history (compare --history DIR): each gated metric over runs, with
    /// regressions and change points marked; charts (SVG, PNG) and Markdown for
    /// $GITHUB_STEP_SUMMARY.
    History(HistoryArgs),
    /// Export a run in a peer tool's format: `export vllm RUN_DIR` writes one
    /// `vllm bench serve --save-result` JSON per cell (docs/metrics.md).
    Export(ExportArgs),
}

/// `spark-bench export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The format: vllm (the keys `vllm bench serve --save-result --save-detailed` writes).
    #[arg(value_parser = ["vllm"])]
    pub format: String,
    /// The results directory (`results/<run-id>`).
    pub dir: PathBuf,
    /// Where to write the files (default: DIR).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the written files as a JSON array on stdout.
    #[arg(long)]
    pub json: bool,
    /// Print nothing on success.
    #[arg(long, short)]
    pub quiet: bool,
}

const RUN_ABOUT: &str = "\
Replay a scenario against targets over transports and measure every phase.

Exit codes: 0 success; 1 --baseline found a regression; 2 usage, configuration or runtime \
error; 3 the results were written but a measured cell's requests all failed, or its error \
rate passed --max-error-rate (stderr names the error kinds with a sample message each; \
--json says \"status\": \"failed-requests\"); 4 --baseline decided nothing (no gated row \
could decide); 130 interrupted (results written, marked \
interrupted). --json prints one object per run: the summary's keys plus run_id, \
results_dir, status, exit_code, failed_cells and erring_cells (cells whose failed requests \
stayed within the budget, in the same shape).";

const MERGE_ABOUT: &str = "\
Merge the results directories that `spark-bench run … --shard I/N` wrote on several machines \
or processes into one results directory, as if one machine had run the whole plan; `report` \
and `compare` then take it like any other run.

  histograms   the shards' HdrHistogram logs added together: lossless, so every merged \
percentile is the percentile of the union of all shards' samples
  rows         requests.csv, chunks.csv and sessions.csv concatenated in shard order, ids and \
connection ids made disjoint (offsets in the manifest), every row tagged with its `shard`
  time         shards share no monotonic clock: each recorded where its origin sits on the \
wall clock, and every instant is moved onto the earliest shard's axis; the manifest's \
`merge.shards[].offset_uncertainty_ns` says how far that can be off (NTP error included)
  summary      rebuilt from the merged histograms and rows; the report is rendered unless \
--no-report

It refuses directories of different plans (their plan hashes differ), a shard given twice, \
and missing or unfinished shards; --partial merges what there is and lists what is missing.

Example: spark-bench merge results/shard-*/* --out results/merged";

/// `spark-bench merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' results directories (one per shard, any order).
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
    /// The merged results directory to create (must not exist, or be empty).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Merge even when shards are missing or did not finish; the manifest lists them and
    /// the merged run is marked `interrupted`.
    #[arg(long)]
    pub partial: bool,
    /// Do not render the report (report.md, report.html, charts).
    #[arg(long)]
    pub no_report: bool,
    /// Print the merged summary as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// No status lines on stderr (the `merged …`, `results:` and `report:` lines).
    #[arg(long, short)]
    pub quiet: bool,
}

/// `spark-bench history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The history directory that `compare --history DIR` appends to (e.g.
    /// results/history/main).
    pub dir: PathBuf,
    /// Where to write history.md and charts/ (default: DIR).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the Markdown (with Mermaid charts GitHub renders) on stdout, e.g.
    /// `>> "$GITHUB_STEP_SUMMARY"`; or json (the series and change points).
    #[arg(long, default_value = "md", value_parser = ["md", "json", "none"])]
    pub format: String,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// No summary line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Only the last N gate runs.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
}

const CALIBRATE_ABOUT: &str = "\
Measure this machine's ceiling against the embedded simulator (about 25 s; --quick about 10 s), \
print it, and save it where every run finds it (~/.cache/spark-bench/calibration.json).

What the numbers mean:
  ingest          content chunks per second the harness received with 16 streams active at \
once (TLS, HTTP/1.1 keep-alive, the simulator in the same process, sharing the cores, so \
this is a lower bound). Every run compares its own chunk rate with it: a run above 50% of \
it is flagged harness-bound.
  stamp error     each chunk's arrival timestamp minus the instant the simulator wrote it \
(the kernel's transmit stamp: ground truth), p50/p99/max, at a quarter of the ingest \
ceiling. This is how far a latency the harness reports can be from the truth at that load.
  request rate    short open-loop runs at rising rates through the real driver; the highest \
rate whose dispatch lag p99 stayed under 5 ms and whose achieved rate stayed within 2% of \
the requested one. Above it, a run's load curve is the harness's, not the target's.

Every run also judges itself (the table's `harness:` footer, summary.json's `harness`, the \
report): dispatch lag, requested vs achieved rate, timer lateness, CPU share, and the chunk \
rate against this ingest ceiling. Calibrate on a machine as quiet as the runs will be.";

/// `spark-bench calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// A shorter calibration (about 10 s): fewer chunks, fewer and shorter ramp points.
    #[arg(long)]
    pub quick: bool,
    /// Print the calibration as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress or status lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Where to save it. Default: $XDG_CACHE_HOME/spark-bench/calibration.json (else
    /// ~/.cache/spark-bench/calibration.json), which every run reads.
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// Do not save; only print.
    #[arg(long, conflicts_with = "save")]
    pub no_save: bool,
}

/// `spark-bench run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Scenario file (TOML), e.g. scenarios/snake.toml.
    pub scenario: PathBuf,
    /// Target to run (repeatable). Built in: sim-gpu, sim-wafer, sim-cpu; others come from
    /// the scenario's [targets.NAME] or --targets FILE (for a server by its URL, use --url).
    /// Default: the scenario's matrix, or sim-gpu and sim-wafer.
    #[arg(long = "target", value_name = "NAME")]
    pub targets: Vec<String>,
    /// Your own server, by its base URL (http:// or https://, ending in /v1): one target
    /// named url-HOST-PORT (e.g. url-127-0-0-1-8000) in place of the scenario's matrix
    /// targets (beside any --target), over the transports its API can use unless
    /// --transport says. No targets file.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// With --url: the model name to request. Default: the first model GET URL/models
    /// lists (said on stderr).
    #[arg(long, value_name = "M", requires = "url")]
    pub model: Option<String>,
    /// With --url: the API it speaks, chat (chat completions, the default) or responses.
    #[arg(long, value_name = "API", requires = "url", value_parser = parse_api)]
    pub api: Option<ApiFlavour>,
    /// With --url: the NAME of the environment variable holding the API key (sent as
    /// `Authorization: Bearer`), never the key itself; the key is written nowhere.
    #[arg(long, value_name = "VAR", requires = "url")]
    pub api_key_env: Option<String>,
    /// A TOML file of extra [targets.NAME] tables (see targets/*.toml).
    #[arg(long = "targets", value_name = "FILE")]
    pub targets_file: Option<PathBuf>,
    /// Transport to use (repeatable): http (new connection per request), http-pooled
    /// (HTTP/1.1 keep-alive), http2 (multiplexed), ws (persistent WebSocket per session).
    /// Default: the scenario's matrix, or all four.
    #[arg(long = "transport", value_enum, value_name = "KIND")]
    pub transports: Vec<TransportKind>,
    /// Run the cells the transport probe skips: before the run, each real target is asked
    /// once per transport whether it speaks it (HTTP/2 preface, WebSocket upgrade), and a
    /// cell whose server does not is skipped with a line saying so. With this flag it runs,
    /// and its failed requests are recorded as `unsupported-transport`, quoting the answer.
    #[arg(long)]
    pub force_transports: bool,
    /// The load knobs (--sessions, --concurrency, --schedule, --cache, --rate, --arrival,
    /// --burstiness, --duration, --warmup, --max-in-flight), shared with `[load]`.
    #[command(flatten)]
    pub load: crate::scenario::LoadKnobs,
    /// Master seed (overrides the scenario's `seed`).
    // Listed between --concurrency and --schedule, as before the load flags moved.
    #[arg(long, display_order = 4)]
    pub seed: Option<u64>,
    /// Results root; the run writes to DIR/RUN_ID/.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: PathBuf,
    /// Emulated network link on the client side, e.g. "rtt=40ms,jitter=2ms,bandwidth=100mbit"
    /// or "none". Default for the embedded simulator: rtt=40ms.
    #[arg(long, value_name = "SPEC")]
    pub link: Option<Link>,
    /// Print the summary as JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Run the link emulator's and the precise timer's threads at real-time priority
    /// (SCHED_FIFO 2; needs root or CAP_SYS_NICE), so a busy machine does not delay the
    /// emulated path. The harness's own threads are not changed (start the whole process
    /// under `chrt -f 1` for that).
    #[arg(long)]
    pub realtime: bool,
    /// No progress display; only the final table (or JSON).
    #[arg(long, short)]
    pub quiet: bool,
    /// Exit 3 when a measured cell's error rate (failed / measured requests, cancelled ones
    /// aside) is above RATE: a fraction 0..1 or a percentage, e.g. 0.05 or 5%. Without it,
    /// only a cell whose requests all failed exits 3. The results are written in full
    /// first; stderr names each failing cell's top error kinds with a sample message, and
    /// --json says `"status": "failed-requests"`.
    #[arg(long, value_name = "RATE", value_parser = parse_error_rate)]
    pub max_error_rate: Option<f64>,
    /// Serve the run's live measurements at http://ADDR/metrics while it runs (OpenMetrics
    /// or Prometheus text, for a Prometheus scrape; port 0 picks a free one, printed on
    /// stderr). The run also writes them to metrics.om. See docs/metrics.md.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// Keep /metrics up this long after the run ends, serving the final values (so a
    /// scraper gets them), e.g. 5s.
    #[arg(long, value_name = "DURATION", default_value = "0s", requires = "metrics_listen", value_parser = humantime::parse_duration)]
    pub metrics_linger: std::time::Duration,
    /// Do not render the report (report.md, report.html, charts) at the end.
    #[arg(long)]
    pub no_report: bool,
    /// Also save this run as the named baseline results/baselines/NAME/.
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// Compare this run against the named baseline after it finishes (exit 1 on regression).
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Run a load sweep: one full run per load point, every target × transport, into
    /// DIR/SWEEP_ID/ (sweep.json, points/NN-PARAM-VALUE/, a sweep report with the knee).
    /// concurrency=1,2,4,8 (closed loop; each point runs at least 4 × concurrency
    /// sessions), rate=2,4,8 (requests/s, open loop; at least one second of arrivals),
    /// or concurrency=auto / rate=auto to find the saturation point (docs/sweeps.md, "Sweeps and
    /// goodput"). With an `[slo]`, goodput is vLLM's --goodput (requests/s that met every
    /// per-request SLO); a point that misses a percentile SLO is marked, not set to 0.
    #[arg(long, value_name = "PARAM=V1,V2,…|auto", value_parser = crate::plan::sweep::SweepSpec::parse_boxed)]
    pub sweep: Option<Box<crate::plan::sweep::SweepSpec>>,
    /// Run shard I of N (0-based: 0/4 … 3/4) of the plan, for one plan spread over several
    /// machines or processes. Session k of the plan runs in shard k mod N, in every target ×
    /// transport, so each transport's share of the load is the same in every shard; the
    /// concurrency, max-in-flight and rate are divided among the shards. Every shard
    /// records the plan's hash, its host and its clock; `spark-bench merge` folds the
    /// shards' directories into one. Schedulers give the index: a Kubernetes Indexed Job's
    /// JOB_COMPLETION_INDEX, a Slurm array's SLURM_ARRAY_TASK_ID, a CI matrix value.
    #[arg(long, value_name = "I/N", conflicts_with_all = ["repeat", "confirm"])]
    pub shard: Option<crate::plan::shard::ShardSpec>,
    /// Run the scenario N times (repeat i with seed + i − 1), into DIR/SET_ID/ holding one
    /// results directory per repeat; `compare` takes such a directory as one side and
    /// resamples its runs, then their requests (docs/gate.md).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// With --baseline: a regression must reproduce on K fresh runs of the candidate (each
    /// --repeat runs) before the gate exits 1; one that does not is reported as inconclusive.
    #[arg(long, value_name = "K", default_value_t = 0, requires = "baseline", value_parser = clap::value_parser!(u32).range(0..=10))]
    pub confirm: u32,
}

/// `spark-bench serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Hardware profile: gpu (~65 tok/s), wafer (~1000 tok/s, bursts toward 4000), cpu.
    #[arg(long, default_value = "wafer")]
    pub profile: String,
    /// A TOML file overriding profile parameters (see docs/simulator.md, "Profiles").
    #[arg(long, value_name = "FILE")]
    pub profile_file: Option<PathBuf>,
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8089")]
    pub listen: String,
    /// Serve https/wss with a certificate generated at start (its PEM is written next to
    /// the printed URL, for `curl --cacert`).
    #[arg(long)]
    pub tls: bool,
    /// Emulated link on the server side, e.g. "rtt=40ms,jitter=2ms,bandwidth=100mbit".
    #[arg(long, value_name = "SPEC")]
    pub link: Option<Link>,
    /// Seed for the simulator's timing and text.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Set SO_REUSEPORT, so several `serve` processes share one port (the kernel spreads new
    /// connections among them): past one process's open-file limit, or past one process's CPU.
    #[arg(long)]
    pub reuse_port: bool,
    /// Hold at most N open files (the soft RLIMIT_NOFILE; by default it is raised as far as
    /// allowed): a server that runs out of descriptors, to see what that does to clients.
    #[arg(long, value_name = "N")]
    pub max_open_files: Option<u64>,
    /// WebSocket connection lifetime before `websocket_connection_limit_reached`.
    #[arg(long, value_name = "DURATION", default_value = "60m", value_parser = humantime::parse_duration)]
    pub ws_lifetime: std::time::Duration,
}

/// `spark-bench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// One or more results directories (results/RUN_ID); several give a side-by-side report.
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// Formats to write, comma-separated: md, html, svg, png.
    #[arg(long, default_value = "md,html,svg,png", value_parser = crate::report::Formats::parse_arg)]
    pub format: Vec<crate::report::Formats>,
    /// Output directory (default: the results directory, or ./report for several).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON object on stdout: `out`, `written` (the paths) and `status`.
    #[arg(long)]
    pub json: bool,
    /// Do not list the written files (warnings and errors still print).
    #[arg(short, long)]
    pub quiet: bool,
}

/// `spark-bench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline results directory (or a named baseline under results/baselines/).
    pub baseline: PathBuf,
    /// Candidate results directory.
    pub candidate: PathBuf,
    /// Threshold per metric, repeatable: ttft=+10%, tpot=+5%, overhead=+20ms.
    #[arg(long = "threshold", value_name = "METRIC=±X%|±Xms")]
    pub thresholds: Vec<String>,
    /// Metrics to compare (comma-separated); the list, bands and defaults: --help.
    #[arg(long, value_parser = crate::compare::MetricList::parse, long_help = crate::compare::gate::metrics_help())]
    pub metrics: Vec<crate::compare::MetricList>,
    /// Output format: text (terminal table), md (Markdown for $GITHUB_STEP_SUMMARY or a PR
    /// comment), json (the verdict JSON; see docs/gate.md).
    #[arg(long, default_value = "text", value_parser = crate::compare::render::Format::parse)]
    pub format: crate::compare::render::Format,
    /// The same as --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// No status lines on stderr (the `history:` line); the verdict still prints.
    #[arg(long, short)]
    pub quiet: bool,
    /// Compare even when scenario hash, link model or target sets differ.
    #[arg(long)]
    pub allow_mismatch: bool,
    /// Fail the gate (exit 1) when any comparison is inconclusive (too few samples, or a
    /// confidence interval straddling the noise band), not only on a regression.
    #[arg(long)]
    pub fail_on_inconclusive: bool,
    /// A re-run of the candidate (a results or repeats directory), repeatable: a regression
    /// counts only if it regressed in every re-run too (scripts/ci-regression.sh CONFIRM=K).
    #[arg(long, value_name = "DIR")]
    pub confirm_run: Vec<PathBuf>,
    /// A fresh baseline run beside the i-th --confirm-run (repeatable): that re-run is then
    /// compared with it, so a fault in the first baseline can be cleared too.
    #[arg(long, value_name = "DIR")]
    pub confirm_baseline: Vec<PathBuf>,
    /// Append this verdict to the gate history in DIR (e.g. results/history/main; created),
    /// keeping the last --history-keep entries; draw it with `spark-bench history DIR`.
    #[arg(long, value_name = "DIR")]
    pub history: Option<PathBuf>,
    /// Entries the history keeps (oldest dropped first).
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub history_keep: usize,
    /// A label for the history entry (a commit, a PR number); default $GITHUB_SHA if set.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
}

const RECORD_ABOUT: &str = "\
Record a live coding-agent session through an OpenAI-compatible proxy and turn it into a \
scenario that replays it, plus a results directory of the session as it ran.

Point your agent's base URL at the printed address (OPENAI_BASE_URL=http://127.0.0.1:8090/v1); \
chat completions and Responses (SSE or JSON) and the Responses WebSocket mode are forwarded \
to --upstream as the bytes arrive, one upstream connection per client connection, with the \
client's Authorization header passed on and never written. Stop with Ctrl-C (or SIGTERM): \
the scenario goes to --out, the live session's results to --results/<run-id>/.

The scenario holds the system prompt, each user turn, the tool calls the model made (name, \
tool time = response end to the request carrying the result, output size), think times, the \
output lengths seen (max_output_tokens) and how history was sent. Replay it anywhere with \
`spark-bench run FILE --target … --transport …`, then `spark-bench report RESULTS_DIRS…` puts \
the as-recorded session next to the replays.

Privacy: known key formats (sk-…, sk-proj-…, xai-…, gsk_…, csk-…, Bearer tokens, URL \
credentials) are always redacted from what is written; add --redact REGEX for your own, or \
--synthesize-text to replace every message by simulator corpus text of the same token length.

Example:
  spark-bench serve --listen 127.0.0.1:8089 &
  spark-bench record --upstream http://127.0.0.1:8089/v1 --out my-session.toml
  spark-bench run my-session.toml --transport ws --transport http";

/// `spark-bench record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The real API's base URL, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8089/v1`.
    #[arg(long, value_name = "URL")]
    pub upstream: String,
    /// Address the proxy listens on; port 0 picks a free port (printed).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    pub listen: String,
    /// Scenario file to write.
    #[arg(long, value_name = "FILE", default_value = "recorded.toml")]
    pub out: PathBuf,
    /// Directory the live session's results directory is created in.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub results: PathBuf,
    /// Scenario name (used in run ids).
    #[arg(long, default_value = "recorded")]
    pub name: String,
    /// Also redact matches of this regular expression from everything written (repeatable).
    #[arg(long, value_name = "REGEX")]
    pub redact: Vec<String>,
    /// Replace every message by simulator corpus text of the same token length.
    #[arg(long)]
    pub synthesize_text: bool,
    /// Stop by itself after this long (e.g. "10m"); default: at Ctrl-C or SIGTERM.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Disconnect a client that has not sent a whole request head this long after connecting
    /// or after its previous response (so also an idle keep-alive connection).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
    pub header_timeout: std::time::Duration,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// No "point your agent at it" hint (the proxy's address and the written files still
    /// print).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Parses `--api`: `chat` (or `chat-completions`) or `responses`.
pub fn parse_api(s: &str) -> Result<ApiFlavour, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "chat" | "chat-completions" | "chat_completions" => Ok(ApiFlavour::ChatCompletions),
        "responses" => Ok(ApiFlavour::Responses),
        _ => Err(format!(
            "{s:?} is not an API; use chat (POST /v1/chat/completions) or responses (POST /v1/responses)"
        )),
    }
}

/// Parses `--max-error-rate`: a fraction `0..=1` (`0.05`) or a percentage `0..=100%`
/// (`5%`).
pub fn parse_error_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(p) => (p.trim(), 100.0),
        None => (t, 1.0),
    };
    let v: f64 = number.parse().map_err(|_| {
        format!("{s:?} is not a rate; write a fraction (0.05) or a percentage (5%)")
    })?;
    let rate = v / scale;
    if !rate.is_finite() || !(0.0..=1.0).contains(&rate) {
        return Err(if scale == 1.0 && v > 1.0 && v <= 100.0 {
            format!("{s:?} is above 1; for a percentage write {v}%")
        } else {
            format!("{s:?} is outside 0..1 (0%..100%)")
        });
    }
    Ok(rate)
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::*;

    fn parses(argv: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("spark-bench").chain(argv.iter().copied()))
    }

    #[test]
    fn error_rates_parse_as_fractions_or_percentages() {
        assert_eq!(parse_error_rate("0.05"), Ok(0.05));
        assert_eq!(parse_error_rate("5%"), Ok(0.05));
        assert_eq!(parse_error_rate(" 0 "), Ok(0.0));
        assert_eq!(parse_error_rate("100%"), Ok(1.0));
        assert_eq!(parse_error_rate("1"), Ok(1.0));
        assert!(parse_error_rate("5").unwrap_err().contains("5%"));
        for bad in ["-1%", "101%", "1.5", "x", "nan", ""] {
            assert!(parse_error_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_result_printing_subcommand_takes_quiet_and_json() {
        for argv in [
            &["run", "s.toml", "-q", "--json", "--max-error-rate", "5%"][..],
            &["compare", "a", "b", "-q", "--json"],
            &["compare", "a", "b", "--quiet", "--format", "json"],
            &["history", "d", "-q", "--json"],
            &["calibrate", "-q", "--json"],
            &["merge", "a", "--out", "m", "-q", "--json"],
            &["record", "--upstream", "http://x/v1", "-q", "--json"],
            &["report", "results/r", "-q", "--json"],
        ] {
            assert!(parses(argv).is_ok(), "{argv:?}: {:?}", parses(argv).err());
        }
        // --json and an explicit, different --format contradict each other.
        assert!(parses(&["compare", "a", "b", "--json", "--format", "md"]).is_err());
        assert!(parses(&["history", "d", "--json", "--format", "md"]).is_err());
    }
}
