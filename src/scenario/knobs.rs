//! The `[load]` knobs: one type for the scenario's `[load]` table and the `spark-bench run`
//! flags that override it.
//!
//! Owns: each knob's name, type, help text (the doc comment is the flag's `--help`), flag
//! (clap) and TOML key (serde, unknown keys denied), and the one merge, command line over
//! file ([`LoadKnobs::or`]). Every field is optional: `None` means "not given here".
//! Does not own: defaults, validation or precedence between knobs (`plan::Load::resolve`,
//! the one place they live), nor the rest of the command line (`cli`).
//!
//! Adding a knob: a field here (doc, `#[arg]`, `#[serde]`; `#[arg(skip)]` for a key with no
//! flag) and its line in [`LoadKnobs::or`], then where `plan::Load` reads it.

use std::time::Duration;

use clap::Args;
use serde::Deserialize;

/// `[load]`, and the `run` flags that override it. A knob with `#[arg(skip)]` is a TOML key
/// only. The fields keep the table's key order (the unknown-key error lists them so).
#[derive(Debug, Clone, Default, PartialEq, Args, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadKnobs {
    /// Measured sessions per target × transport (overrides the scenario).
    #[arg(long)]
    pub sessions: Option<u32>,
    /// Sessions in flight at once per target × transport (overrides the scenario): a closed
    /// loop, a new session as soon as one ends. Exclusive with --rate.
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// `[load] warmup_sessions`: warm-up sessions per cell, run first, excluded from
    /// statistics. Default 0. No flag.
    #[arg(skip)]
    pub warmup_sessions: Option<u32>,
    /// `[load] session_interval`: open loop, the mean gap between session starts (Poisson
    /// arrivals). Absent = closed loop. No flag.
    #[arg(skip)]
    #[serde(default, deserialize_with = "super::schema::opt_duration")]
    pub session_interval: Option<Duration>,
    /// How cells that reach the same server share it (overrides `[load] schedule`):
    /// interleaved (sessions take turns through one pool of --concurrency slots),
    /// sequential (cell after cell), parallel (all at once, each with its own slots).
    /// Default: parallel when every target is an embedded simulator, else interleaved.
    #[arg(long, value_enum, value_name = "SCHEDULE")]
    pub schedule: Option<crate::vocab::Schedule>,
    /// The server's prefix cache (overrides `[load] cache` and every target's `cache`):
    /// cold (a unique salt starts every prompt), warm (prompts sent once, untimed, first),
    /// as-is (the scenario verbatim). Default: cold for real endpoints, as-is for the
    /// embedded simulator.
    #[arg(long, value_enum, value_name = "MODE")]
    pub cache: Option<crate::vocab::CacheMode>,
    /// Open-loop request rate, requests per second per target × transport (per shared
    /// server under interleaved), overrides `[load] rate`. Requests start on the arrival
    /// process's instants whether or not earlier ones have finished, and every latency counts
    /// from that intended instant, so a request the harness or a cap sends late shows its
    /// wait in TTFT. A session of R planned requests claims R instants and starts at the
    /// first (later turns follow their think time), so the offered request rate is RATE for
    /// single- and multi-turn sessions alike. Exclusive with --concurrency (a closed loop).
    #[arg(long, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,
    /// Shape of open-loop arrivals (overrides `[load] arrival`): poisson (exponential gaps,
    /// the default), constant (gaps exactly 1/rate), gamma (gaps gamma-distributed with
    /// shape --burstiness and mean 1/rate).
    #[arg(long, value_enum, value_name = "SHAPE")]
    pub arrival: Option<crate::vocab::ArrivalKind>,
    /// The gamma shape k of --arrival gamma, as vLLM's --burstiness: gaps are gamma with
    /// shape k and mean 1/rate, so k = 1 is Poisson, k < 1 burstier (clumps and pauses),
    /// k > 1 more regular; the gaps' coefficient of variation is 1/sqrt(k).
    #[arg(long, value_name = "K")]
    pub burstiness: Option<f64>,
    /// Stop condition beside the session count (overrides `[load] duration`): no session or
    /// request intended after the measured phase has run this long is sent; one intended
    /// before it is sent even if the harness is late (its lateness stays in the data), and
    /// requests in flight finish. Without a session count the run keeps starting sessions
    /// until then.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    #[serde(default, deserialize_with = "super::schema::opt_duration")]
    pub duration: Option<Duration>,
    /// Warm-up by time (overrides `[load] warmup`): run the load this long before the
    /// measured phase; its requests are recorded as warm-up and excluded from statistics.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    #[serde(default, deserialize_with = "super::schema::opt_duration")]
    pub warmup: Option<Duration>,
    /// At most N requests in flight per target × transport (per shared server when cells
    /// share one), overrides `[load] max_in_flight`. A request that waits for a place is
    /// still measured from its intended start.
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u32>,
    /// The longest a new connection may take to open (overrides `[load] connect_timeout`):
    /// TCP connect, the proxy's CONNECT and the TLS handshake together, from 10ms to 10m.
    /// Past it the request is recorded `connect-error`, its message naming the phase it was
    /// in. Default 10s.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    #[serde(default, deserialize_with = "super::schema::opt_duration")]
    pub connect_timeout: Option<Duration>,
}

impl LoadKnobs {
    /// The merge: each knob from `self` (the command line) where given, else from `file`
    /// (the scenario's `[load]`). `plan::build` calls it once per plan.
    pub fn or(&self, file: &LoadKnobs) -> LoadKnobs {
        LoadKnobs {
            sessions: self.sessions.or(file.sessions),
            concurrency: self.concurrency.or(file.concurrency),
            warmup_sessions: self.warmup_sessions.or(file.warmup_sessions),
            session_interval: self.session_interval.or(file.session_interval),
            schedule: self.schedule.or(file.schedule),
            cache: self.cache.or(file.cache),
            rate: self.rate.or(file.rate),
            arrival: self.arrival.or(file.arrival),
            burstiness: self.burstiness.or(file.burstiness),
            duration: self.duration.or(file.duration),
            warmup: self.warmup.or(file.warmup),
            max_in_flight: self.max_in_flight.or(file.max_in_flight),
            connect_timeout: self.connect_timeout.or(file.connect_timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_wins_knob_by_knob() {
        let cli = LoadKnobs {
            rate: Some(5.0),
            ..Default::default()
        };
        let file: LoadKnobs =
            toml::from_str("rate = 2.0\nsessions = 3\nsession_interval = \"2s\"\n").unwrap();
        let m = cli.or(&file);
        assert_eq!(m.rate, Some(5.0));
        assert_eq!(m.sessions, Some(3));
        assert_eq!(m.session_interval, Some(Duration::from_secs(2)));
        assert_eq!(m.concurrency, None);
    }
}
