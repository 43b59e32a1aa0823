//! The row side of `merge`: each shard's `requests.csv`, `chunks.csv` and `sessions.csv`
//! streamed into the merged files, with disjoint ids, instants moved onto the merged
//! wall-clock axis, every row tagged with its shard, and every row counted into a
//! counts-only recorder (the histograms come from the shards' logs).
//!
//! Streams: memory does not grow with the number of rows (a million-request merge holds
//! one row per file at a time). `chunks.csv`, the largest file, is rewritten field by field
//! without deserializing its rows.

use std::io::BufWriter;
use std::path::Path;

use super::csv_out::{flush_csvs, format_u64, itoa_buf, CsvOut as Out};
use super::rows::{shift_instants, ChunkRow, RequestRow, SessionRow};
use super::{Result, StoreError, CHUNKS_FILE, REQUESTS_FILE, SESSIONS_FILE};
use crate::recorder::Recorder;

/// The merged CSV files being written.
pub(super) struct Writers {
    requests: Out,
    chunks: Out,
    sessions: Out,
    dir: std::path::PathBuf,
}

/// Where one shard's rows go: its shard index, the offset of its instants on the merged
/// axis, and the offsets that make its ids disjoint from the shards before it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shift {
    pub shard: u32,
    pub offset_ns: u64,
    pub id_base: u64,
    pub connection_base: u64,
}

/// What one shard's rows added: the highest ids seen (for the next shard's bases) and the
/// request count.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Added {
    pub max_id: Option<u64>,
    pub max_connection: Option<u64>,
    pub requests: u64,
}

fn werr(path: &Path) -> impl Fn(csv::Error) -> StoreError + '_ {
    move |e| StoreError::Parse {
        path: path.to_path_buf(),
        message: format!("cannot write row: {e}"),
    }
}

fn rerr(path: &Path) -> impl Fn(csv::Error) -> StoreError + '_ {
    move |e| super::reader::csv_read_err_in(path, None, e)
}

fn open_in(path: &Path) -> Result<csv::Reader<std::io::BufReader<super::reader::CsvSource>>> {
    let f = crate::vocab::input::open_lines(path).map_err(|source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(std::io::BufReader::with_capacity(1 << 20, f)))
}

impl Writers {
    /// Creates the three files in `dir` with their headers.
    pub(super) fn create(dir: &Path) -> Result<Writers> {
        let open = |name: &str, cols: &[&str]| -> Result<Out> {
            let path = dir.join(name);
            let f = std::fs::File::create(&path).map_err(|source| StoreError::Write {
                path: path.clone(),
                source,
            })?;
            let mut w = csv::WriterBuilder::new()
                .has_headers(false)
                .from_writer(BufWriter::with_capacity(1 << 20, f));
            w.write_record(cols).map_err(werr(&path))?;
            Ok(w)
        };
        Ok(Writers {
            requests: open(REQUESTS_FILE, super::REQUEST_COLUMNS)?,
            chunks: open(CHUNKS_FILE, super::CHUNK_COLUMNS)?,
            sessions: open(SESSIONS_FILE, super::SESSION_COLUMNS)?,
            dir: dir.to_path_buf(),
        })
    }

