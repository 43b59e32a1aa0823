//! The architecture, checked: reads every `src/**/*.rs` (comments and string literals
//! stripped), finds the top-level module each `crate::…` path names, and fails when
//!
//! * a module imports one in a higher layer of [`LAYERS`] (the data flow, bottom first),
//! * the simulator imports client code, or client code imports the simulator,
//! * two top-level modules import each other, directly or round a circle,
//! * a file outside `src/clock/` reads the clock (`Instant::now`, `SystemTime::now`,
//!   `clock_gettime`, `.elapsed()`, or `sys::time`'s raw reads) and is not in
//!   [`CLOCK_READERS_TO_MOVE`], or a listed file no longer does (so that list only shrinks);
//!   `src/sys/` may hold the raw call, for `clock` alone to make,
//! * a file outside `src/sys/` names `libc::` (every C call is `sys`'s),
//! * a test or bench reaches into `spark_bench::commands` and is not in
//!   [`TESTS_USING_COMMANDS`] (or a listed one no longer does).
//!
//! `scripts/module_graph.py` prints the same graph for people (keep the tables alike).
//! Known exceptions live in the lists below, each with its reason; the aim is to empty them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The intended data flow, bottom first: a module may import its own layer and lower ones.
/// Modules that do not exist (yet) are ignored. `sys` (the C library's calls) sits below
/// everything and imports nothing of ours. `clock` shares its layer with `priority` (the
/// thread scheduling its timer relies on) and `provenance` (a run's counts of how its stamps
/// were taken); `cli` (the clap argument types) sits with the `commands` that read them.
const LAYERS: &[&[&str]] = &[
    &["sys"],
    &["vocab"],
    &["clock", "priority", "provenance"],
    &["scenario", "units", "rng", "tls", "link"],
    &["plan"],
    &["transport"],
    &["backend"],
    &["driver"],
    &["recorder"],
    &["store"],
    &["report", "progress"],
    &["compare"],
    &["runner", "capture"],
    &["commands", "cli"],
    &["lib", "main"],
];

/// The simulator stands beside the client and imports only these.
const SIM_MAY_USE: &[&str] = &[
    "sys", "vocab", "clock", "tls", "units", "rng", "link", "priority",
];

/// Who may start the simulator.
/// `capture` (the recording proxy) starts none, but counts tokens by the simulator's rule
/// and draws `--synthesize-text` from its corpus, so a recording replays to the same counts.
const SIM_USERS: &[&str] = &["runner", "capture", "commands", "lib", "main"];

/// Upward imports allowed for now, as (file under `src/`, module it imports, why). Empty:
/// keep it so, or give the reason an exception must stand.
const ALLOWED_UPWARD: &[(&str, &str, &str)] = &[];

/// Files outside `src/clock/` (and `src/sys/`, which holds the raw calls `clock` makes)
/// allowed to read the clock. Empty since issue 13 moved every timestamp source into
/// `clock/`: keep it so.
const CLOCK_READERS_TO_MOVE: &[&str] = &[];

