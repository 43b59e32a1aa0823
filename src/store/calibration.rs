//! `calibration.json`: this machine's ceiling as `spark-bench calibrate` last measured it,
//! kept in the user's cache directory (`$XDG_CACHE_HOME/spark-bench/`, else
//! `~/.cache/spark-bench/`) and read by every run for its `harness` section.
//!
//! Owns: the file's shape, where it lives, and reading and writing it (atomically), and
//! what each ceiling's [`Finding`] says: `found` (the harness fell behind: a ceiling the
//! verdict uses) or not (a bound). A file written before findings were recorded loads with
//! both as `not-reached`: its figures are lower bounds, never judged against.
//! Does not own: measuring (`runner::calibrate`) or judging a run (`recorder::harness`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{read_json, write_json, Host, Result, StoreError};
use crate::recorder::harness::Ceiling;

/// The file name inside the cache directory.
pub const CALIBRATION_FILE: &str = "calibration.json";

/// One point of the request-rate ramp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RampPoint {
    /// Requested rate, req/s (the plan's intended starts).
    pub requested: f64,
    /// Achieved rate, req/s (the actual dispatches).
    pub achieved: f64,
    /// Driver lag p99 (dispatch lag less any wait for a slot), ms.
    pub lag_p99_ms: f64,
    /// The run's verdict (`ok`, `harness-bound`).
    pub verdict: String,
    /// The run's timer lateness p99, ms (a starved machine shows here).
    #[serde(default)]
    pub timer_late_p99_ms: f64,
    /// The process's mean CPU use during the run, in cores.
    #[serde(default)]
    pub cpu_cores: Option<f64>,
}

/// How a ceiling's ramp ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reach {
    /// The harness fell behind: `bound` is the ceiling.
    Found,
    /// Every rate offered held: `bound` is the highest measured, a lower bound. Also what a
    /// file from before findings were recorded loads as.
    #[default]
    NotReached,
    /// The simulator (same process, same machine) ran out before the harness fell behind:
    /// `bound` is what was received, a lower bound.
    SimulatorBound,
    /// The first rate tried already failed: the ceiling is below `bound` (an upper bound).
    BelowFirst,
}

/// What one ramp found.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Finding {
    /// Found, or which kind of bound.
    pub reach: Reach,
    /// Found: the ceiling; not reached / simulator-bound: the highest rate measured (a lower
    /// bound); below-first: the first rate tried (an upper bound).
    pub bound: f64,
    /// The first offered rate that failed, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<f64>,
    /// Why, in one sentence (empty in a file from before findings were recorded).
    #[serde(default)]
    pub reason: String,
}

impl Finding {
    /// True only when the harness itself fell behind: a ceiling a run may be judged against.
    pub fn found(&self) -> bool {
        self.reach == Reach::Found
    }

    /// `found: 123 chunks/s`, `not reached at 400000 chunks/s (a lower bound)`, … with the reason.
    pub fn describe(&self, unit: &str) -> String {
        let head = match self.reach {
            Reach::Found => format!("found: {:.0} {unit}", self.bound),
            Reach::NotReached => format!(
                "not reached at {:.0} {unit} (a lower bound: every rate tried held)",
                self.bound
            ),
            Reach::SimulatorBound => format!(
                "not reached at {:.0} {unit} (a lower bound: the simulator ran out first)",
                self.bound
            ),
            Reach::BelowFirst => format!(
                "below {:.0} {unit}, the lowest rate tried (the first rate already failed)",
                self.bound
            ),
        };
        if self.reason.is_empty() {
            head
        } else {
            format!("{head}; {}", self.reason)
        }
    }
}

/// One step of the ingest ramp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestStep {
    /// Chunks per second offered (all streams).
    pub offered: f64,
    /// Chunks per second received with every stream active.
    pub received: f64,
    /// Chunks per second the simulator wrote with every stream writing (its own pace).
    pub written: f64,
    /// Arrival stamp − the simulator's write, µs: p50 (a queue in the socket shows here).
    pub lag_p50_us: f64,
    /// p99 of the same.
    pub lag_p99_us: f64,
    /// The process's CPU use during the step (harness and simulator), in cores.
    #[serde(default)]
    pub cpu_cores: Option<f64>,
}

