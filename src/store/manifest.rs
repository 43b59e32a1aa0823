//! `manifest.json`: what ran, where, when, with which plan, and whether it finished.
//!
//! Owns: the manifest type and its sections (the `merge` section's types too: `merge`
//! fills them, readers read them here), run ids, RFC 3339 UTC timestamps (computed here
//! from `SystemTime` so no date library is needed), and keeping secrets out of the text it
//! stores: the plan with credential-like header values withheld, and the scenario source,
//! plan strings and command line scrubbed with every target's redaction set plus any URL
//! `user:password` in the source.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::recorder::harness::Verdict;

/// Version of the results-directory layout and `manifest.json` shape.
pub const MANIFEST_SCHEMA_VERSION: u32 = 1;

crate::vocab::names! {
    /// How far the run got.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum RunStatus ("run status") {
        /// Still running (or the process died without finishing: treat as incomplete).
        Running = "running",
        /// Every planned session ran.
        Complete = "complete",
        /// Stopped by Ctrl-C or a deadline; what completed is written.
        Interrupted = "interrupted",
        /// Stopped by an error.
        Failed = "failed",
    }
}

/// The tool that wrote the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    /// `spark-bench`.
    pub name: String,
    /// Crate version.
    pub version: String,
}

/// The machine the client ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// Host name.
    pub hostname: String,
    /// `linux`, `macos`, …
    pub os: String,
    /// `x86_64`, `aarch64`, …
    pub arch: String,
    /// Logical CPUs available to the process.
    pub cpus: u32,
}

impl Host {
    /// The current machine.
    pub fn current() -> Host {
        Host {
            hostname: gethostname::gethostname().to_string_lossy().into_owned(),
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        }
    }
}

/// The scenario file the plan was built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioInfo {
    /// Scenario `name`.
    pub name: String,
    /// Path it was read from.
    pub path: String,
    /// `sha256:<hex>` of the file bytes.
    pub hash: String,
    /// The file's full text.
    pub source: String,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Who wrote it.
    pub tool: Tool,
    /// The directory name: `YYYYMMDD-HHMMSS-<scenario>-<4 hex>`.
    pub run_id: String,
    /// How far the run got.
    pub status: RunStatus,
    /// Start, RFC 3339 UTC (`2026-11-22T21:58:02.123Z`).
    pub started_at: String,
    /// End, RFC 3339 UTC; absent while running.
    pub ended_at: Option<String>,
    /// Client machine.
    pub host: Host,
    /// Master seed.
    pub seed: u64,
    /// Emulated link (`rtt=40ms`, or `none`).
    pub link: String,
    /// The scenario.
    pub scenario: ScenarioInfo,
    /// The resolved plan (`plan::Plan` as JSON; kept as a JSON value so a run stays
    /// readable if the plan type grows). See [`Manifest::plan`].
    pub plan: serde_json::Value,
    /// The command line, argument by argument.
    pub command_line: Vec<String>,
    /// How arrival timestamps were taken (kernel receive time or read time), and whether
    /// the link emulator ran at real-time priority; set when the run ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<String>,
    /// How the cells shared servers and treated prefix caches (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadRecord>,
    /// Per real-endpoint target: what its TLS client trusted and presented, and the proxy
    /// it went through (`http://host:port`, or `direct`). File names only: no key material,
    /// no proxy credentials.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub network: std::collections::BTreeMap<String, String>,
    /// What the transport probe found before the run, per real target × transport (absent
    /// for runs of simulator targets only, and in older runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transport_probes: Vec<TransportProbe>,
    /// Where the run's monotonic origin sits on the wall clock, ± how much (absent in older
    /// runs): what `merge` puts shards on one axis with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::clock::Anchor>,
    /// Open-file limit, concurrent sessions held and memory per session; set when the run
    /// ends (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// A merged directory (`spark-bench merge`): its shards and their clocks (absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeRecord>,
}

