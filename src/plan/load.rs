//! The load a plan runs: [`Load`], and the one place the `[load]` knobs become it, with their
//! defaults, validation and precedence.
//!
//! Owns: the `Load` type (serialized in the manifest), [`Load::resolve`] (merged knobs in,
//! defaults and range checks applied, rate against concurrency and session interval,
//! the arrival shape, stop conditions), and the messages that name the flag or the key at
//! `file:line:col` and the fix.
//! Does not own: the knobs' names, flags and keys (`scenario::LoadKnobs`), the schedule and
//! cache modes that depend on the cells (`build`), or the session list (`build::sessions`).
//!
//! A new knob: a `Load` field and the line of `resolve` that reads it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::arrival::{self, Arrival};
use super::check::{PlanError, Src};
use crate::scenario::LoadKnobs;
use crate::vocab::{ArrivalKind, Schedule};

/// Highest accepted `rate`, requests per second.
pub const MAX_RATE: f64 = 100_000.0;

/// Lowest accepted `rate`, requests per second (one request every 1000 s): below it the gap
/// between arrivals, in nanoseconds, no longer fits the schedule's integers.
pub const MIN_RATE: f64 = 0.001;

/// Load shape for every cell.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Load {
    /// Measured sessions per cell.
    pub sessions: u32,
    /// Sessions in flight at once per cell (closed loop).
    pub concurrency: u32,
    /// Warm-up sessions per cell, run first and excluded from statistics.
    pub warmup_sessions: u32,
    /// Open-loop session arrivals: mean gap between session starts (Poisson when set).
    /// `None` starts a new session as soon as a slot frees (closed loop).
    #[serde(default, with = "opt_duration")]
    pub session_interval: Option<Duration>,
    /// How cells that reach the same server share it (`[load] schedule` / `--schedule`).
    /// Older manifests have none: `parallel`, what every run did before.
    #[serde(default)]
    pub schedule: Schedule,
    /// Per-run key of the `cold` cache salt, drawn when the run starts (not by the plan
    /// builder, so that a second run with the same seed does not resend the first run's
    /// salts and find them in the server's cache). 0 in a plan that has not run.
    #[serde(default)]
    pub salt_key: u64,
    /// Open-loop request rate, requests per second per cell (or per shared server under
    /// `interleaved`): `[load] rate` / `--rate`. Sessions start on the arrival process's
    /// instants, each claiming as many instants as it plans requests (see
    /// [`arrival::session_offsets`]); later turns follow their think time. `None`: no rate.
    #[serde(default)]
    pub rate: Option<f64>,
    /// The shape of the open-loop arrivals (`rate` or `session_interval`): `[load] arrival`
    /// and `burstiness`. Older manifests have none: Poisson.
    #[serde(default)]
    pub arrival: arrival::Arrival,
    /// Stop condition beside the session count: no session or request *intended* after the
    /// measured phase has run this long is sent (one intended before it is sent even when
    /// the harness is late, so its lateness stays in the data); requests in flight finish.
    #[serde(default, with = "opt_duration")]
    pub duration: Option<Duration>,
    /// Warm-up by time (`[load] warmup`): this long of the run's load shape runs before the
    /// measured phase, its requests marked warm-up (excluded from statistics). Open loop:
    /// the plan's warm-up sessions with offsets below it; closed loop: the driver starts
    /// fresh warm-up sessions until it is over.
    #[serde(default, with = "opt_duration")]
    pub warmup_duration: Option<Duration>,
    /// At most this many requests in flight per cell (per shared server under
    /// `interleaved`/`sequential`); a request that waits for a place is still measured from
    /// its intended start.
    #[serde(default)]
    pub max_in_flight: Option<u32>,
    /// True when `duration` (not a session count) decides how many measured sessions run:
    /// in closed loop the driver keeps starting fresh sessions (cycling the plan's scripts,
    /// each with a new index) until the duration is up.
    #[serde(default)]
    pub sessions_from_duration: bool,
    /// `[load] connect_timeout` / `--connect-timeout` when given (see
    /// [`Load::connect_timeout`] for the default); left out of the plan's JSON when absent,
    /// so plans without it keep their hash.
    #[serde(
        default,
        with = "opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub connect_timeout_set: Option<Duration>,
}

