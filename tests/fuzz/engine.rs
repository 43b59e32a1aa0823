//! The fuzzing engine: a seeded, grammar-aware generator and mutator with a time or count
//! budget, a corpus on disk and crash capture.
//!
//! No coverage feedback (stable Rust here has no libFuzzer; see `fuzz/README.md`): instead
//! each target's generator writes near-valid inputs from its grammar, and the mutator splices
//! the target's dictionary tokens, corpus files and raw byte damage into them. A panic or a
//! broken invariant is saved to `fuzz/crashes/<target>/` with the seed that made it, and fails
//! the test.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use spark_bench::rng::Rng;

/// The budget of one target, from the environment.
/// `SPARK_FUZZ_SECS` (default 0.5, so plain `cargo test` stays quick) bounds wall time; `SPARK_FUZZ_EXECS` bounds executions;
/// `SPARK_FUZZ_SEED` picks the first seed (default: fixed, so CI is reproducible).
pub struct Budget {
    pub secs: f64,
    pub execs: u64,
    pub seed: u64,
}

impl Budget {
    pub fn from_env() -> Budget {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Budget {
            secs: get("SPARK_FUZZ_SECS")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.5),
            execs: get("SPARK_FUZZ_EXECS")
                .and_then(|v| v.parse().ok())
                .unwrap_or(u64::MAX),
            seed: get("SPARK_FUZZ_SEED")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0x5eed),
        }
    }
}

/// What a target gives the engine.
pub struct Target {
    /// Name: the corpus folder `fuzz/corpus/<name>/`.
    pub name: &'static str,
    /// Tokens the mutator splices in.
    pub dict: &'static [&'static [u8]],
    /// Writes one near-valid input.
    pub generate: fn(&mut Rng) -> Vec<u8>,
    /// Runs the input; `Err` is a broken invariant. A panic is caught by the engine.
    /// The rng is for split points and the like (seeded per input: reproducible).
    pub run: fn(&[u8], &mut Rng) -> Result<(), String>,
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = repo().join("fuzz/corpus").join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// Runs `t` within the budget; panics (failing the test) on the first crash, after saving it.
pub fn fuzz(t: &Target) -> u64 {
    let budget = Budget::from_env();
    let seeds = corpus(t.name);
    // The corpus alone first: every file must pass as it is.
    for (i, s) in seeds.iter().enumerate() {
        check(t, s, budget.seed ^ i as u64, "corpus");
    }
    let start = Instant::now();
    let limit = Duration::from_secs_f64(budget.secs);
    let mut rng = Rng::new(budget.seed);
    let mut execs = seeds.len() as u64;
    let mut bytes = 0u64;
    while execs < budget.execs && (execs % 64 != 0 || start.elapsed() < limit) {
        let case_seed = rng.next_u64();
        let mut r = Rng::new(case_seed);
        let mut input = if seeds.is_empty() || r.below(3) != 0 {
            (t.generate)(&mut r)
        } else {
            seeds[r.below(seeds.len() as u64) as usize].clone()
        };
        let rounds = r.below(4);
        for _ in 0..rounds {
            mutate(&mut input, t.dict, &seeds, &mut r);
        }
        bytes += input.len() as u64;
        check(t, &input, case_seed, "generated");
        execs += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "fuzz {}: {execs} executions in {secs:.1} s ({:.0}/s, {} MB of input, {} corpus files), 0 crashes",
        t.name,
        execs as f64 / secs.max(1e-9),
        bytes / 1_000_000,
        seeds.len()
    );
    let stats = repo().join("target/fuzz-stats");
    if std::fs::create_dir_all(&stats).is_ok() {
        let _ = std::fs::write(
            stats.join(format!("{}.txt", t.name)),
            format!("{} {execs} {secs:.1}\n", t.name),
        );
    }
    execs
}

