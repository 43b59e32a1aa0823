//! A fixed-seed simulator run, reduced to what must not change when the code is restructured:
//! the files of the results directory, the columns and rows of every CSV with each value that
//! is not a measured time (ids, kinds, token counts, chunk counts, connection reuse, outcomes,
//! bytes), and the key structure of every JSON file. The reduction is compared with
//! `tests/integration/snapshots/seeded_run.digest`, written before issue 21's refactor; after an
//! intended change to the results contract, regenerate it with
//! `UPDATE_SNAPSHOTS=1 cargo test --test integration equivalence` and review the diff.
//!
//! What is blanked, and why: every column ending in `_ns` or `_ms` (a clock reading or a
//! duration), `bytes_received` and the random part of `response_id` (see [`measured`]); the
//! run-wide sequence numbers are renumbered in a canonical order (see [`Canon`]). Everything
//! else in a CSV is compared as written. In JSON files only the key paths are compared (their numbers
//! are measured; `manifest.json` holds the run id, host and start time).

use std::collections::BTreeSet;
use std::path::Path;

use spark_bench::runner::{self, Options};

/// Sequential cells, one session in flight: dispatch order, connection ids and reuse are then
/// fixed by the scenario and the seed, not by scheduling.
const SCENARIO: &str = r#"
name = "equivalence"
seed = 7
system_prompt = "You are a coding assistant."
max_output_tokens = 12
link = "rtt=2ms"

[load]
sessions = 2
concurrency = 1
warmup_sessions = 1
schedule = "sequential"

[matrix]
targets = ["sim-wafer"]
transports = ["http", "http-pooled", "http2", "ws"]

[[turns]]
prompt = "Write a function that adds two numbers."

[[turns]]
think_time = "5ms"
prompt = "Add tests."
max_output_tokens = 8
tool_calls = [{ name = "run_tests", tool_time = "3ms", output_bytes = 200 }]
"#;

/// A cell as compared: times blanked to `T`; `bytes_received` to `B` (the simulator writes
/// its measured timing into each response, whose printed length varies by a few bytes);
/// the random per-server part of a response id to `*` (the counter after it stays).
fn measured(column: &str, value: &str) -> String {
    if value.is_empty() {
        return String::new();
    }
    if column.ends_with("_ns") || column.ends_with("_ms") {
        return "T".into();
    }
    match column {
        "bytes_received" => "B".into(),
        "response_id" => match value.split_once('_') {
            Some((kind, rest)) if rest.len() > 16 => format!("{kind}_*{}", &rest[16..]),
            _ => value.into(),
        },
        _ => value.into(),
    }
}

/// A CSV's header and rows, as written.
fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let header = reader.headers().unwrap().iter().map(String::from).collect();
    let rows = reader
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    (header, rows)
}

fn col(header: &[String], name: &str) -> usize {
    header.iter().position(|c| c == name).unwrap()
}

/// Cells run side by side, so the run-wide sequence numbers (`id`, `connection_id`) and the
/// order rows were appended in follow the scheduler. They are renumbered here in a canonical
/// order (cell, warm-up first, session, request index), the same renumbering applied to
/// `chunks.csv`'s `request_id`; everything else is compared as written.
struct Canon {
    ids: std::collections::HashMap<String, usize>,
}

impl Canon {
    fn requests(header: &[String], rows: &mut [Vec<String>]) -> Canon {
        let key = |r: &Vec<String>| {
            let n = |c: &str| r[col(header, c)].parse::<u64>().unwrap_or(0);
            (
                r[col(header, "target")].clone(),
                r[col(header, "transport")].clone(),
                r[col(header, "warmup")] != "true",
                n("session"),
                n("request"),
            )
        };
        rows.sort_by_key(key);
        let (id, conn) = (col(header, "id"), col(header, "connection_id"));
        let mut ids = std::collections::HashMap::new();
        let mut conns = std::collections::HashMap::new();
        for (i, r) in rows.iter_mut().enumerate() {
            ids.insert(r[id].clone(), i);
            r[id] = i.to_string();
            let next = conns.len();
            r[conn] = conns.entry(r[conn].clone()).or_insert(next).to_string();
        }
        Canon { ids }
    }