    /// Streams one shard's three files into the merged ones and its rows into `rec`.
    pub(super) fn add_shard(
        &mut self,
        shard_dir: &Path,
        shift: Shift,
        rec: &mut Recorder,
    ) -> Result<Added> {
        let mut added = Added::default();
        let at = |v: u64| v + shift.offset_ns;
        let path = shard_dir.join(REQUESTS_FILE);
        let mut input = open_in(&path)?;
        let headers = input.byte_headers().map_err(rerr(&path))?.clone();
        let mut record = csv::ByteRecord::new();
        let out_path = self.dir.join(REQUESTS_FILE);
        while input.read_byte_record(&mut record).map_err(rerr(&path))? {
            let mut row: RequestRow = record.deserialize(Some(&headers)).map_err(rerr(&path))?;
            added.max_id = Some(added.max_id.map_or(row.id, |m| m.max(row.id)));
            added.max_connection = Some(
                added
                    .max_connection
                    .map_or(row.connection_id, |m| m.max(row.connection_id)),
            );
            added.requests += 1;
            row.id += shift.id_base;
            row.connection_id += shift.connection_base;
            shift_instants!(row, shift.offset_ns);
            row.shard = Some(shift.shard);
            self.requests.serialize(&row).map_err(werr(&out_path))?;
            let chunks = u64::from(row.chunk_count);
            rec.add_request_with(&row.into_record(Vec::new()), chunks);
        }
        self.add_chunks(shard_dir, shift)?;
        let path = shard_dir.join(SESSIONS_FILE);
        let out_path = self.dir.join(SESSIONS_FILE);
        let mut input = open_in(&path)?;
        // Read the header first: `into_deserialize` would swallow an error reading it (a
        // zero-filled file then read as no rows).
        input.byte_headers().map_err(rerr(&path))?;
        for row in input.into_deserialize::<SessionRow>() {
            let mut row = row.map_err(rerr(&path))?;
            row.start_ns = at(row.start_ns);
            row.end_ns = at(row.end_ns);
            row.shard = Some(shift.shard);
            self.sessions.serialize(&row).map_err(werr(&out_path))?;
            rec.add_session(&row.into_record());
        }
        Ok(added)
    }

    /// `chunks.csv`: `request_id` and `at_ns` rewritten in place, every other field copied.
    fn add_chunks(&mut self, shard_dir: &Path, shift: Shift) -> Result<()> {
        let path = shard_dir.join(CHUNKS_FILE);
        let mut input = open_in(&path)?;
        let headers = input.byte_headers().map_err(rerr(&path))?.clone();
        let col = |name: &str| {
            headers
                .iter()
                .position(|h| h == name.as_bytes())
                .ok_or_else(|| StoreError::Parse {
                    path: path.clone(),
                    message: format!("no `{name}` column; is this a spark-bench chunks.csv?"),
                })
        };
        let (id_col, at_col) = (col("request_id")?, col("at_ns")?);
        let same_layout = headers
            .iter()
            .eq(super::CHUNK_COLUMNS.iter().map(|c| c.as_bytes()));
        let out_path = self.dir.join(CHUNKS_FILE);
        let mut record = csv::ByteRecord::new();
        let mut fresh = csv::ByteRecord::new();
        let (mut id_buf, mut at_buf) = (itoa_buf(), itoa_buf());
        while input.read_byte_record(&mut record).map_err(rerr(&path))? {
            if !same_layout {
                // An older layout: go through the row type, which fills absent columns.
                let row: ChunkRow = record.deserialize(Some(&headers)).map_err(rerr(&path))?;
                let row = ChunkRow {
                    request_id: row.request_id + shift.id_base,
                    at_ns: row.at_ns + shift.offset_ns,
                    ..row
                };
                self.chunks.serialize(row).map_err(werr(&out_path))?;
                continue;
            }
            let num = |i: usize| -> Result<u64> {
                std::str::from_utf8(&record[i])
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| StoreError::Parse {
                        path: path.clone(),
                        message: format!(
                            "bad row at line {}: column {i} is not a number",
                            record.position().map_or(0, |p| p.line())
                        ),
                    })
            };
            let id = format_u64(&mut id_buf, num(id_col)? + shift.id_base);
            let at = format_u64(&mut at_buf, num(at_col)? + shift.offset_ns);
            fresh.clear();
            for (i, field) in record.iter().enumerate() {
                if i == id_col {
                    fresh.push_field(id);
                } else if i == at_col {
                    fresh.push_field(at);
                } else {
                    fresh.push_field(field);
                }
            }
            self.chunks
                .write_byte_record(&fresh)
                .map_err(werr(&out_path))?;
        }
        Ok(())
    }

    /// Flushes the three files.
    pub(super) fn finish(mut self) -> Result<()> {
        self.chunks.flush().map_err(|source| StoreError::Write {
            path: self.dir.join(CHUNKS_FILE),
            source,
        })?;
        flush_csvs(&self.dir, &mut self.requests, &mut self.sessions)
    }
}