/// The connect timeout when none is given: TCP connect, proxy `CONNECT` and TLS together.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The range a connect timeout may take.
pub const CONNECT_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_secs(600));

impl Load {
    /// True for an open loop (`rate` or `session_interval`): sessions start at planned
    /// instants whether or not earlier ones have finished.
    pub fn open_loop(&self) -> bool {
        self.rate.is_some() || self.session_interval.is_some()
    }

    /// Session slots per lane: `concurrency`, except under a request rate, where sessions
    /// are not capped (only `max_in_flight` caps requests).
    pub fn session_slots(&self) -> usize {
        if self.rate.is_some() {
            tokio::sync::Semaphore::MAX_PERMITS
        } else {
            self.concurrency.max(1) as usize
        }
    }

    /// One phrase on the load shape for the run's header: `open loop 200 requests/s
    /// (constant)`, `closed loop, concurrency 4, for 1m`, … with the stop conditions; empty
    /// for a plain closed loop (the header's session count and concurrency say it all).
    pub fn shape_line(&self) -> String {
        let plain = !self.open_loop()
            && self.max_in_flight.is_none()
            && self.warmup_duration.is_none()
            && self.duration.is_none();
        if plain {
            return String::new();
        }
        let mut s = match (self.rate, self.session_interval) {
            (Some(r), _) => format!("open loop {} requests/s ({})", fmt_rate(r), self.arrival),
            (None, Some(gap)) => format!(
                "open loop, a session every {} on average ({})",
                crate::units::fmt_duration_spec(gap),
                self.arrival
            ),
            (None, None) => format!("closed loop, concurrency {}", self.concurrency),
        };
        if let Some(m) = self.max_in_flight {
            s.push_str(&format!(", at most {m} requests in flight"));
        }
        if let Some(w) = self.warmup_duration {
            s.push_str(&format!(", warm-up {}", crate::units::fmt_duration_spec(w)));
        }
        if let Some(d) = self.duration {
            s.push_str(&format!(", for {}", crate::units::fmt_duration_spec(d)));
        }
        s
    }
}

/// A rate without trailing zeros: `200`, `0.5`, `12.25`.
fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Where a knob came from, for messages: the command line (`--flag`) or the scenario's
/// `[load]` table (`[load] key at file:line:col`).
struct Origin<'a> {
    /// The command line's knobs (a knob given there came from there).
    cli: &'a LoadKnobs,
    /// The scenario file.
    src: &'a Src<'a>,
}

impl Origin<'_> {
    /// `[load] KEY at file:line:col`.
    fn key_at(&self, key: &str) -> String {
        format!("[load] {key} at {}", self.src.at(Some("[load]"), 1, key))
    }

    /// `--KEY` when `flag` (the command line gave it), else [`Origin::key_at`].
    fn from(&self, flag: bool, key: &str) -> String {
        if flag {
            format!("--{}", key.replace('_', "-"))
        } else {
            self.key_at(key)
        }
    }
}