fn check(t: &Target, input: &[u8], seed: u64, from: &str) {
    let mut r = Rng::new(seed.rotate_left(17));
    let res = catch_unwind(AssertUnwindSafe(|| (t.run)(input, &mut r)));
    let why = match res {
        Ok(Ok(())) => return,
        Ok(Err(why)) => format!("invariant broken: {why}"),
        Err(p) => format!(
            "panic: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        ),
    };
    let dir = repo().join("fuzz/crashes").join(t.name);
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join(format!("{seed:016x}"));
    let _ = std::fs::write(&file, input);
    panic!(
        "fuzz {}: {why} on a {from} input (seed {seed:#x}, {} bytes) saved to {}; \
         replay: SPARK_FUZZ_REPLAY={} cargo test --test fuzz {}",
        t.name,
        input.len(),
        file.display(),
        file.display(),
        t.name
    );
}

/// Replays one saved input (`SPARK_FUZZ_REPLAY=FILE`) against target `t`, when set.
pub fn replay(t: &Target) -> bool {
    let Ok(path) = std::env::var("SPARK_FUZZ_REPLAY") else {
        return false;
    };
    let input = std::fs::read(&path).expect("SPARK_FUZZ_REPLAY names a readable file");
    let mut r = Rng::new(0);
    (t.run)(&input, &mut r).unwrap_or_else(|e| panic!("{}: {e}", t.name));
    true
}

/// One to four grammar-blind edits: splice a dictionary token, flip, insert, delete,
/// duplicate or truncate a span, or cross over with a corpus file.
pub fn mutate(b: &mut Vec<u8>, dict: &[&[u8]], seeds: &[Vec<u8>], r: &mut Rng) {
    let at = |r: &mut Rng, len: usize| r.below(len as u64 + 1) as usize;
    match r.below(9) {
        0 | 1 if !dict.is_empty() => {
            let tok = dict[r.below(dict.len() as u64) as usize];
            let p = at(r, b.len());
            b.splice(p..p, tok.iter().copied());
        }
        2 if !b.is_empty() => {
            let p = r.below(b.len() as u64) as usize;
            b[p] ^= 1 << r.below(8);
        }
        3 if !b.is_empty() => {
            let p = r.below(b.len() as u64) as usize;
            b[p] =
                [0, 0xff, 0x80, b'\n', b'\r', b'"', b'\\', b'{', b'}', 0xc3][r.below(10) as usize];
        }
        4 if !b.is_empty() => {
            let p = r.below(b.len() as u64) as usize;
            let n = (r.below(16) as usize + 1).min(b.len() - p);
            b.drain(p..p + n);
        }
        5 if !b.is_empty() => {
            let p = r.below(b.len() as u64) as usize;
            let n = (r.below(64) as usize + 1).min(b.len() - p);
            let span = b[p..p + n].to_vec();
            let q = at(r, b.len());
            for _ in 0..=r.below(3) {
                b.splice(q..q, span.iter().copied());
            }
        }
        6 => {
            let p = at(r, b.len());
            b.truncate(p);
        }
        7 if !seeds.is_empty() => {
            let s = &seeds[r.below(seeds.len() as u64) as usize];
            let p = at(r, b.len());
            let q = at(r, s.len());
            b.truncate(p);
            b.extend_from_slice(&s[q..]);
        }
        _ => {
            let p = at(r, b.len());
            let n = r.below(8) as usize + 1;
            let junk: Vec<u8> = (0..n).map(|_| r.next_u64() as u8).collect();
            b.splice(p..p, junk);
        }
    }
    // Inputs stay small enough that size limits are not what is being tested.
    b.truncate(256 * 1024);
}

/// Picks one of `items`.
pub fn pick<'a, T: ?Sized>(r: &mut Rng, items: &[&'a T]) -> &'a T {
    items[r.below(items.len() as u64) as usize]
}

/// Splits `b` into 1..=n chunks at random points (sometimes byte by byte).
pub fn splits<'a>(b: &'a [u8], r: &mut Rng) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = b;
    let max = match r.below(4) {
        0 => 1,
        1 => 7,
        2 => 64,
        _ => b.len().max(1),
    };
    while !rest.is_empty() {
        let n = (r.below(max as u64) as usize + 1).min(rest.len());
        let (a, c) = rest.split_at(n);
        out.push(a);
        rest = c;
    }
    out
}
