//! `stalls.json`: the stall windows of a run (see `recorder::stalls`), written when the run
//! ends and read by the report and the gate. Runs from before the file existed get their
//! windows detected from their records when read.

use std::path::Path;

use super::{read_json, write_json, LoadedRun, Result, STALLS_FILE};
use crate::recorder::stalls::{detect, Stalls};

/// Writes `stalls.json` into a run directory.
pub fn write_stalls(dir: &Path, stalls: &Stalls) -> Result<()> {
    write_json(&dir.join(STALLS_FILE), stalls)
}

impl LoadedRun {
    /// The run's stall windows: `stalls.json`, or detected from `requests.csv` and
    /// `chunks.csv` when the file is absent (older or unfinished runs).
    pub fn stalls(&self) -> Result<Stalls> {
        let path = self.dir.join(STALLS_FILE);
        if path.is_file() {
            return read_json(&path);
        }
        Ok(detect(&self.records()?))
    }
}