impl Load {
    /// The longest a new connection may take to open (TCP connect, proxy `CONNECT`, TLS
    /// handshake together): `connect_timeout`, default [`DEFAULT_CONNECT_TIMEOUT`].
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout_set.unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// The load of `knobs` (the command line's knobs `cli` merged over the scenario's
    /// `[load]`, see [`LoadKnobs::or`]): defaults applied, every value checked, with the
    /// warnings a reader needs. The schedule is left `parallel`: `build` resolves it once the
    /// cells are known.
    pub(super) fn resolve(
        knobs: &LoadKnobs,
        cli: &LoadKnobs,
        src: &Src,
        warnings: &mut Vec<String>,
    ) -> Result<Load, PlanError> {
        let at = Origin { cli, src };
        let (sessions, concurrency, warmup_sessions) = counts(knobs, &at)?;
        let session_interval = knobs.session_interval;
        if let Some(d) = session_interval {
            if d < Duration::from_millis(1) || d > Duration::from_secs(3600) {
                return Err(PlanError::new(format!(
                    "{} must be between 1ms and 1h, e.g. \"2s\" (or remove it for a closed loop)",
                    at.key_at("session_interval")
                )));
            }
        }
        let rate = rate(knobs, &at, session_interval.is_some(), warnings)?;
        let arrival = arrival_shape(knobs, &at, rate.is_some() || session_interval.is_some())?;
        let (duration, warmup) = stop_and_warmup(knobs, &at)?;
        let max_in_flight = knobs.max_in_flight;
        if let Some(m) = max_in_flight {
            if !(1..=100_000).contains(&m) {
                return Err(PlanError::new(format!(
                    "{} is {m}; use 1 to 100000 requests in flight, e.g. 64",
                    at.from(cli.max_in_flight.is_some(), "max_in_flight")
                )));
            }
        }
        let connect_timeout_set = knobs.connect_timeout;
        if let Some(d) = connect_timeout_set {
            let (lo, hi) = CONNECT_TIMEOUT_RANGE;
            if d < lo || d > hi {
                return Err(PlanError::new(format!(
                    "{} is {}; use 10ms to 10m, e.g. \"10s\"",
                    at.from(cli.connect_timeout.is_some(), "connect_timeout"),
                    crate::units::fmt_duration_spec(d)
                )));
            }
        }
        Ok(Load {
            connect_timeout_set,
            sessions,
            concurrency,
            warmup_sessions,
            session_interval,
            // Resolved once the cells are known (see `build`'s `resolve_schedule_and_cache`).
            schedule: Schedule::Parallel,
            salt_key: 0,
            rate,
            arrival,
            duration,
            warmup_duration: warmup.filter(|w| !w.is_zero()),
            max_in_flight,
            sessions_from_duration: duration.is_some() && knobs.sessions.is_none(),
        })
    }
}

/// Sessions (default 1), concurrency (default 1) and warm-up sessions (default 0), checked.
fn counts(knobs: &LoadKnobs, at: &Origin) -> Result<(u32, u32, u32), PlanError> {
    let sessions = knobs.sessions.unwrap_or(1);
    let concurrency = knobs.concurrency.unwrap_or(1);
    let warmup_sessions = knobs.warmup_sessions.unwrap_or(0);
    if !(1..=100_000).contains(&sessions) {
        return Err(PlanError::new(format!(
            "{} is {sessions}; use 1 to 100000 sessions",
            at.from(at.cli.sessions.is_some(), "sessions")
        )));
    }
    if !(1..=10_000).contains(&concurrency) {
        return Err(PlanError::new(format!(
            "{} is {concurrency}; use 1 to 10000",
            at.from(at.cli.concurrency.is_some(), "concurrency")
        )));
    }
    if warmup_sessions > 1000 {
        return Err(PlanError::new(format!(
            "{} is {warmup_sessions}; use at most 1000",
            at.key_at("warmup_sessions")
        )));
    }
    Ok((sessions, concurrency, warmup_sessions))
}

