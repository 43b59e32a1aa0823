//! Reading a run back: manifest, summary, histograms, and streaming CSV rows. This is what
//! `report` and `compare` build on.
//!
//! A run that died before `finish` (status `running`, no `summary.json`) is still readable:
//! the summary and histograms are recomputed from the CSV rows, and `rebuilt` says so.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use super::manifest::{Manifest, MANIFEST_SCHEMA_VERSION};
use super::rows::{ChunkRow, RequestRow, SessionRow};
use super::{
    hlog, read_json, Result, StoreError, CHUNKS_FILE, HISTOGRAMS_DIR, MANIFEST_FILE, REQUESTS_FILE,
    SESSIONS_FILE, SUMMARY_FILE, TIMELINE_FILE,
};
use crate::plan::Plan;
use crate::recorder::{
    request_statistics, session_statistics, CellKey, Metric, Recorder, SessionTimeline, Summary,
};
use crate::vocab::input::{open_lines, open_regular, Lines};
use crate::vocab::{Chunk, RequestRecord, SessionRecord};

/// What every CSV reader reads from: the file as it was when opened, lines bounded, no NUL.
pub(super) type CsvSource = Lines<std::io::Take<std::fs::File>>;

/// Version of the `timeline.json` shape.
pub const TIMELINE_SCHEMA_VERSION: u32 = 1;

/// `timeline.json`: the recorder's bounded sample of one measured session per cell.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelineFile {
    /// [`TIMELINE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// One sampled session per cell, in cell order.
    pub sessions: Vec<SessionTimeline>,
}

/// A results directory, loaded.
#[derive(Debug, Clone)]
pub struct LoadedRun {
    /// The directory.
    pub dir: PathBuf,
    /// `manifest.json`.
    pub manifest: Manifest,
    /// `summary.json` (or recomputed, see `rebuilt`).
    pub summary: Summary,
    /// Every histogram, keyed by cell and metric, in stored units (see
    /// [`Metric::storage`]); auto-resizing, so they can be merged into.
    pub histograms: BTreeMap<(CellKey, Metric), Histogram<u64>>,
    /// True when `summary.json` was missing (the run did not finish) and the summary and
    /// histograms were recomputed from `requests.csv`/`chunks.csv`/`sessions.csv`.
    pub rebuilt: bool,
    /// Torn final CSV rows skipped while rebuilding (a process killed mid-write can leave
    /// half a row at the end of a file). Always 0 for a run that finished.
    pub skipped_rows: u64,
    /// Tolerate a torn last row (only for runs without `summary.json`).
    lenient: bool,
}

impl LoadedRun {
    /// Loads `dir` (a `results/<run-id>/` or `results/baselines/<name>/` directory).
    pub fn open(dir: &Path) -> Result<LoadedRun> {
        let mpath = dir.join(MANIFEST_FILE);
        if !mpath.is_file() {
            return Err(StoreError::NotARun {
                path: dir.to_path_buf(),
            });
        }
        // Check the version before the full shape, so an old/new run gets the clear error.
        let raw: serde_json::Value = read_json(&mpath)?;
        let found = raw
            .get("schema_version")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as u32;
        if found != MANIFEST_SCHEMA_VERSION {
            return Err(StoreError::SchemaVersion {
                path: mpath,
                found,
                expected: MANIFEST_SCHEMA_VERSION,
            });
        }
        let manifest: Manifest = serde_json::from_value(raw).map_err(|e| StoreError::Parse {
            path: mpath.clone(),
            message: format!("not a spark-bench manifest: {e}"),
        })?;
        let mut run = LoadedRun {
            dir: dir.to_path_buf(),
            manifest,
            summary: Summary {
                schema_version: crate::recorder::SUMMARY_SCHEMA_VERSION,
                cells: Vec::new(),
                harness: None,
            },
            histograms: BTreeMap::new(),
            rebuilt: false,
            skipped_rows: 0,
            lenient: false,
        };
        let spath = dir.join(SUMMARY_FILE);
        if spath.is_file() {
            run.summary = read_json(&spath)?;
            run.histograms = read_histograms(&dir.join(HISTOGRAMS_DIR))?;
        } else {
            run.lenient = true;
            let mut skipped = 0;
            // Goodput counts against the SLOs the run's plan had (none in older runs).
            let slo = run
                .manifest
                .plan
                .get("slo")
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default();
            let mut rec = Recorder::with_slo(slo);
            for r in run.records_counting(&mut skipped)? {
                rec.add_request(&r);
            }
            for s in run.sessions_counting(&mut skipped)? {
                rec.add_session(&s);
            }
            run.skipped_rows = skipped;
            run.summary = Summary::from_recorder(&rec);
            run.histograms = rec
                .histograms()
                .map(|(k, m, h)| ((k.clone(), m), h.clone()))
                .collect();
            run.rebuilt = true;
        }
        Ok(run)
    }

