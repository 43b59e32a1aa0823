//! The CSV writers of a results directory's three row files, shared by `writer` (a run as
//! it goes) and `merge_rows` (a merged directory).
//!
//! Owns: the writer type and flushing the three files with errors that name the file.
//! Does not own: the columns (see `rows`) or what is written when (see `writer`,
//! `merge_rows`).

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use super::{Result, StoreError, CHUNKS_FILE, REQUESTS_FILE, SESSIONS_FILE};

/// A buffered CSV writer on a file.
pub(super) type CsvOut = csv::Writer<BufWriter<File>>;

/// Flushes a results directory's three CSV writers to the OS; an error names the file.
pub(super) fn flush_csvs(
    dir: &Path,
    requests: &mut CsvOut,
    chunks: &mut CsvOut,
    sessions: &mut CsvOut,
) -> Result<()> {
    for (w, name) in [
        (requests, REQUESTS_FILE),
        (chunks, CHUNKS_FILE),
        (sessions, SESSIONS_FILE),
    ] {
        w.flush().map_err(|source| StoreError::Write {
            path: dir.join(name),
            source,
        })?;
    }
    Ok(())
}
