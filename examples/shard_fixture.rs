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
//! The merge timing in README ("Sharded runs") was made with
//! `--shards 4 --requests 1000000 --tokens 8`.

use std::path::PathBuf;

use spark_bench::plan::shard::plan_hash;
use spark_bench::report::fixture::{synthetic_run_with, SyntheticOptions};

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
    let origin: u64 = 1_795_000_000_000_000_000;
    // The whole plan every shard is a part of: the first shard's plan. Each shard's records
    // are drawn with its own seed, but its manifest names this one plan (the fixture's plans
    // hold no sessions, so a shard's plan is the whole plan plus `shard`).
    let mut whole: Option<(serde_json::Value, String)> = None;
    for i in 0..shards {
        let root = out.join(format!("shard-{i}"));
        let o = SyntheticOptions {
            requests: total / u64::from(shards),
            seed: 100 + u64::from(i),
            tokens: (tokens, tokens),
            concurrency: 4,
            ..Default::default()
        };
        let dir = synthetic_run_with(&root, &o)?;
        let path = dir.join("manifest.json");
        let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
        let (plan_json, hash) = whole.get_or_insert_with(|| {
            let v = m["plan"].clone();
            let h = serde_json::from_value::<spark_bench::plan::Plan>(v.clone())
                .map(|p| plan_hash(&p))
                .unwrap_or_default();
            (v, h)
        });
        anyhow::ensure!(!hash.is_empty(), "the fixture's plan does not read back");
        let mut plan = plan_json.clone();
        plan["shard"] = serde_json::json!({
            "index": i,
            "count": shards,
            "plan_hash": hash,
            "plan_load": plan["load"].clone(),
            "plan_sessions": plan["load"]["sessions"].clone(),
        });
        m["plan"] = plan;
        m["clock"] = serde_json::json!({
            "origin_unix_ns": origin + u64::from(i) * 1_000_000,
            "uncertainty_ns": 500,
            "how": "synthetic fixture",
        });
        std::fs::write(&path, serde_json::to_vec_pretty(&m)?)?;
        println!("{}", dir.display());
    }
    Ok(())
}