    /// The sampled session of each cell (`timeline.json`). For a run that did not finish
    /// (no `timeline.json`) the sample is rebuilt from the CSV rows when `rebuilt` is set,
    /// otherwise it is empty.
    pub fn timeline(&self) -> Result<Vec<SessionTimeline>> {
        let path = self.dir.join(TIMELINE_FILE);
        if path.is_file() {
            let file: TimelineFile = read_json(&path)?;
            return Ok(file.sessions);
        }
        if self.rebuilt {
            return Ok(self.recorder()?.timelines().cloned().collect());
        }
        Ok(Vec::new())
    }

    /// The resolved plan the run executed.
    pub fn plan(&self) -> Result<Plan> {
        self.manifest.plan().map_err(|e| StoreError::Parse {
            path: self.dir.join(MANIFEST_FILE),
            message: format!("`plan` is not a plan this version understands: {e}"),
        })
    }

    /// The histogram of `metric` in a cell.
    pub fn histogram(
        &self,
        target: &str,
        transport: &str,
        metric: Metric,
    ) -> Option<&Histogram<u64>> {
        self.histograms
            .get(&(CellKey::new(target, transport), metric))
    }

    /// Streams `requests.csv`, one row at a time.
    pub fn request_rows(&self) -> Result<RequestRows> {
        let path = self.dir.join(REQUESTS_FILE);
        let (reader, headers) = open_csv_headers(&path)?;
        Ok(RequestRows {
            inner: reader.into_deserialize(),
            path,
            headers,
        })
    }

    /// Streams `chunks.csv`, one row at a time.
    pub fn chunk_rows(&self) -> Result<ChunkRows> {
        let path = self.dir.join(CHUNKS_FILE);
        let (reader, headers) = open_csv_headers(&path)?;
        Ok(ChunkRows {
            inner: reader.into_deserialize(),
            path,
            headers,
        })
    }

    /// Every session of `sessions.csv`.
    pub fn sessions(&self) -> Result<Vec<SessionRecord>> {
        self.sessions_counting(&mut 0)
    }

    fn sessions_counting(&self, skipped: &mut u64) -> Result<Vec<SessionRecord>> {
        let path = self.dir.join(SESSIONS_FILE);
        let (reader, headers) = open_csv_headers(&path)?;
        let rows = reader
            .into_deserialize::<SessionRow>()
            .map(|r| r.map_err(|e| csv_read_err_in(&path, headers.as_ref(), e)));
        Ok(collect_rows(rows, self.lenient, torn_tail(&path), skipped)?
            .into_iter()
            .map(SessionRow::into_record)
            .collect())
    }

    /// Every request with its chunks, rebuilt from `requests.csv` and `chunks.csv` (holds the
    /// whole run in memory; use [`LoadedRun::request_rows`] to stream).
    pub fn records(&self) -> Result<Vec<RequestRecord>> {
        self.records_counting(&mut 0)
    }

    fn records_counting(&self, skipped: &mut u64) -> Result<Vec<RequestRecord>> {
        let mut chunks: HashMap<u64, Vec<(u32, Chunk)>> = HashMap::new();
        let torn = torn_tail(&self.dir.join(CHUNKS_FILE));
        for row in collect_rows(self.chunk_rows()?, self.lenient, torn, skipped)? {
            chunks
                .entry(row.request_id)
                .or_default()
                .push((row.index, row.into_record()));
        }
        let mut out = Vec::new();
        let torn = torn_tail(&self.dir.join(REQUESTS_FILE));
        for row in collect_rows(self.request_rows()?, self.lenient, torn, skipped)? {
            let mut cs = chunks.remove(&row.id).unwrap_or_default();
            cs.sort_by_key(|(i, _)| *i);
            out.push(row.into_record(cs.into_iter().map(|(_, c)| c).collect()));
        }
        Ok(out)
    }