/// What `spark-bench calibrate` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// When, RFC 3339 UTC.
    pub measured_at: String,
    /// The machine.
    pub host: Host,
    /// True for `--quick`.
    pub quick: bool,
    /// Content chunks per second the harness ingested with every stream active: the
    /// ceiling when `ingest` is found, else the highest measured (a lower bound).
    pub ingest_chunks_s: f64,
    /// Whether the ingest ramp found the ceiling (missing in an old file: not reached).
    #[serde(default)]
    pub ingest: Finding,
    /// Every ingest step, in order (empty in an old file).
    #[serde(default)]
    pub ingest_ramp: Vec<IngestStep>,
    /// Chunks the ingest phase received.
    pub ingest_chunks: u64,
    /// Concurrent streams in the ingest phase.
    pub ingest_streams: u32,
    /// The process's CPU use during the ingest phase (harness and simulator), in cores.
    pub ingest_cpu_cores: Option<f64>,
    /// The chunk rate the stamp error was measured at (a quarter of the ceiling), chunks/s.
    pub stamp_error_rate: f64,
    /// Arrival stamp minus the simulator's write time (its ground truth), µs: p50.
    pub stamp_error_p50_us: f64,
    /// p99 of the same.
    pub stamp_error_p99_us: f64,
    /// Largest.
    pub stamp_error_max_us: f64,
    /// The highest requested rate of the ramp the harness drove with an `ok` verdict
    /// (driver lag p99 and achieved rate within the thresholds), req/s; 0 if none (then
    /// `request_rate` says `below-first`).
    pub max_request_rate: f64,
    /// Whether the rate ramp found the ceiling (missing in an old file: not reached).
    #[serde(default)]
    pub request_rate: Finding,
    /// Every ramp point, in order.
    pub ramp: Vec<RampPoint>,
    /// Wall time the calibration took, s.
    pub took_s: f64,
}

impl Calibration {
    /// The ceiling a run compares its chunk rate with (judged against only when found).
    pub fn ceiling(&self) -> Ceiling {
        Ceiling {
            chunks_s: self.ingest_chunks_s,
            found: self.ingest.found(),
            measured_at: self.measured_at.clone(),
        }
    }
}

/// `$XDG_CACHE_HOME/spark-bench/calibration.json`, else `$HOME/.cache/spark-bench/…`;
/// `None` when neither variable is set.
pub fn default_calibration_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("spark-bench").join(CALIBRATION_FILE))
}

/// Writes `c` to `path` (creating its directory).
pub fn save_calibration(path: &Path, c: &Calibration) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    write_json(path, c)
}

/// Reads the calibration at `path`: `Ok(None)` when there is no file (not calibrated).
pub fn load_calibration(path: &Path) -> Result<Option<Calibration>> {
    if !path.is_file() {
        return Ok(None);
    }
    read_json(path).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads() {
        let tmp = testkit::tempdir().unwrap();
        let path = tmp.path().join("a/b").join(CALIBRATION_FILE);
        assert!(load_calibration(&path).unwrap().is_none());
        let c = Calibration {
            measured_at: "2026-11-25T10:00:00.000Z".into(),
            host: Host::current(),
            quick: true,
            ingest_chunks_s: 123_456.0,
            ingest: Finding {
                reach: Reach::Found,
                bound: 123_456.0,
                failed_at: Some(200_000.0),
                reason: "received 61% of 200000 offered".into(),
            },
            ingest_ramp: Vec::new(),
            ingest_chunks: 1000,
            ingest_streams: 8,
            ingest_cpu_cores: Some(1.5),
            stamp_error_rate: 30_000.0,
            stamp_error_p50_us: 20.0,
            stamp_error_p99_us: 200.0,
            stamp_error_max_us: 900.0,
            max_request_rate: 500.0,
            request_rate: Finding::default(),
            ramp: vec![RampPoint {
                requested: 500.0,
                achieved: 499.0,
                lag_p99_ms: 0.3,
                verdict: "ok".into(),
                timer_late_p99_ms: 0.2,
                cpu_cores: Some(0.5),
            }],
            took_s: 9.5,
        };
        save_calibration(&path, &c).unwrap();
        let back = load_calibration(&path).unwrap().unwrap();
        assert_eq!(back, c);
        assert_eq!(back.ceiling().chunks_s, 123_456.0);
        assert!(back.ceiling().found);
        // A file from before findings were recorded loads: both ceilings not reached.
        let mut old = serde_json::to_value(&c).unwrap();
        let obj = old.as_object_mut().unwrap();
        for key in ["ingest", "ingest_ramp", "request_rate"] {
            obj.remove(key);
        }
        std::fs::write(&path, old.to_string()).unwrap();
        let back = load_calibration(&path).unwrap().unwrap();
        assert_eq!(back.ingest.reach, Reach::NotReached);
        assert_eq!(back.request_rate.reach, Reach::NotReached);
        assert!(!back.ceiling().found);
        std::fs::write(&path, "{").unwrap();
        let e = load_calibration(&path).unwrap_err().to_string();
        assert!(e.contains(CALIBRATION_FILE), "{e}");
    }
}
