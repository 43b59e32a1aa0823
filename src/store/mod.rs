//! The results-directory contract: the only module that writes results, and the one every
//! reader (`report`, `compare`) goes through.
//!
//! Owns: the layout of `results/<run-id>/`, the manifest, the CSV row formats, histogram log
//! files, atomic writes, loading runs, and named baselines.
//! Does not own: statistics (see `recorder`) or rendering (see `report`).
//!
//! # Layout
//!
//! ```text
//! results/<run-id>/                     run-id = YYYYMMDD-HHMMSS-<scenario>-<4 hex>
//!   manifest.json                       schema_version, tool, status, times, host, seed, link,
//!                                       scenario {name, path, hash, source}, plan, command_line
//!   requests.csv                        one row per request (see `RequestRow` for every column)
//!   chunks.csv                          request_id, index, at_ns, tokens, text_bytes
//!   sessions.csv                        one row per session (see `SessionRow`)
//!   summary.json                        `recorder::Summary` (schemas/summary.schema.json)
//!   timeline.json                       the bounded sample of one measured session per cell
//!                                       with full records and chunks (`TimelineFile`), for
//!                                       the report's session timeline
//!   histograms/<target>/<transport>/<metric>.hlog
//!                                       HdrHistogram interval log (V2 deflate), one interval
//! results/baselines/<name>/             a copy of a run directory, for the CI gate
//! results/<sweep-id>/                   `--sweep`: sweep-id = YYYYMMDD-HHMMSS-<scenario>-sweep-<4 hex>
//!   sweep.json                          `recorder::sweep::SweepSummary`: points, curves, knees
//!   points/NN-<param>-<value>/          one complete run directory per load point
//!   report.md, report.html, charts/     the sweep report
//! ~/.cache/spark-bench/calibration.json this machine's ceiling (`spark-bench calibrate`)
//! ```
//!
//! All `*_ns` columns are nanoseconds since the run's monotonic origin; empty cells mean
//! "did not happen / not reported". `manifest.json` and `summary.json` are written to a
//! temporary file and renamed, so a reader never sees half a file. CSV rows are appended as
//! the run goes and flushed every [`FLUSH_EVERY`] rows and at the end.
//!
//! No API key is ever written: targets carry only the *name* of their key's environment
//! variable.

mod baseline;
mod calibration;
mod csv_out;
mod hlog;
mod manifest;
pub mod merge;
mod merge_rows;
mod reader;
mod rows;
mod stalls;
mod sweep;
mod writer;

use std::path::{Path, PathBuf};

pub use baseline::{is_run_or_set, list_baselines, resolve, save_baseline, BASELINES_DIR};
pub use calibration::{
    default_calibration_path, load_calibration, save_calibration, Calibration, Finding, IngestStep,
    RampPoint, Reach, CALIBRATION_FILE,
};
pub use hlog::{read_hlog, write_hlog};
pub use manifest::{
    rfc3339, run_id, Host, LoadRecord, Manifest, Resources, RunStatus, ScenarioInfo, Tool,
    TransportProbe, MANIFEST_SCHEMA_VERSION,
};
pub use reader::{ChunkRows, LoadedRun, RequestRows, TimelineFile, TIMELINE_SCHEMA_VERSION};
pub use rows::{ChunkRow, RequestRow, SessionRow, CHUNK_COLUMNS, REQUEST_COLUMNS, SESSION_COLUMNS};
pub use stalls::{read_stalls, write_run_stalls, write_stalls};
pub use sweep::{new_sweep_dir, read_sweep, write_sweep, SWEEP_FILE};
pub use writer::{RunWriter, FLUSH_EVERY};

/// `manifest.json`.
pub const MANIFEST_FILE: &str = "manifest.json";
/// `requests.csv`.
pub const REQUESTS_FILE: &str = "requests.csv";
/// `chunks.csv`.
pub const CHUNKS_FILE: &str = "chunks.csv";
/// `sessions.csv`.
pub const SESSIONS_FILE: &str = "sessions.csv";
/// `summary.json`.
pub const SUMMARY_FILE: &str = "summary.json";
/// `timeline.json`.
pub const TIMELINE_FILE: &str = "timeline.json";
/// Stall windows of the run (see `recorder::stalls`); absent in runs from before it
/// existed (readers then detect them from the records).
pub const STALLS_FILE: &str = "stalls.json";
/// `histograms/`.
pub const HISTOGRAMS_DIR: &str = "histograms";

/// Errors reading or writing results. Every message names the path and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A directory could not be created.
    #[error("cannot create directory {}: {source}; pass --out with a writable directory", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file's content is not what spark-bench writes.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The directory has no `manifest.json`.
    #[error("{} is not a spark-bench results directory (no manifest.json); pass a directory such as results/<run-id> or a baseline name", path.display())]
    NotARun {
        /// The directory.
        path: PathBuf,
    },
    /// The run was written by an incompatible version.
    #[error("{} has schema_version {found}; this spark-bench reads version {expected}. Re-run the scenario with this version", path.display())]
    SchemaVersion {
        /// The manifest.
        path: PathBuf,
        /// What it says.
        found: u32,
        /// What we read.
        expected: u32,
    },
    /// Neither a results directory nor a named baseline.
    #[error("no results directory or baseline {name:?}: looked at {looked}. Known baselines: {known}. Save one with `spark-bench run … --save-baseline NAME`")]
    NotFound {
        /// What was asked for.
        name: String,
        /// Paths tried.
        looked: String,
        /// Baselines that exist.
        known: String,
    },
    /// A name that cannot be used as a path component.
    #[error("invalid {what} name {name:?}: use letters, digits, '.', '_' and '-' (not starting with '.')")]
    BadName {
        /// What the name is for (baseline, target, transport).
        what: &'static str,
        /// The name.
        name: String,
    },
}

/// Result with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// True for names safe as one path component: `[A-Za-z0-9._-]+`, not starting with `.`.
pub fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

pub(crate) fn check_name(what: &'static str, name: &str) -> Result<()> {
    if is_safe_name(name) {
        Ok(())
    } else {
        Err(StoreError::BadName {
            what,
            name: name.to_string(),
        })
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename,
/// so readers see either the old file or the whole new one.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.tmp"));
    let werr = |source| StoreError::Write {
        path: path.to_path_buf(),
        source,
    };
    // A failed write (a full disk) leaves no half-written temporary file behind.
    let done = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done.map_err(werr)
}

/// Serializes `value` as pretty JSON and writes it atomically.
pub(crate) fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| StoreError::Parse {
        path: path.to_path_buf(),
        message: format!("cannot serialize: {e}"),
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// Reads and parses a JSON file (a regular file of at most
/// [`crate::vocab::input::MAX_WHOLE_FILE_BYTES`]).
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    use crate::vocab::input::{read_bounded, MAX_WHOLE_FILE_BYTES};
    let bytes = read_bounded(path, MAX_WHOLE_FILE_BYTES).map_err(|source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| StoreError::Parse {
        path: path.to_path_buf(),
        message: format!("invalid JSON: {e}"),
    })
}

#[cfg(test)]
mod tests;
