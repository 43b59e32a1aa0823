//! Histogram files: the HdrHistogram interval-log format (V1.3 text, V2 deflate-compressed
//! histograms), as written by Java's `HistogramLogWriter`, so `HistogramLogProcessor` and
//! the other standard tools read them and runs can be merged losslessly.
//!
//! Owns: one `.hlog` per cell × metric, holding a single interval that covers the run,
//! tagged with the metric name. Reading sums every interval in the file.

use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use super::{check_name, write_atomic, Result, StoreError, HISTOGRAMS_DIR};
use crate::recorder::{new_histogram, CellKey, Metric, Recorder};

/// Writes every histogram of `recorder` under `run_dir/histograms/<target>/<transport>/`
/// as `<metric>.hlog`, each one interval from `start` lasting `length`. Target and
/// transport names are checked as directory names first.
pub(super) fn write_histograms(
    run_dir: &Path,
    recorder: &Recorder,
    start: SystemTime,
    length: Duration,
) -> Result<()> {
    for (cell, metric, h) in recorder.histograms() {
        check_name("target", &cell.target)?;
        check_name("transport", &cell.transport)?;
        let dir = run_dir
            .join(HISTOGRAMS_DIR)
            .join(&cell.target)
            .join(&cell.transport);
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::CreateDir {
            path: dir.clone(),
            source,
        })?;
        write_hlog(
            &dir.join(format!("{}.hlog", metric.name())),
            cell,
            metric,
            h,
            start,
            length,
        )?;
    }
    Ok(())
}

/// Writes `h` as an interval log at `path`: one interval from `start` lasting `length`.
/// Values are in the metric's stored unit; the "max" column is in its natural unit (e.g.
/// ms for ns histograms), as Java's tools do with a max-value divisor.
pub fn write_hlog(
    path: &Path,
    cell: &CellKey,
    metric: Metric,
    h: &Histogram<u64>,
    start: SystemTime,
    length: Duration,
) -> Result<()> {
    let werr = |message: String| StoreError::Parse {
        path: path.to_path_buf(),
        message,
    };
    let mut buf: Vec<u8> = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    {
        let mut builder = IntervalLogWriterBuilder::new();
        builder
            .add_comment("[Histogram log format version 1.3]")
            .add_comment(&format!(
                "[spark-bench {}: metric={} target={} transport={} values={} max-column={}]",
                env!("CARGO_PKG_VERSION"),
                metric.name(),
                cell.target,
                cell.transport,
                metric.stored_unit(),
                metric.natural_unit(),
            ))
            .with_start_time(start)
            .with_base_time(start);
        // The header writer only takes comments and times; the column legend Java writes
        // goes between the headers and the first interval.
        drop(
            builder
                .begin_log_with(&mut buf, &mut serializer)
                .map_err(|e| werr(e.to_string()))?,
        );
    }
    buf.extend_from_slice(
        b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
    );
    {
        let mut builder = IntervalLogWriterBuilder::new();
        builder.with_max_value_divisor(metric.natural_divisor());
        // A divisor other than 1 adds a `#[MaxValueDivisor]` comment line; harmless to readers.
        let mut w = builder
            .begin_log_with(&mut buf, &mut serializer)
            .map_err(|e| werr(e.to_string()))?;
        w.write_histogram(h, Duration::ZERO, length, Tag::new(metric.name()))
            .map_err(|e| werr(format!("cannot encode histogram: {e}")))?;
    }
    write_atomic(path, &buf)
}

/// Reads an interval log and returns the sum of all its intervals as an auto-resizing
/// histogram (so callers can merge more into it).
pub fn read_hlog(path: &Path) -> Result<Histogram<u64>> {
    use crate::vocab::input::{read_bounded, MAX_WHOLE_FILE_BYTES};
    let bytes = read_bounded(path, MAX_WHOLE_FILE_BYTES).map_err(|source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let perr = |message: String| StoreError::Parse {
        path: path.to_path_buf(),
        message,
    };
    let mut total = new_histogram();
    let mut deserializer = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let entry = entry.map_err(|e| perr(format!("not an HdrHistogram interval log: {e:?}")))?;
        let LogEntry::Interval(interval) = entry else {
            continue;
        };
        let raw = base64_decode(interval.encoded_histogram())
            .map_err(|e| perr(format!("bad base64 in interval: {e}")))?;
        let h: Histogram<u64> = deserializer
            .deserialize(&mut std::io::Cursor::new(raw))
            .map_err(|e| perr(format!("cannot decode histogram: {e}")))?;
        total
            .add(&h)
            .map_err(|e| perr(format!("cannot merge interval: {e:?}")))?;
    }
    Ok(total)
}

fn base64_decode(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s.trim())
}
