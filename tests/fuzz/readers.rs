//! Fuzz targets for the results readers: `requests.csv` rows through the bounded line
//! reader (`vocab::input::Lines`) and the row type, `history.jsonl` through
//! `compare::history_file::read`, and `manifest.json` through `store::LoadedRun::open`.
//! Invariants: no panic; a reader's error names the file (and, for a row, its line).

use std::io::Read as _;

use spark_bench::rng::Rng;
use spark_bench::store::{LoadedRun, RequestRow, REQUEST_COLUMNS};
use spark_bench::vocab::input::{InputError, Lines};

use super::engine::{pick, Target};

const CELLS: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "18446744073709551616",
    "ok",
    "http",
    "sim-gpu",
    "true",
    "nan",
    "\"a,b\"",
    "\"\"\"\"",
    "\u{0}",
    "é",
    "1e3",
    "\"x\ny\"",
];

fn csv_row(r: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| pick(r, CELLS).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn gen_csv(r: &mut Rng) -> Vec<u8> {
    let mut s = REQUEST_COLUMNS.join(",");
    for _ in 0..r.below(4) {
        s.push('\n');
        s.push_str(&csv_row(r, REQUEST_COLUMNS.len()));
    }
    if r.below(2) == 0 {
        s.push('\n');
    }
    s.into_bytes()
}

fn run_csv(b: &[u8], _: &mut Rng) -> Result<(), String> {
    let lines = 1 + memchr::memchr_iter(b'\n', b).count() as u64;
    let mut rd = csv::Reader::from_reader(Lines::with_max_line(b, 256));
    for row in rd.deserialize::<RequestRow>() {
        let Err(e) = row else { continue };
        if let csv::ErrorKind::Io(io) = e.kind() {
            let ie = InputError::of(io).ok_or_else(|| format!("a bare I/O error: {io}"))?;
            if ie.line == 0 || ie.line > lines {
                return Err(format!("line {} of a {lines}-line input: {ie}", ie.line));
            }
        }
        // The reader stops at the first error, as the store's readers do.
        break;
    }
    // The line reader passes every byte of a text within its bounds, unchanged.
    let mut out = Vec::new();
    if Lines::new(b).read_to_end(&mut out).is_ok() && out != b {
        return Err("the line reader changed the bytes".into());
    }
    Ok(())
}

/// `requests.csv` rows through the bounded reader and the row type.
pub const CSV_ROWS: Target = Target {
    name: "csv_rows",
    dict: &[b",", b"\n", b"\"", b"\r\n", b"\0", b"ok", b"123"],
    generate: gen_csv,
    run: run_csv,
};

fn gen_jsonl(r: &mut Rng) -> Vec<u8> {
    let mut s = String::new();
    for i in 0..r.below(3) {
        s.push_str(&format!(
            "{{\"schema_version\":1,\"at\":\"2026-01-0{i}T00:00:00Z\",\"label\":{},\"baseline\":\"b\",\"candidate\":\"c\",\"verdict\":\"{}\",\"failed\":{},\"rows\":[]}}\n",
            pick(r, &["null", "\"<script>\"", "\"v1\""]),
            pick(r, &["regressed", "no-change", "improved", "x"]),
            pick(r, &["true", "false"]),
        ));
    }
    s.into_bytes()
}

fn run_jsonl(b: &[u8], _: &mut Rng) -> Result<(), String> {
    let dir = testkit::tempdir().map_err(|e| e.to_string())?;
    let path = dir
        .path()
        .join(spark_bench::compare::history_file::HISTORY_FILE);
    std::fs::write(&path, b).map_err(|e| e.to_string())?;
    match spark_bench::compare::history_file::read(dir.path()) {
        Ok(_) => Ok(()),
        Err(e) if format!("{e:#}").contains("history.jsonl") => Ok(()),
        Err(e) => Err(format!("the error does not name the file: {e:#}")),
    }
}

/// `history.jsonl` through `compare --history`'s reader.
pub const JSONL: Target = Target {
    name: "jsonl",
    dict: &[b"{", b"}", b"\n", b"\"", b"null", b"\0", b"[]"],
    generate: gen_jsonl,
    run: run_jsonl,
};

fn gen_manifest(r: &mut Rng) -> Vec<u8> {
    format!(
        "{{\"schema_version\": {}, \"run_id\": {}, \"status\": {}, \"plan\": {}}}",
        pick(r, &["1", "0", "2", "\"1\"", "null", "4294967297"]),
        pick(r, &["\"r\"", "1", "null"]),
        pick(r, &["\"complete\"", "\"running\"", "\"x\""]),
        pick(r, &["{}", "null", "[]", "{\"slo\": 1}"]),
    )
    .into_bytes()
}

fn run_manifest(b: &[u8], _: &mut Rng) -> Result<(), String> {
    let dir = testkit::tempdir().map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("manifest.json"), b).map_err(|e| e.to_string())?;
    match LoadedRun::open(dir.path()) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().contains(&dir.path().display().to_string()) => Ok(()),
        Err(e) => Err(format!("the error does not name the file: {e}")),
    }
}

/// `manifest.json` (and, past it, the rows of a run without `summary.json`) through
/// `LoadedRun::open`.
pub const MANIFEST: Target = Target {
    name: "manifest",
    dict: &[b"{", b"}", b"\"schema_version\"", b"1", b"\0", b"null"],
    generate: gen_manifest,
    run: run_manifest,
};
