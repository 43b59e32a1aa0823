//! Writes N synthetic shard directories of one plan (records built in code and written
//! through the real store, as `examples/synthetic_report.rs` does), for timing
//! `spark-bench merge` on large inputs without running a million requests.
//!
//! ```text
//! cargo run --release --example shard_fixture -- [--out DIR] [--shards N]
//!     [--requests TOTAL] [--tokens N]
//! ```
//! Each shard gets TOTAL/N requests (8 cells × sessions of 6 requests, `--tokens` output
//! tokens and content chunks each), its own seed, a `plan.shard` naming the same plan hash,
//! and a clock anchor 1 ms after the previous shard's. Prints the shard directories.
//! `scripts/merge-1m.sh` times `spark-bench merge` on its output (docs/measurements.md,
//! "Sharded runs").

use std::path::PathBuf;

use spark_bench::report::fixture::synthetic_shards;

fn main() -> anyhow::Result<()> {
    let mut out = PathBuf::from("target/shard-fixture");
    let (mut shards, mut total, mut tokens) = (4u32, 1_000_000u64, 8u32);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args
            .next()
            .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))?;
        match a.as_str() {
            "--out" => out = PathBuf::from(v),
            "--shards" => shards = v.parse()?,
            "--requests" => total = v.parse()?,
            "--tokens" => tokens = v.parse()?,
            other => anyhow::bail!("unknown option {other}; see the file's doc comment"),
        }
    }
    if out.exists() {
        std::fs::remove_dir_all(&out)?;
    }
    for dir in synthetic_shards(&out, shards, total, tokens)? {
        println!("{}", dir.display());
    }
    Ok(())
}
