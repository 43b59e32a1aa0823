//! The sweep layout: `results/<sweep-id>/sweep.json` beside `points/NN-<param>-<value>/`, each
//! point a complete run directory (`report` and `compare` read it as any other run).
//!
//! Owns: creating the sweep directory and reading and writing `sweep.json`.

use std::path::Path;

use super::manifest::run_id;
use super::{read_json, write_json, Result, StoreError};
use crate::recorder::sweep::SweepSummary;
use crate::rng::Rng;

/// The sweep's summary file.
pub const SWEEP_FILE: &str = "sweep.json";

/// Creates `root/<id>/` (id `YYYYMMDD-HHMMSS-<scenario>-sweep-<4 hex>`) and returns the id.
pub fn new_sweep_dir(root: &Path, scenario: &str) -> Result<String> {
    std::fs::create_dir_all(root).map_err(|source| StoreError::CreateDir {
        path: root.to_path_buf(),
        source,
    })?;
    let now = crate::clock::wall_now();
    let nanos = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut rng = Rng::new(nanos ^ (u64::from(std::process::id()) << 32));
    let mut attempt = 0;
    loop {
        let id = run_id(&format!("{scenario}-sweep"), now, rng.next_u64() as u16);
        let dir = root.join(&id);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(id),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 32 => attempt += 1,
            Err(source) => return Err(StoreError::CreateDir { path: dir, source }),
        }
    }
}

/// Writes `dir/sweep.json` (atomically; rewritten after every point).
pub fn write_sweep(dir: &Path, summary: &SweepSummary) -> Result<()> {
    write_json(&dir.join(SWEEP_FILE), summary)
}

/// Reads `dir/sweep.json`.
pub fn read_sweep(dir: &Path) -> Result<SweepSummary> {
    read_json(&dir.join(SWEEP_FILE))
}
