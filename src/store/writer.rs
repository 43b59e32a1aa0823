//! Writing a run: the directory and a `running` manifest at once (so a bad `--out` fails
//! before any request is sent), CSV rows as results arrive, and the summary, histograms and
//! final status at the end.
//!
//! `chunks.csv`, one row per chunk and the largest file by far, holds integers only: its rows
//! are formatted by hand ([`chunk_line`]) straight into the file's buffer instead of
//! through serde and the csv writer, byte for byte what the csv writer wrote (same columns,
//! `,` and `\n`; a test compares them).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::csv_out::{flush_csvs, format_u64, itoa_buf, CsvOut};
use super::manifest::{rfc3339, run_id, Manifest, RunStatus};
use super::reader::{TimelineFile, TIMELINE_SCHEMA_VERSION};
use super::rows::{RequestRow, SessionRow, CHUNK_COLUMNS, REQUEST_COLUMNS, SESSION_COLUMNS};
use super::{
    hlog, write_json, Result, StoreError, CHUNKS_FILE, MANIFEST_FILE, REQUESTS_FILE, SESSIONS_FILE,
    SUMMARY_FILE, TIMELINE_FILE,
};
use crate::plan::Plan;
use crate::recorder::{Recorder, Summary};
use crate::rng::Rng;
use crate::vocab::{RequestRecord, SessionRecord};

/// CSV files are flushed to the OS after this many rows (and at [`RunWriter::flush`] and
/// [`RunWriter::finish`]), so a killed process loses at most this many rows.
pub const FLUSH_EVERY: usize = 16;

/// An open results directory being written.
pub struct RunWriter {
    dir: PathBuf,
    manifest: Manifest,
    started: SystemTime,
    requests: CsvOut,
    chunks: BufWriter<File>,
    sessions: CsvOut,
    unflushed: usize,
    /// The shard index every row is tagged with (`run --shard`), or none.
    shard: Option<u32>,
}