    fn chunks(&self, header: &[String], rows: &mut [Vec<String>]) {
        let (req, index) = (col(header, "request_id"), col(header, "index"));
        for r in rows.iter_mut() {
            r[req] = self.ids[&r[req]].to_string();
        }
        rows.sort_by_key(|r| {
            (
                r[req].parse::<u64>().unwrap(),
                r[index].parse::<u64>().unwrap(),
            )
        });
    }
}

/// One CSV: its header, then each row with the time columns blanked.
fn csv_digest(header: &[String], rows: &[Vec<String>], out: &mut String) {
    out.push_str(&format!("  columns {}\n", header.join(",")));
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(header)
            .map(|(v, c)| measured(c, v))
            .collect();
        out.push_str(&format!("  row {}\n", cells.join(",")));
    }
}

/// Every key path of a JSON value, array elements folded into `[]`.
fn json_keys(v: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{prefix}.{k}");
                out.insert(p.clone());
                json_keys(x, &p, out);
            }
        }
        // stalls.json's windows are the machine's (a harness stall under load), not the
        // code's: their elements' keys appear only when a stall happened.
        serde_json::Value::Array(_) if prefix == ".windows" => {}
        serde_json::Value::Array(a) => {
            for x in a {
                json_keys(x, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// The reduction of a results directory (see the module doc).
pub fn digest(dir: &Path) -> String {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                files.push(e.path());
            }
        }
    }
    files.sort();
    let rel = |f: &Path| {
        f.strip_prefix(dir)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/")
    };
    let mut csvs: std::collections::BTreeMap<String, (Vec<String>, Vec<Vec<String>>)> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "csv"))
        .map(|f| (rel(f), read_csv(f)))
        .collect();
    if let Some((h, rows)) = csvs.get_mut("requests.csv") {
        let canon = Canon::requests(h, rows);
        if let Some((h, rows)) = csvs.get_mut("chunks.csv") {
            canon.chunks(h, rows);
        }
    }
    if let Some((h, rows)) = csvs.get_mut("sessions.csv") {
        let key = |r: &Vec<String>| {
            (
                r[col(h, "target")].clone(),
                r[col(h, "transport")].clone(),
                r[col(h, "warmup")] != "true",
                r[col(h, "session")].parse::<u64>().unwrap_or(0),
            )
        };
        rows.sort_by_key(key);
    }
    let mut out = String::new();
    for f in &files {
        out.push_str(&format!("file {}\n", rel(f)));
        match f.extension().and_then(|x| x.to_str()) {
            Some("csv") => {
                let (h, rows) = &csvs[&rel(f)];
                csv_digest(h, rows, &mut out);
            }
            Some("json") => {
                let v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
                let mut keys = BTreeSet::new();
                json_keys(&v, "", &mut keys);
                for k in keys {
                    out.push_str(&format!("  key {k}\n"));
                }
            }
            _ => {}
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_run_outputs_match_the_snapshot() {
    let tmp = testkit::tempdir().unwrap();
    let plan = crate::support::run::plan_of("equivalence.toml", SCENARIO);
    let outcome = runner::run(std::sync::Arc::new(plan), tmp.path(), Options::quiet())
        .await
        .unwrap();
    let got = digest(&outcome.dir);
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/snapshots/seeded_run.digest");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}; create it with UPDATE_SNAPSHOTS=1 cargo test --test integration equivalence",
            path.display()
        )
    });
    if got != want {
        let fresh = Path::new(env!("CARGO_TARGET_TMPDIR")).join("seeded_run.digest");
        std::fs::write(&fresh, &got).unwrap();
        let first = got
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(got.lines().count().min(want.lines().count()));
        panic!(
            "the seeded run's outputs differ from the snapshot at line {} (got {:?}, want {:?}); \
             see `diff {} {}`; if the change is intended run \
             UPDATE_SNAPSHOTS=1 cargo test --test integration equivalence",
            first + 1,
            got.lines().nth(first),
            want.lines().nth(first),
            path.display(),
            fresh.display()
        );
    }
}