/// `manifest.json` → `transport_probes`: whether one real target speaks one transport,
/// asked once before the run (`transport::probe`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportProbe {
    /// Target name.
    pub target: String,
    /// Transport name.
    pub transport: crate::vocab::TransportKind,
    /// `true`: it answered in the transport's protocol; `false`: it answered otherwise (the
    /// cell was skipped, or ran with `--force-transports`); `null`: the probe could not tell
    /// (unreachable, no answer in time), and the cell ran.
    pub supported: Option<bool>,
    /// What the server answered (`HTTP/1.1 400 Bad Request`, `SETTINGS`, `HTTP/1.1 101
    /// Switching Protocols`), or why the probe could not tell; scrubbed, cut short.
    pub answer: String,
    /// How long the probe took, ms.
    pub elapsed_ms: f64,
}

/// `manifest.json` → `merge`: what a merged directory was made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeRecord {
    /// The plan hash every shard named.
    pub plan_hash: String,
    /// Shards the plan was split into.
    pub shard_count: u32,
    /// The shards merged, in index order.
    pub shards: Vec<MergedShard>,
    /// Shard indices that were not there (only with `--partial`).
    pub missing: Vec<u32>,
    /// True when merged with `--partial` and something was missing or unfinished.
    pub partial: bool,
    /// What `*_ns` instants count from: the earliest shard's monotonic origin.
    pub axis: String,
}

/// One merged shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedShard {
    /// 0-based shard index.
    pub index: u32,
    /// The directory it was read from.
    pub dir: String,
    /// Its run id.
    pub run_id: String,
    /// The machine it ran on.
    pub host: String,
    /// How far it got.
    pub status: RunStatus,
    /// Its instants were moved by this much onto the merged axis, ns.
    pub offset_ns: u64,
    /// How far that offset can be off: this shard's clock anchor uncertainty plus the
    /// earliest shard's, ns.
    pub offset_uncertainty_ns: u64,
    /// Added to its request ids (`requests.csv` `id`, `chunks.csv` `request_id`).
    pub id_offset: u64,
    /// Added to its `connection_id`s.
    pub connection_id_offset: u64,
    /// Its rows in `requests.csv`.
    pub requests: u64,
    /// Its harness verdict.
    pub harness: Option<Verdict>,
}

/// `manifest.json` → `resources`: what the run could hold open and what holding it cost.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Resources {
    /// `RLIMIT_NOFILE` soft limit when the process started.
    pub nofile_before: u64,
    /// The soft limit the run raised it to (as far as the hard limit, or further when the
    /// process may raise the hard limit too).
    pub nofile_granted: u64,
    /// The hard limit after raising.
    pub nofile_hard: u64,
    /// Most sessions in progress at once (between a session's intended start and its last
    /// byte), over every cell.
    pub peak_sessions: u64,
    /// Resident memory before the first request, KiB.
    pub rss_before_kib: u64,
    /// Peak resident memory of the process (`VmHWM`), KiB.
    pub rss_peak_kib: u64,
    /// `(rss_peak − rss_before) / peak_sessions`, KiB: what one concurrent session cost
    /// (embedded simulators in the same process count too; run against `spark-bench
    /// serve` or a real endpoint to measure the client alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kib_per_session: Option<f64>,
}

/// `manifest.json` → `load`: the schedule that ran, which cells shared a server, and each
/// cell's prefix-cache mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadRecord {
    /// `interleaved`, `sequential` or `parallel`.
    pub schedule: String,
    /// Session slots per server (interleaved), per cell otherwise.
    pub concurrency: u32,
    /// Servers two or more cells reached, with those cells (`target × transport`).
    pub shared_servers: Vec<crate::plan::SharedServer>,
    /// Cache mode per cell (`target × transport` → `cold`, `warm`, `as-is`).
    pub cache: std::collections::BTreeMap<String, String>,
    /// The salt's form, when any cell ran `cold`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub salt_form: Option<String>,
    /// The one-line description the run printed in its header.
    pub summary: String,
}

impl LoadRecord {
    /// The record of a plan.
    pub fn of(plan: &Plan) -> LoadRecord {
        let cold = plan
            .cells
            .iter()
            .any(|c| c.cache == crate::vocab::CacheMode::Cold);
        LoadRecord {
            schedule: plan.load.schedule.as_str().to_string(),
            concurrency: plan.load.concurrency,
            shared_servers: plan.shared_servers(),
            cache: plan
                .cells
                .iter()
                .map(|c| {
                    (
                        format!("{} × {}", c.target.name, c.transport),
                        c.cache.as_str().to_string(),
                    )
                })
                .collect(),
            salt_form: cold.then(|| crate::plan::salt::SALT_FORM.to_string()),
            summary: plan.load_line(),
        }
    }
}

