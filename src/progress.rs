//! The live progress display of `spark-bench run`.
//!
//! Owns: showing [`LiveStats`] snapshots. An indicatif bar on a terminal; plain status
//! lines every few seconds when stderr is not a terminal (CI logs); nothing with `--quiet`.
//! Does not own: any measurement state (it only reads snapshots from a `watch` channel).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::watch;

use crate::recorder::LiveStats;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// An animated bar (stderr is a terminal).
    Bar,
    /// A status line every few seconds (stderr is a pipe or file).
    Lines,
    /// Nothing.
    Quiet,
}

impl Mode {
    /// Picks the mode for this process: quiet if asked, a bar on a terminal, lines otherwise.
    pub fn detect(quiet: bool) -> Mode {
        if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Bar
        } else {
            Mode::Lines
        }
    }
}

/// Shows progress until the channel closes. The channel carries (sessions done, live stats);
/// `total_sessions` sizes the bar.
pub async fn show(mode: Mode, total_sessions: u64, mut rx: watch::Receiver<(u64, LiveStats)>) {
    let started = crate::clock::now();
    match mode {
        Mode::Quiet => while rx.changed().await.is_ok() {},
        Mode::Bar => {
            let bar = ProgressBar::with_draw_target(
                Some(total_sessions),
                ProgressDrawTarget::stderr_with_hz(8),
            );
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} sessions  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(125));
            while rx.changed().await.is_ok() {
                let (done, s) = *rx.borrow_and_update();
                bar.set_position(done);
                bar.set_message(describe(&s));
            }
            bar.finish_and_clear();
        }
        Mode::Lines => {
            let mut last_print = crate::clock::now();
            while rx.changed().await.is_ok() {
                if crate::clock::since(last_print) >= Duration::from_secs(5) {
                    last_print = crate::clock::now();
                    let (done, s) = *rx.borrow_and_update();
                    errln!(
                        "[{:>6.1}s] {}/{} sessions  {}",
                        crate::clock::since(started).as_secs_f64(),
                        done,
                        total_sessions,
                        describe(&s)
                    );
                }
            }
        }
    }
}

fn describe(s: &LiveStats) -> String {
    let ttft = s
        .ttft_p50_ms
        .map(|ms| crate::units::fmt_ns(ms * 1e6))
        .unwrap_or_else(|| "–".into());
    let tok = s
        .output_tok_s
        .map(|t| format!("{t:.0} tok/s"))
        .unwrap_or_else(|| "–".into());
    format!(
        "{} requests, {} failed, TTFT p50 {ttft}, {tok}",
        s.requests_done, s.failures
    )
}