impl std::fmt::Debug for RunWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunWriter")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl RunWriter {
    /// Creates `root/<run-id>/` (and `root` if needed), writes `manifest.json` with status
    /// `running` and the CSV headers. Fails fast on an unwritable root.
    pub fn create(root: &Path, plan: &Plan, command_line: &[String]) -> Result<RunWriter> {
        std::fs::create_dir_all(root).map_err(|source| StoreError::CreateDir {
            path: root.to_path_buf(),
            source,
        })?;
        let started = crate::clock::wall_now();
        let nanos = started
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut rng = Rng::new(nanos ^ (u64::from(std::process::id()) << 32));
        // `create_dir` (not `_all`) fails if the directory exists: two runs in the same
        // second get different suffixes instead of sharing a directory.
        let mut attempt = 0;
        let (id, dir) = loop {
            let id = run_id(&plan.scenario_name, started, rng.next_u64() as u16);
            let dir = root.join(&id);
            match std::fs::create_dir(&dir) {
                Ok(()) => break (id, dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 32 => {
                    attempt += 1
                }
                Err(source) => return Err(StoreError::CreateDir { path: dir, source }),
            }
        };
        let manifest = Manifest::new(id, plan, command_line, started);
        write_json(&dir.join(MANIFEST_FILE), &manifest)?;
        let create = |name: &str| -> Result<BufWriter<File>> {
            let path = dir.join(name);
            let f = File::create(&path).map_err(|source| StoreError::Write { path, source })?;
            Ok(BufWriter::with_capacity(64 << 10, f))
        };
        let open = |name: &str| -> Result<CsvOut> {
            Ok(csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(create(name)?))
        };
        let mut w = RunWriter {
            requests: open(REQUESTS_FILE)?,
            chunks: create(CHUNKS_FILE)?,
            sessions: open(SESSIONS_FILE)?,
            dir,
            manifest,
            started,
            unflushed: 0,
            shard: plan.shard.as_ref().map(|s| s.index),
        };
        // Headers are written from the column lists (not inferred from the first row), so a
        // run that records nothing still has well-formed CSV files.
        w.write_headers()?;
        w.flush()?;
        Ok(w)
    }

    fn write_headers(&mut self) -> Result<()> {
        write_header_row(
            &mut self.requests,
            &self.dir.join(REQUESTS_FILE),
            REQUEST_COLUMNS,
        )?;
        let mut head = CHUNK_COLUMNS.join(",");
        head.push('\n');
        self.chunks
            .write_all(head.as_bytes())
            .map_err(|source| StoreError::Write {
                path: self.dir.join(CHUNKS_FILE),
                source,
            })?;
        write_header_row(
            &mut self.sessions,
            &self.dir.join(SESSIONS_FILE),
            SESSION_COLUMNS,
        )
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The run id (the directory name).
    pub fn run_id(&self) -> &str {
        &self.manifest.run_id
    }

    /// The manifest as written so far.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Appends one request to `requests.csv` and its chunks to `chunks.csv`.
    pub fn write_request(&mut self, r: &RequestRecord) -> Result<()> {
        let mut row = RequestRow::from(r);
        row.shard = self.shard;
        self.requests
            .serialize(&row)
            .map_err(|e| csv_err(&self.dir.join(REQUESTS_FILE), e))?;
        let mut line = [0u8; CHUNK_LINE_MAX];
        for (i, c) in r.chunks.iter().enumerate() {
            let n = chunk_line(&mut line, r.id, i as u32, c);
            if let Err(source) = self.chunks.write_all(&line[..n]) {
                let path = self.dir.join(CHUNKS_FILE);
                return Err(StoreError::Write { path, source });
            }
        }
        self.count_row()
    }

    /// Records how the run's arrival timestamps were taken (written with the final manifest).
    pub fn set_timestamps(&mut self, how: String) {
        self.manifest.timestamps = Some(how);
    }

    /// Records how a real-endpoint target was reached (see [`Manifest::network`]); written
    /// with the manifest when the run ends.
    pub fn set_network(&mut self, target: &str, how: String) {
        self.manifest.network.insert(target.to_string(), how);
    }

    /// Records what the transport probe found (written with every manifest from now on).
    pub fn set_transport_probes(&mut self, probes: Vec<super::TransportProbe>) {
        self.manifest.transport_probes = probes;
    }

    /// Records where the run's monotonic origin sits on the wall clock (written with the
    /// final manifest).
    pub fn set_clock(&mut self, anchor: crate::clock::Anchor) {
        self.manifest.clock = Some(anchor);
    }

    /// Records the run's open-file limit, peak sessions and memory (written with the final
    /// manifest).
    pub fn set_resources(&mut self, resources: super::manifest::Resources) {
        self.manifest.resources = Some(resources);
    }

    /// Appends one session to `sessions.csv`.
    pub fn write_session(&mut self, s: &SessionRecord) -> Result<()> {
        let path = self.dir.join(SESSIONS_FILE);
        let mut row = SessionRow::from(s);
        row.shard = self.shard;
        self.sessions
            .serialize(row)
            .map_err(|e| csv_err(&path, e))?;
        self.count_row()
    }

    fn count_row(&mut self) -> Result<()> {
        self.unflushed += 1;
        if self.unflushed >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Flushes every CSV file to the OS.
    pub fn flush(&mut self) -> Result<()> {
        self.unflushed = 0;
        self.chunks.flush().map_err(|source| StoreError::Write {
            path: self.dir.join(CHUNKS_FILE),
            source,
        })?;
        flush_csvs(&self.dir, &mut self.requests, &mut self.sessions)
    }

    /// Flushes the CSVs, writes the histograms, `timeline.json` and `summary` (the
    /// recorder's, as [`Summary::from_recorder`] makes it, with the run's `harness` section)
    /// as `summary.json`, and marks the manifest `status` and `ended_at`. Returns the run
    /// directory.
    ///
    /// `summary.json` is written last but one (then the manifest), so a directory that has
    /// it has everything; when a write fails (a full disk) the manifest is marked `failed`
    /// if that small write still goes through (else it stays `running`), and readers
    /// rebuild the summary and histograms from the CSV rows.
    pub fn finish(
        mut self,
        status: RunStatus,
        recorder: &Recorder,
        summary: &Summary,
    ) -> Result<PathBuf> {
        let ended = crate::clock::wall_now();
        if let Err(e) = self.write_final(recorder, summary, ended) {
            let _ = std::fs::remove_file(self.dir.join(SUMMARY_FILE));
            self.manifest.status = RunStatus::Failed;
            self.manifest.ended_at = Some(rfc3339(ended));
            let _ = write_json(&self.dir.join(MANIFEST_FILE), &self.manifest);
            return Err(e);
        }
        self.manifest.status = status;
        self.manifest.ended_at = Some(rfc3339(ended));
        write_json(&self.dir.join(MANIFEST_FILE), &self.manifest)?;
        Ok(self.dir)
    }

    fn write_final(
        &mut self,
        recorder: &Recorder,
        summary: &Summary,
        ended: SystemTime,
    ) -> Result<()> {
        self.flush()?;
        let length = ended.duration_since(self.started).unwrap_or_default();
        hlog::write_histograms(&self.dir, recorder, self.started, length)?;
        write_json(
            &self.dir.join(TIMELINE_FILE),
            &TimelineFile {
                schema_version: TIMELINE_SCHEMA_VERSION,
                sessions: recorder.timelines().cloned().collect(),
            },
        )?;
        write_json(&self.dir.join(SUMMARY_FILE), summary)
    }
}

fn csv_err(path: &Path, e: csv::Error) -> StoreError {
    match e.into_kind() {
        csv::ErrorKind::Io(source) => StoreError::Write {
            path: path.to_path_buf(),
            source,
        },
        other => StoreError::Parse {
            path: path.to_path_buf(),
            message: format!("cannot write row: {other:?}"),
        },
    }
}

/// The longest `chunks.csv` row: three integers of up to 20 digits, two of up to 10, four
/// commas and the line end.
const CHUNK_LINE_MAX: usize = 3 * 20 + 2 * 10 + 5;

/// Formats the `chunks.csv` row of chunk `c`, the `index`th of request `request_id`, into
/// `out` (columns in [`CHUNK_COLUMNS`] order); returns its length.
fn chunk_line(
    out: &mut [u8; CHUNK_LINE_MAX],
    request_id: u64,
    index: u32,
    c: &crate::vocab::Chunk,
) -> usize {
    let mut b = itoa_buf();
    let mut n = 0;
    let fields = [
        request_id,
        u64::from(index),
        c.at_ns,
        u64::from(c.tokens),
        u64::from(c.text_bytes),
    ];
    for (i, v) in fields.into_iter().enumerate() {
        let s = format_u64(&mut b, v);
        out[n..n + s.len()].copy_from_slice(s);
        n += s.len();
        out[n] = if i == 4 { b'\n' } else { b',' };
        n += 1;
    }
    n
}

fn write_header_row(w: &mut CsvOut, path: &Path, names: &[&str]) -> Result<()> {
    w.write_record(names).map_err(|e| csv_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::super::rows::ChunkRow;
    use super::*;
    use crate::vocab::Chunk;

    /// The hand-formatted `chunks.csv` row is the csv writer's row of [`ChunkRow`], byte for
    /// byte, extremes included.
    #[test]
    fn chunk_lines_are_what_the_csv_writer_wrote() {
        let cases = [
            (0u64, 0u32, 0u64, 0u32, 0u32),
            (7, 1, 9_181_009, 3, 8),
            (u64::MAX, u32::MAX, u64::MAX, u32::MAX, u32::MAX),
        ];
        for (id, index, at_ns, tokens, text_bytes) in cases {
            let c = Chunk {
                at_ns,
                tokens,
                text_bytes,
            };
            let mut w = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(Vec::new());
            w.serialize(ChunkRow::new(&c, id, index)).unwrap();
            let want = w.into_inner().unwrap();
            let mut line = [0u8; CHUNK_LINE_MAX];
            let n = chunk_line(&mut line, id, index, &c);
            assert_eq!(
                std::str::from_utf8(&line[..n]).unwrap(),
                std::str::from_utf8(&want).unwrap()
            );
        }
    }
}
