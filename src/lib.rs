//! spark-bench: measures how fast streaming LLM APIs feel to a developer, and why.
//!
//! # Layout
//! The module tree is the data-flow diagram, bottom layer first: each module builds on the
//! ones above it in this list, and a run's data flows down it.
//!
//! * [`sys`]: the operating system, called: every `libc` call of the crate behind a thin safe
//!   wrapper (time, socket timestamps, sockets, scheduling, limits); imports nothing of ours.
//! * [`vocab`]: the names and records every layer shares (transport, API and outcome kinds,
//!   the run's modes, [`vocab::BaseUrl`], [`vocab::RequestRecord`]); imports nothing of ours.
//! * [`scenario`]: TOML scenario files, data only (`deny_unknown_fields`, errors with file:line:col).
//! * [`plan`]: scenario + CLI overrides → a validated, seeded [`plan::Plan`].
//! * [`transport`]: connections, TLS, HTTP/1.1, HTTP/2, SSE and WebSocket framing; it stamps
//!   bytes when they arrive, through [`clock`].
//! * [`backend`]: protocol adapters (chat completions, responses): request bodies out,
//!   frames → stream events in.
//! * [`driver`]: runs a plan: sessions, concurrency, pacing, cancellation; one record per request.
//! * [`recorder`]: records → HdrHistograms and summaries (pure).
//! * [`store`]: the `results/<run-id>/` contract.
//! * [`report`]: charts, Markdown and HTML (pure).
//! * [`compare`]: the CI gate.
//! * [`runner`]: executes a plan: embedded simulators, the driver, the recorder task, the
//!   results files; returns the run's outcome and [`provenance`] as values.
//! * [`capture`]: the recording proxy of `spark-bench record` (beside [`runner`]): forwards an
//!   agent's live traffic to its upstream, and turns what it saw into a scenario and the
//!   live session's results directory; counts tokens by the simulator's rule.
//! * [`sim`]: the embedded simulator; imports no client code.
//!
//! [`commands`] is the glue of the subcommands: arguments in ([`cli`], the clap types), a
//! runner or a report called, results printed; [`progress`] draws the live progress line.
//!
//! Shared infrastructure: [`clock`] (every timestamp source: the run's clock, kernel receive
//! and transmit stamps, sub-ms sleeps, the harness watching itself; the only module that
//! reads the clock, [`sys`] giving it the raw calls), [`link`] (user-space WAN emulation),
//! [`tls`], [`rng`], [`units`], [`provenance`] (one run's counts of how its timestamps were
//! taken), [`priority`] (real-time scheduling of the threads that keep time, `--realtime`).
//!
//! A module imports only its own layer and the ones listed above it (shared infrastructure
//! sits below `plan`), the simulator imports no client code, and no two top-level modules
//! import each other: `tests/integration/architecture.rs` checks this, and
//! `scripts/module_graph.py` prints the graph; `scripts/arch_check.py` (CI step 06) counts
//! import circles, upward imports, functions over 120 lines and libc outside [`sys`], and fails
//! on any; `docs/contributing.md` says where a new transport, column or knob goes.
//!
//! Linux only: kernel timestamps, `TCP_INFO`, `SCHED_FIFO` and the rest of [`sys`] are
//! Linux's, and no other target is built or tested, so none is pretended to: building for
//! another stops with a `compile_error!`.

#[cfg(not(target_os = "linux"))]
compile_error!(
    "spark-bench builds for Linux only: it relies on Linux's socket timestamps, TCP_INFO and \
     scheduling calls (see `src/sys/`)"
);

/// `println!` that never panics: when stdout is closed (`spark-bench run … | head`), the line
/// is dropped and the run goes on (its results are in files).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `print!` that never panics (see [`outln`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut o = std::io::stdout().lock();
        let _ = write!(o, $($arg)*);
        let _ = o.flush();
    }};
}

/// `eprintln!` that never panics when stderr is closed.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod backend;
pub mod capture;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod compare;
pub mod driver;
pub mod link;
pub mod plan;
pub mod priority;
pub mod progress;
pub mod provenance;
pub mod recorder;
pub mod report;
pub mod rng;
pub mod runner;
pub mod scenario;
pub mod sim;
pub mod store;
#[cfg(target_os = "linux")]
pub mod sys;
pub mod tls;
pub mod transport;
pub mod units;
pub mod vocab;
