//! `stalls.json`: the stall windows of a run (see `recorder::stalls`), written when the run
//! ends and read by the report and the gate. Runs from before the file existed get their
//! windows detected from their rows when read, streaming (one request's chunks at a time).
//!
//! Owns: the file, counting each window's late dispatches from `requests.csv`, and the
//! streaming detection for runs without the file. Does not own: the rule
//! (`recorder::stalls`).

use std::path::Path;

use super::rows::RequestRow;
use super::{read_json, write_json, LoadedRun, Result, REQUESTS_FILE, STALLS_FILE};
use crate::recorder::stalls::{count_late, StallDetector, Stalls};

/// Writes `stalls.json` into a run directory.
pub fn write_stalls(dir: &Path, stalls: &Stalls) -> Result<()> {
    write_json(&dir.join(STALLS_FILE), stalls)
}

/// Writes the run's `stalls.json` from the windows its recorder found, after counting each
/// window's late dispatches from `requests.csv` (one streaming pass, only when there is a
/// window). Returns the windows written.
pub fn write_run_stalls(dir: &Path, mut stalls: Stalls) -> Result<Stalls> {
    if !stalls.windows.is_empty() {
        count_late(&mut stalls, dispatch_times(dir)?);
    }
    write_stalls(dir, &stalls)?;
    Ok(stalls)
}

/// The run's `stalls.json`, when it has one (without loading the rest of the run).
pub fn read_stalls(dir: &Path) -> Result<Option<Stalls>> {
    let path = dir.join(STALLS_FILE);
    if path.is_file() {
        return read_json(&path).map(Some);
    }
    Ok(None)
}

/// Every request's (intended, dispatch) times, ns, streamed from `requests.csv` (rows after
/// one that cannot be read, such as a torn last row, are left out).
fn dispatch_times(dir: &Path) -> Result<impl Iterator<Item = (u64, u64)>> {
    Ok(super::reader::open_csv(&dir.join(REQUESTS_FILE))?
        .into_deserialize::<RequestRow>()
        .map_while(|r| r.ok())
        .map(|r| (r.intended_ns, r.dispatch_ns)))
}

impl LoadedRun {
    /// The run's stall windows: `stalls.json`, or detected from `requests.csv` and
    /// `chunks.csv` when the file is absent (older, unfinished or merged runs), reading
    /// one request's chunks at a time.
    pub fn stalls(&self) -> Result<Stalls> {
        if let Some(stalls) = read_stalls(&self.dir)? {
            return Ok(stalls);
        }
        let mut detector = StallDetector::default();
        // `chunks.csv` holds each request's chunks together, in order.
        let mut current: Option<u64> = None;
        let mut times: Vec<u64> = Vec::new();
        for row in self.chunk_rows()? {
            let Ok(row) = row else {
                // A torn last row (a killed run) ends the file; the reader says so elsewhere.
                break;
            };
            if current != Some(row.request_id) {
                times.sort_unstable();
                detector.add_stream(times.drain(..));
                current = Some(row.request_id);
            }
            times.push(row.at_ns);
        }
        times.sort_unstable();
        detector.add_stream(times.drain(..));
        let mut stalls = detector.stalls();
        if !stalls.windows.is_empty() {
            count_late(&mut stalls, dispatch_times(&self.dir)?);
        }
        Ok(stalls)
    }
}
