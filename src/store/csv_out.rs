//! The CSV writers of a results directory's three row files, shared by `writer` (a run as
//! it goes) and `merge_rows` (a merged directory).
//!
//! Owns: the writer type, flushing the files with errors that name the file, and the integer
//! formatting of `chunks.csv` rows ([`format_u64`]).
//! Does not own: the columns (see `rows`) or what is written when (see `writer`,
//! `merge_rows`).

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use super::{Result, StoreError, REQUESTS_FILE, SESSIONS_FILE};

/// A buffered CSV writer on a file.
pub(super) type CsvOut = csv::Writer<BufWriter<File>>;

/// Flushes a results directory's `requests.csv` and `sessions.csv` writers to the OS (the
/// caller flushes `chunks.csv`, whose writer is its own); an error names the file.
pub(super) fn flush_csvs(dir: &Path, requests: &mut CsvOut, sessions: &mut CsvOut) -> Result<()> {
    for (w, name) in [(requests, REQUESTS_FILE), (sessions, SESSIONS_FILE)] {
        w.flush().map_err(|source| StoreError::Write {
            path: dir.join(name),
            source,
        })?;
    }
    Ok(())
}

/// A buffer for [`format_u64`].
pub(super) fn itoa_buf() -> itoa::Buffer {
    itoa::Buffer::new()
}

/// `v` in decimal, in `buf`: the integer columns of `chunks.csv`, written without `fmt`
/// (`itoa` writes two digits a step from a table).
pub(super) fn format_u64(buf: &mut itoa::Buffer, v: u64) -> &[u8] {
    buf.format(v).as_bytes()
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_format_as_decimal() {
        let mut b = super::itoa_buf();
        for v in [0u64, 7, 10, 123_456_789, u64::MAX] {
            assert_eq!(super::format_u64(&mut b, v), v.to_string().as_bytes());
        }
    }
}