    /// Every raw sample per cell and metric, in stored units, with exactly the recorder's
    /// inclusion rules ([`request_statistics`], [`session_statistics`]); for resampling
    /// statistics that histograms cannot give (e.g. bootstrap confidence intervals).
    pub fn samples(&self) -> Result<BTreeMap<(CellKey, Metric), Vec<u64>>> {
        let mut out: BTreeMap<(CellKey, Metric), Vec<u64>> = BTreeMap::new();
        for r in self.records()? {
            let key = CellKey::new(&r.target, r.transport.as_str());
            for (m, v) in request_statistics(&r) {
                out.entry((key.clone(), m)).or_default().push(v);
            }
        }
        for s in self.sessions()? {
            if let Some(v) = session_statistics(&s) {
                out.entry((
                    CellKey::new(&s.target, s.transport.as_str()),
                    Metric::SessionWall,
                ))
                .or_default()
                .push(v);
            }
        }
        Ok(out)
    }

    /// What a reader of this run must be told about its rows: CSV files that end in a torn
    /// row (dropped), and a `requests.csv` with fewer rows than `summary.json` counts (the
    /// file was truncated after the run: summary figures stand, tables and charts drawn from
    /// rows are short). Empty when the files are whole. A file that cannot be read at all (a
    /// directory, a symlink loop, a line over the bound, a NUL byte) is an error, not a note.
    pub fn row_notes(&self) -> Result<Vec<String>> {
        let mut notes = Vec::new();
        for name in [REQUESTS_FILE, CHUNKS_FILE, SESSIONS_FILE] {
            let path = self.dir.join(name);
            // Its header row, read through the bounded reader: a zero-filled, binary or
            // endless file is an error here even where the rows are not read.
            match open_csv_headers(&path) {
                Err(StoreError::Read { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound && name != REQUESTS_FILE =>
                {
                    continue
                }
                Err(e) => return Err(e),
                Ok(_) => {}
            }
            if torn_tail(&path) {
                notes.push(format!(
                    "{name} ends in a half-written row (the process was killed or the disk filled while writing it); that row is dropped"
                ));
            }
        }
        if !self.rebuilt {
            let counted: u64 = self.summary.cells.iter().map(|c| c.requests).sum();
            let mut rows = 0u64;
            for row in self.request_rows()? {
                match row {
                    Ok(_) => rows += 1,
                    Err(e @ StoreError::Read { .. }) => return Err(e),
                    Err(_) => {}
                }
            }
            if rows < counted {
                notes.push(format!(
                    "{REQUESTS_FILE} has {rows} rows but summary.json counts {counted} requests: the file was truncated after the run; the summary's figures stand, but tables, charts and comparisons drawn from the rows miss {} requests",
                    counted - rows
                ));
            }
        }
        Ok(notes)
    }

    /// A recorder recomputed from the CSV rows (what `finish` would have summarised).
    pub fn recorder(&self) -> Result<Recorder> {
        let mut rec = Recorder::new();
        for r in self.records()? {
            rec.add_request(&r);
        }
        for s in self.sessions()? {
            rec.add_session(&s);
        }
        Ok(rec)
    }
}

/// Streaming rows of `requests.csv`.
pub struct RequestRows {
    inner: csv::DeserializeRecordsIntoIter<CsvSource, RequestRow>,
    path: PathBuf,
    headers: Option<csv::StringRecord>,
}

impl Iterator for RequestRows {
    type Item = Result<RequestRow>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(
            self.inner
                .next()?
                .map_err(|e| csv_read_err_in(&self.path, self.headers.as_ref(), e)),
        )
    }
}

/// Streaming rows of `chunks.csv`.
pub struct ChunkRows {
    inner: csv::DeserializeRecordsIntoIter<CsvSource, ChunkRow>,
    path: PathBuf,
    headers: Option<csv::StringRecord>,
}

impl Iterator for ChunkRows {
    type Item = Result<ChunkRow>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(
            self.inner
                .next()?
                .map_err(|e| csv_read_err_in(&self.path, self.headers.as_ref(), e)),
        )
    }
}