/// The request rate: against concurrency the command line wins over the scenario, and both
/// from the same place is a contradiction; then its range, and not beside a session
/// interval.
fn rate(
    knobs: &LoadKnobs,
    at: &Origin,
    has_interval: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<f64>, PlanError> {
    let cli = at.cli;
    let mut rate = knobs.rate;
    // A knob the command line did not give is the scenario's.
    match (cli.rate, cli.concurrency, knobs.rate, knobs.concurrency) {
        (Some(_), Some(_), _, _) => {
            return Err(PlanError::new(
                "--rate and --concurrency are two load shapes (open loop at a request rate, closed loop with N sessions in flight); give one, and cap an open loop with --max-in-flight",
            ))
        }
        (None, None, Some(_), Some(_)) => {
            return Err(PlanError::new(format!(
                "{} and {} are two load shapes (open loop at a request rate, closed loop with N sessions in flight); keep one, and cap an open loop with max_in_flight",
                at.key_at("rate"),
                at.key_at("concurrency")
            )))
        }
        (Some(_), None, _, Some(c)) => warnings.push(format!(
            "--rate runs an open loop, so the scenario's concurrency = {c} is not used; cap requests in flight with max_in_flight"
        )),
        (None, Some(_), Some(r), _) => {
            warnings.push(format!(
                "--concurrency runs a closed loop, so the scenario's rate = {r} is not used"
            ));
            rate = None;
        }
        _ => {}
    }
    if let Some(r) = rate {
        if !r.is_finite() || !(MIN_RATE..=MAX_RATE).contains(&r) {
            return Err(PlanError::new(format!(
                "{} is {r}; use a request rate above 0, from {MIN_RATE} (one request every 1000 s) to at most {MAX_RATE} requests/s, e.g. 20",
                at.from(cli.rate.is_some(), "rate")
            )));
        }
        if has_interval {
            return Err(PlanError::new(format!(
                "{} and {} both set an open loop (requests per second vs a mean gap between session starts); keep one",
                at.from(cli.rate.is_some(), "rate"),
                at.key_at("session_interval")
            )));
        }
    }
    Ok(rate)
}

/// The arrival process's shape (`arrival`, `burstiness`); `open` is whether the load is an
/// open loop (a shape on a closed loop is an error, unless `--concurrency` made it one).
fn arrival_shape(knobs: &LoadKnobs, at: &Origin, open: bool) -> Result<Arrival, PlanError> {
    let cli = at.cli;
    let kind = knobs.arrival;
    let arrival = match (kind, knobs.burstiness) {
        (Some(ArrivalKind::Gamma), None) => {
            return Err(PlanError::new(format!(
                "{} is \"gamma\" but no burstiness is given; add burstiness, the gamma shape k (1 is Poisson, below 1 burstier), e.g. burstiness = 0.5 or --burstiness 0.5",
                at.from(cli.arrival.is_some(), "arrival")
            )))
        }
        (Some(ArrivalKind::Gamma), Some(k)) => {
            if !k.is_finite() || !(0.01..=100.0).contains(&k) {
                return Err(PlanError::new(format!(
                    "{} is {k}; use a gamma shape from 0.01 to 100 (1 is Poisson, below 1 burstier), e.g. 0.5",
                    at.from(cli.burstiness.is_some(), "burstiness")
                )));
            }
            Arrival::Gamma { shape: k }
        }
        (other, Some(_)) => {
            return Err(PlanError::new(format!(
                "{} is the shape of gamma arrivals, but arrival is {}; add arrival = \"gamma\" (--arrival gamma) or remove burstiness",
                at.from(cli.burstiness.is_some(), "burstiness"),
                other.unwrap_or_default()
            )))
        }
        (Some(ArrivalKind::Constant), None) => Arrival::Constant,
        (Some(ArrivalKind::Poisson) | None, None) => Arrival::Poisson,
    };
    if kind.is_some() && !open && cli.concurrency.is_none() {
        return Err(PlanError::new(format!(
            "{} shapes open-loop arrivals, but this load is a closed loop; add a rate (e.g. rate = 20 or --rate 20) or remove arrival",
            at.from(cli.arrival.is_some(), "arrival")
        )));
    }
    Ok(arrival)
}

/// The `duration` stop (1ms to 24h) and the warm-up by time (at most 1h), checked.
fn stop_and_warmup(
    knobs: &LoadKnobs,
    at: &Origin,
) -> Result<(Option<Duration>, Option<Duration>), PlanError> {
    let duration = knobs.duration;
    if let Some(d) = duration {
        if d < Duration::from_millis(1) || d > Duration::from_secs(24 * 3600) {
            return Err(PlanError::new(format!(
                "{} is {}; use 1ms to 24h, e.g. \"60s\"",
                at.from(at.cli.duration.is_some(), "duration"),
                crate::units::fmt_duration_spec(d)
            )));
        }
    }
    let warmup = knobs.warmup;
    if let Some(w) = warmup {
        if w > Duration::from_secs(3600) {
            return Err(PlanError::new(format!(
                "{} is {}; keep a warm-up at most 1h, e.g. \"10s\"",
                at.from(at.cli.warmup.is_some(), "warmup"),
                crate::units::fmt_duration_spec(w)
            )));
        }
    }
    Ok((duration, warmup))
}

mod opt_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&crate::units::fmt_duration_spec(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| humantime::parse_duration(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests;