/// Tests and benches that call into `spark_bench::commands` (the CLI's top layer) instead of
/// the library below it. The run itself is `runner`'s; what is left here is turning parsed
/// arguments into a plan (`commands::run::load_plan`), and tests of a subcommand's own
/// `execute` (run_faults, report, sweep: `run --sweep` end to end).
const TESTS_USING_COMMANDS: &[&str] = &[
    "tests/integration/llama.rs",
    "tests/integration/report.rs",
    "tests/integration/run_faults.rs",
    "tests/integration/run_net.rs",
    "tests/integration/sweep.rs",
    "tests/support/run.rs",
    "tests/timing/compare_sim.rs",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, as (path relative to `dir` with `/`, stripped text).
fn sources(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, strip(&std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The text with comments, string literals and char literals blanked out.
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(b' ');
        } else if (b[i] == b'r' || b[i..].starts_with(b"br")) && (i == 0 || !ident(b[i - 1])) && {
            let j = i + if b[i] == b'b' { 2 } else { 1 };
            let k = j + b[j..].iter().take_while(|&&c| c == b'#').count();
            k < b.len() && b[k] == b'"'
        } {
            let j = i + if b[i] == b'b' { 2 } else { 1 };
            let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
            let mut end = vec![b'"'];
            end.extend(std::iter::repeat_n(b'#', hashes));
            i = j + hashes + 1;
            while i < b.len() && !b[i..].starts_with(&end) {
                i += 1;
            }
            i += end.len();
            out.extend_from_slice(b"\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.extend_from_slice(b"\"\"");
        } else if b[i] == b'\'' {
            // A char literal ('a', '\n', '\u{1F600}'), or a lifetime ('a) kept as is.
            let close = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 2 + p)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 1 + ch)
            };
            match close {
                Some(c) => {
                    out.extend_from_slice(b"' '");
                    i = c + 1;
                }
                None => {
                    out.push(b'\'');
                    i += 1;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The top-level module of a file under `src/`: `sim/http.rs` → `sim`, `lib.rs` → `lib`.
fn top_module(rel: &str) -> String {
    rel.split('/')
        .next()
        .unwrap()
        .trim_end_matches(".rs")
        .to_string()
}

/// The top-level modules a file's code names: every `crate::x…` path, and every item of a
/// `crate::{x, y::z}` group.
fn imports(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let word = |from: usize| -> String {
        let s = &text[from..];
        let s = s.trim_start();
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    let mut from = 0;
    while let Some(p) = text[from..].find("crate::") {
        let at = from + p;
        from = at + 7;
        if at > 0 && (ident(b[at - 1]) || b[at - 1] == b'$' || b[at - 1] == b':') {
            continue;
        }
        if b.get(from) == Some(&b'{') {
            // A group: the first word of each item at depth 1.
            let mut depth = 0;
            let mut item_start = from + 1;
            for (k, &c) in b.iter().enumerate().skip(from) {
                match c {
                    b'{' => depth += 1,
                    b'}' | b',' if depth == 1 => {
                        let w = word(item_start);
                        if !w.is_empty() && w != "self" {
                            out.insert(w);
                        }
                        item_start = k + 1;
                        if c == b'}' {
                            break;
                        }
                    }
                    b'}' => depth -= 1,
                    _ => {}
                }
            }
        } else {
            let w = word(from);
            if !w.is_empty() {
                out.insert(w);
            }
        }
    }
    out
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// Top-level module → (imported module → files that import it).
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn graph(src: &BTreeMap<String, String>) -> Graph {
    let modules: BTreeSet<String> = src.keys().map(|r| top_module(r)).collect();
    let mut g = Graph::new();
    for (rel, text) in src {
        let a = top_module(rel);
        g.entry(a.clone()).or_default();
        for b in imports(text) {
            // Items of the crate root (macros, lib.rs items) are not modules.
            if b != a && modules.contains(&b) {
                g.get_mut(&a)
                    .unwrap()
                    .entry(b)
                    .or_default()
                    .insert(rel.clone());
            }
        }
    }
    g
}

/// Strongly connected components of more than one module.
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    // Two modules are in one circle when each reaches the other.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for next in g.get(&m).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = g.keys().map(|m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for m in g.keys() {
        if done.contains(m) {
            continue;
        }
        let comp: Vec<String> = g
            .keys()
            .filter(|o| *o == m || (reaches[m].contains(*o) && reaches[*o].contains(m)))
            .cloned()
            .collect();
        done.extend(comp.iter().cloned());
        if comp.len() > 1 {
            out.push(comp);
        }
    }
    out
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let src = sources(&root().join("src"));
    let g = graph(&src);
    let mut bad = Vec::new();
    let mut allowed_used = BTreeSet::new();
    for (a, edges) in &g {
        for (b, files) in edges {
            let why = if a == "sim" {
                (!SIM_MAY_USE.contains(&b.as_str()))
                    .then(|| "the simulator imports client code".to_string())
            } else if b == "sim" {
                (!SIM_USERS.contains(&a.as_str()))
                    .then(|| "client code imports the simulator".to_string())
            } else {
                match (layer_of(a), layer_of(b)) {
                    (Some(la), Some(lb)) => {
                        (lb > la).then(|| format!("layer {la} imports layer {lb}"))
                    }
                    (None, _) => Some(format!(
                        "`{a}` is in no layer: add it to LAYERS (and to scripts/module_graph.py)"
                    )),
                    (_, None) => Some(format!(
                        "`{b}` is in no layer: add it to LAYERS (and to scripts/module_graph.py)"
                    )),
                }
            };
            let Some(why) = why else { continue };
            for f in files {
                match ALLOWED_UPWARD
                    .iter()
                    .find(|(file, to, _)| file == f && to == b)
                {
                    Some(entry) => {
                        allowed_used.insert(entry.0);
                    }
                    None => bad.push(format!("src/{f}: {a} -> {b} ({why})")),
                }
            }
        }
    }
    for (file, to, _) in ALLOWED_UPWARD {
        if !allowed_used.contains(file) {
            bad.push(format!(
                "src/{file} no longer imports {to} upward: remove it from ALLOWED_UPWARD"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "imports against the layering (bottom first: {}):\n  {}",
        LAYERS
            .iter()
            .map(|l| l.join("/"))
            .collect::<Vec<_>>()
            .join(" < "),
        bad.join("\n  ")
    );
}

#[test]
fn no_import_cycles_between_top_level_modules() {
    let src = sources(&root().join("src"));
    let g = graph(&src);
    let found = cycles(&g);
    let shown: Vec<String> = found
        .iter()
        .map(|c| {
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    g[a].iter()
                        .filter(|(b, _)| c.contains(b))
                        .map(move |(b, files)| {
                            format!(
                                "{a} -> {b} ({})",
                                files.iter().cloned().collect::<Vec<_>>().join(", ")
                            )
                        })
                })
                .collect();
            format!("{}: {}", c.join(" <-> "), edges.join("; "))
        })
        .collect();
    assert!(shown.is_empty(), "import cycles:\n  {}", shown.join("\n  "));
}

#[test]
fn only_clock_reads_the_clock() {
    let src = sources(&root().join("src"));
    let reads = |text: &str| {
        [
            "Instant::now",
            "SystemTime::now",
            "clock_gettime",
            ".elapsed()",
            // The raw reads `sys` offers `clock` (CPU time, the NTP estimate).
            "sys::time",
        ]
        .iter()
        .any(|w| {
            text.match_indices(w).any(|(i, _)| {
                let after = text.as_bytes().get(i + w.len()).copied();
                !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
            })
        })
    };
    let readers: BTreeSet<&str> = src
        .iter()
        .filter(|(rel, text)| !rel.starts_with("clock/") && !rel.starts_with("sys/") && reads(text))
        .map(|(rel, _)| rel.as_str())
        .collect();
    let listed: BTreeSet<&str> = CLOCK_READERS_TO_MOVE.iter().copied().collect();
    let new: Vec<_> = readers.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&readers).collect();
    eprintln!(
        "CLOCK_READERS_TO_MOVE ({} files still read the clock outside src/clock/ and src/sys/): {}",
        listed.len(),
        CLOCK_READERS_TO_MOVE.join(", ")
    );
    assert!(
        new.is_empty(),
        "these files read the clock outside src/clock/ (take timestamps from `clock` instead): {new:?}"
    );
    assert!(
        gone.is_empty(),
        "these files no longer read the clock: remove them from CLOCK_READERS_TO_MOVE: {gone:?}"
    );
}

/// Every call into the C library is `sys`'s: a file elsewhere that names `libc::` should
/// call a wrapper in `src/sys/` (add one there, with its SAFETY note).
#[test]
fn only_sys_calls_libc() {
    let src = sources(&root().join("src"));
    let callers: Vec<&str> = src
        .iter()
        .filter(|(rel, text)| {
            !rel.starts_with("sys/")
                && text.match_indices("libc::").any(|(i, _)| {
                    let before = i.checked_sub(1).map(|j| text.as_bytes()[j]);
                    !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                })
        })
        .map(|(rel, _)| rel.as_str())
        .collect();
    assert!(
        callers.is_empty(),
        "these files call libc outside src/sys/ (call a wrapper in `crate::sys` instead): {callers:?}"
    );
}

#[test]
fn tests_reach_commands_only_where_listed() {
    let mut users = BTreeSet::new();
    for dir in ["tests", "benches", "examples"] {
        for (rel, text) in sources(&root().join(dir)) {
            if text.contains("spark_bench::commands") {
                users.insert(format!("{dir}/{rel}"));
            }
        }
    }
    let listed: BTreeSet<String> = TESTS_USING_COMMANDS.iter().map(|s| s.to_string()).collect();
    let new: Vec<_> = users.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&users).collect();
    assert!(
        new.is_empty(),
        "these tests call spark_bench::commands; use the library below it: {new:?}"
    );
    assert!(
        gone.is_empty(),
        "these no longer call spark_bench::commands: remove them from TESTS_USING_COMMANDS: {gone:?}"
    );
}

#[test]
fn the_reader_sees_what_it_should() {
    let text = strip(
        "use crate::{plan::Plan, vocab::{A, B}};\n// crate::report\nlet s = \"crate::store\";\n\
         let c = '\"'; fn f<'a>(x: &'a str) { crate::rng::Rng::new(); $crate::units::x }\n\
         let r = r#\"crate::sim\"#;",
    );
    let got: Vec<String> = imports(&text).into_iter().collect();
    assert_eq!(got, ["plan", "rng", "vocab"]);
    let mut g = Graph::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        g.entry(a.into()).or_default().entry(b.into()).or_default();
        g.entry(b.into()).or_default();
    }
    assert_eq!(cycles(&g), [vec!["a", "b", "c"]]);
}

/// `lib.rs`'s layout doc names every top-level module, and every module it names exists and
/// sits in [`LAYERS`] (or is the simulator): the map a newcomer reads first stays the tree.
#[test]
fn the_layout_doc_names_every_module() {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    let doc: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let named: BTreeSet<&str> = doc
        .split("[`")
        .skip(1)
        .filter_map(|s| s.split("`]").next())
        .filter(|m| !m.contains("::"))
        .collect();
    let missing: Vec<_> = declared.difference(&named).collect();
    let stale: Vec<_> = named.difference(&declared).collect();
    assert!(
        missing.is_empty(),
        "lib.rs declares but its layout doc omits: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "lib.rs's layout doc names no such module: {stale:?}"
    );
    let unplaced: Vec<_> = declared
        .iter()
        .filter(|m| **m != "sim" && layer_of(m).is_none())
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules in no layer of LAYERS: {unplaced:?}"
    );
}