/// Collects rows; when `lenient`, a bad *final* row (torn by a kill mid-write) is skipped
/// and counted instead of failing. When the file does not end in a line end (`torn`), its
/// last row is half-written whether or not it happens to parse (a number cut short still
/// reads as a number): it is dropped and counted. A bad row anywhere else is an error.
fn collect_rows<T>(
    rows: impl Iterator<Item = Result<T>>,
    lenient: bool,
    torn: bool,
    skipped: &mut u64,
) -> Result<Vec<T>> {
    let mut rows = rows.peekable();
    let mut out = Vec::new();
    while let Some(row) = rows.next() {
        let last = rows.peek().is_none();
        match row {
            Ok(_) if torn && last => *skipped += 1,
            Ok(v) => out.push(v),
            Err(_) if (lenient || torn) && last => *skipped += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// True when `path` is non-empty and does not end in a line end: its last row was cut off
/// mid-write (SIGKILL, a full disk, a copy that stopped short).
fn torn_tail(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok((mut f, _)) = open_regular(path) else {
        return false;
    };
    let mut last = [0u8; 1];
    f.seek(SeekFrom::End(-1)).is_ok() && f.read_exact(&mut last).is_ok() && last[0] != b'\n'
}

/// Opens a CSV file through the bounded reader ([`open_lines`]).
pub(super) fn open_csv(path: &Path) -> Result<csv::Reader<CsvSource>> {
    let f = open_lines(path).map_err(|source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(csv::ReaderBuilder::new().has_headers(true).from_reader(f))
}

/// A CSV error as the store's: a read error (the OS's reason, or the bounded reader's line
/// and reason) or a bad row, named by its line and, when known, its column's name.
pub(super) fn csv_read_err_in(
    path: &Path,
    headers: Option<&csv::StringRecord>,
    e: csv::Error,
) -> StoreError {
    let line = e
        .position()
        .map_or_else(|| "?".to_string(), |p| p.line().to_string());
    let column = |i: u64| match headers.and_then(|h| h.get(i as usize)) {
        Some(name) => format!(", column {name:?}"),
        None => format!(", field {}", i + 1),
    };
    let message = match e.kind() {
        csv::ErrorKind::Io(_) => {
            let csv::ErrorKind::Io(source) = e.into_kind() else {
                unreachable!("matched above")
            };
            return StoreError::Read {
                path: path.to_path_buf(),
                source,
            };
        }
        csv::ErrorKind::Deserialize { err, .. } => format!(
            "line {line}{}: {}",
            err.field().map(column).unwrap_or_default(),
            err.kind()
        ),
        csv::ErrorKind::Utf8 { err, .. } => {
            format!("line {line}{}: not UTF-8", column(err.field() as u64))
        }
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("line {line}: {len} fields where the header has {expected_len}"),
        _ => format!("line {line}: {e}"),
    };
    StoreError::Parse {
        path: path.to_path_buf(),
        message: format!("bad row at {message}"),
    }
}

/// [`open_csv`] and the file's header row.
fn open_csv_headers(path: &Path) -> Result<(csv::Reader<CsvSource>, Option<csv::StringRecord>)> {
    let mut reader = open_csv(path)?;
    let headers = reader
        .headers()
        .map_err(|e| csv_read_err_in(path, None, e))?
        .clone();
    Ok((reader, Some(headers)))
}

/// Reads `histograms/<target>/<transport>/<metric>.hlog`. Files whose name is not a known
/// metric are skipped (a newer version may write more).
fn read_histograms(root: &Path) -> Result<BTreeMap<(CellKey, Metric), Histogram<u64>>> {
    let mut out = BTreeMap::new();
    if !root.is_dir() {
        return Ok(out);
    }
    for target in read_dir_sorted(root)? {
        if !target.is_dir() {
            continue;
        }
        for transport in read_dir_sorted(&target)? {
            if !transport.is_dir() {
                continue;
            }
            for file in read_dir_sorted(&transport)? {
                let Some(metric) = file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".hlog"))
                    .and_then(Metric::from_name)
                else {
                    continue;
                };
                let key = CellKey::new(&file_name(&target), &file_name(&transport));
                out.insert((key, metric), hlog::read_hlog(&file)?);
            }
        }
    }
    Ok(out)
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>> {
    let rerr = |source| StoreError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(rerr)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(rerr)?;
    v.sort();
    Ok(v)
}