impl Manifest {
    /// A `running` manifest for a plan.
    pub fn new(
        run_id: String,
        plan: &Plan,
        command_line: &[String],
        started: SystemTime,
    ) -> Manifest {
        let secrets = stored_secrets(plan);
        // Plan holds only strings, numbers, maps and lists: serializing cannot fail.
        let stored_plan = serde_json::to_value(crate::plan::targets::without_secrets(plan))
            .unwrap_or(serde_json::Value::Null);
        Manifest {
            schema_version: MANIFEST_SCHEMA_VERSION,
            tool: Tool {
                name: env!("CARGO_PKG_NAME").into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            run_id,
            status: RunStatus::Running,
            started_at: rfc3339(started),
            ended_at: None,
            host: Host::current(),
            seed: plan.seed,
            link: plan.link_line(),
            scenario: ScenarioInfo {
                name: plan.scenario_name.clone(),
                path: plan.scenario_path.clone(),
                hash: plan.scenario_hash.clone(),
                source: secrets.remove(&plan.scenario_source),
            },
            plan: scrub_json(stored_plan, &secrets),
            command_line: command_line.iter().map(|a| secrets.remove(a)).collect(),
            timestamps: None,
            load: Some(LoadRecord::of(plan)),
            network: Default::default(),
            transport_probes: Vec::new(),
            clock: None,
            resources: None,
            merge: None,
        }
    }

    /// The plan, typed (with `scenario_source` filled from the manifest).
    pub fn plan(&self) -> Result<Plan, serde_json::Error> {
        let mut plan: Plan = serde_json::from_value(self.plan.clone())?;
        plan.scenario_source = self.scenario.source.clone();
        Ok(plan)
    }
}

/// What the manifest's texts are scrubbed of: every target's redaction set and every URL
/// `user:password` the scenario source holds.
fn stored_secrets(plan: &Plan) -> crate::vocab::redact::Secrets {
    let mut s = crate::vocab::redact::Secrets::default();
    for c in &plan.cells {
        s.extend(&crate::backend::request::secrets(&c.target));
    }
    for u in crate::vocab::redact::userinfos(&plan.scenario_source) {
        s.add_userinfo(&u);
    }
    s
}

/// `v` with every string scrubbed.
fn scrub_json(v: serde_json::Value, secrets: &crate::vocab::redact::Secrets) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(t) => Value::String(secrets.remove(&t)),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| scrub_json(x, secrets)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| (k, scrub_json(x, secrets)))
                .collect(),
        ),
        other => other,
    }
}

/// `YYYYMMDD-HHMMSS-<scenario>-<4 hex>`: the UTC start time, the scenario name reduced to
/// `[A-Za-z0-9_-]`, and four hex digits so that two runs in the same second differ.
pub fn run_id(scenario_name: &str, at: SystemTime, salt: u16) -> String {
    let (date, time) = utc_parts(at);
    let name: String = scenario_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    let name = if name.is_empty() {
        "run".to_string()
    } else {
        name
    };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}-{name}-{salt:04x}",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// RFC 3339 in UTC with milliseconds: `2026-11-22T21:58:02.123Z`.
pub fn rfc3339(at: SystemTime) -> String {
    let (date, time) = utc_parts(at);
    let ms = at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        date.0, date.1, date.2, time.0, time.1, time.2
    )
}

/// ((year, month, day), (hour, minute, second)) in UTC.
fn utc_parts(at: SystemTime) -> ((i64, u32, u32), (u32, u32, u32)) {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let time = (
        (sod / 3600) as u32,
        ((sod % 3600) / 60) as u32,
        (sod % 60) as u32,
    );
    (civil_from_days(days), time)
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 → (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_and_run_ids() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_384_682_123); // 2026-11-22T21:58:02.123Z
        assert_eq!(rfc3339(t), "2026-11-22T21:58:02.123Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            run_id("snake game!", t, 0xa1f),
            "20261122-215802-snake-game--0a1f"
        );
        assert_eq!(run_id("", t, 0xffff), "20261122-215802-run-ffff");
    }
}
