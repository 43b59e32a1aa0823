//! `run --shard I/N` and `merge`: four shards of one plan run as four processes against the
//! embedded simulator, merged, and checked against the union of the shards' raw samples
//! (from their CSVs) and against a single run of the same plan; merge refuses duplicate,
//! missing and foreign shards; `compare` and `report` take the merged directory.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use spark_bench::plan::shard::plan_hash;
use spark_bench::recorder::{new_histogram, CellKey, Metric, MetricSummary};
use spark_bench::store::LoadedRun;

use crate::binary::{csv_maps, only_run, run_bin, texts};

const PLAN: &[&str] = &[
    "scenarios/smoke.toml",
    "--sessions",
    "8",
    "--concurrency",
    "4",
];

async fn run(out: &Path, extra: &[&str]) -> PathBuf {
    let out_s = out.to_string_lossy().into_owned();
    let mut args = vec!["run"];
    args.extend_from_slice(PLAN);
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", &out_s, "--quiet", "--no-report"]);
    let o = run_bin(&args, &[]).await;
    assert!(o.status.success(), "{args:?}: {:?}", texts(&o));
    only_run(out)
}

async fn merge(dirs: &[&Path], out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<String> = vec!["merge".into()];
    args.extend(dirs.iter().map(|d| d.to_string_lossy().into_owned()));
    args.extend([
        "--out".into(),
        out.to_string_lossy().into_owned(),
        "--no-report".into(),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run_bin(&refs, &[]).await
}

/// count, min, max, p50, p90, p99 of a histogram, in natural units.
fn stats(m: Metric, s: &MetricSummary) -> [f64; 6] {
    let _ = m;
    [s.count as f64, s.min, s.max, s.p50, s.p90, s.p99]
}

#[tokio::test]
async fn four_shards_merge_to_the_union_of_their_samples_and_match_a_single_run() {
    let tmp = testkit::tempdir().unwrap();
    let single = run(&tmp.path().join("single"), &[]).await;
    let mut shards = Vec::new();
    let futs: Vec<_> = (0..4)
        .map(|i| {
            let out = tmp.path().join(format!("shard{i}"));
            async move { run(&out, &["--shard", &format!("{i}/4")]).await }
        })
        .collect();
    for d in futures_util::future::join_all(futs).await {
        shards.push(d);
    }
    let merged = tmp.path().join("merged");
    let refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let o = merge(&refs, &merged, &[]).await;
    assert!(o.status.success(), "{:?}", texts(&o));

    let m = LoadedRun::open(&merged).unwrap();
    let s = LoadedRun::open(&single).unwrap();
    // The same plan: the merged manifest's plan is the single run's.
    let (mp, sp) = (m.plan().unwrap(), s.plan().unwrap());
    assert_eq!(plan_hash(&mp), plan_hash(&sp));
    assert!(mp.shard.is_none());
    // Union of the shards' raw samples, from their CSV rows.
    let mut union: BTreeMap<(CellKey, Metric), Vec<u64>> = BTreeMap::new();
    for d in &shards {
        for (k, v) in LoadedRun::open(d).unwrap().samples().unwrap() {
            union.entry(k).or_default().extend(v);
        }
    }
    assert!(union.len() > 20, "too few metrics: {}", union.len());
    let mut compared = 0;
    for ((cell, metric), samples) in &union {
        let mut h = new_histogram();
        for v in samples {
            h.record(*v).unwrap();
        }
        let want = MetricSummary::of(*metric, &h).unwrap();
        // The merged histograms (from the shards' logs) …
        let merged_h = m.histogram(&cell.target, &cell.transport, *metric).unwrap();
        let got = MetricSummary::of(*metric, merged_h).unwrap();
        assert_eq!(
            stats(*metric, &got),
            stats(*metric, &want),
            "{cell} {metric:?}"
        );
        // … the merged summary …
        let cs = m.summary.cell(&cell.target, &cell.transport).unwrap();
        if let Some(ms) = cs.metric(*metric) {
            assert_eq!(
                stats(*metric, ms),
                stats(*metric, &want),
                "{cell} {metric:?} summary"
            );
        }
        // … and the exact extremes of the raw samples, within the histogram's resolution.
        let (lo, hi) = (
            *samples.iter().min().unwrap(),
            *samples.iter().max().unwrap(),
        );
        assert!(
            merged_h.equivalent(merged_h.min(), lo),
            "{cell} {metric:?} min"
        );
        assert!(
            merged_h.equivalent(merged_h.max(), hi),
            "{cell} {metric:?} max"
        );
        compared += 1;
    }
    assert_eq!(compared, union.len());
    // The merged CSVs hold exactly the union of the samples (rows moved, not changed).
    let mut from_merged = m.samples().unwrap();
    for (k, v) in union.iter_mut() {
        v.sort_unstable();
        let mv = from_merged.get_mut(k).unwrap();
        mv.sort_unstable();
        assert_eq!(mv, v, "{k:?}");
    }
    // Counts equal the single run's, cell by cell.
    for c in &s.summary.cells {
        let mc = m.summary.cell(&c.target, &c.transport).unwrap();
        assert_eq!(
            (mc.requests, mc.ok, mc.sessions, mc.warmup_requests),
            (c.requests, c.ok, c.sessions, c.warmup_requests),
            "{} × {}",
            c.target,
            c.transport
        );
        for (name, ms) in &c.metrics {
            // One sample per new connection: 4 shard processes open their own connections,
            // so this count differs from the single run's by design (the merge itself is
            // checked against the union above).
            if name == "connection_setup" {
                continue;
            }
            assert_eq!(mc.metrics[name].count, ms.count, "{name} count");
        }
    }
    // Disjoint ids, every row tagged with its shard, chunks pointing at merged requests.
    let rows = csv_maps(&merged.join("requests.csv"));
    let ids: HashSet<&str> = rows.iter().map(|r| r["id"].as_str()).collect();
    assert_eq!(ids.len(), rows.len());
    let shards_seen: HashSet<&str> = rows.iter().map(|r| r["shard"].as_str()).collect();
    assert_eq!(shards_seen, HashSet::from(["0", "1", "2", "3"]));
    let conns: HashSet<(&str, &str)> = rows
        .iter()
        .map(|r| (r["shard"].as_str(), r["connection_id"].as_str()))
        .collect();
    let conn_ids: HashSet<&str> = conns.iter().map(|(_, c)| *c).collect();
    assert_eq!(conn_ids.len(), conns.len(), "a connection id in two shards");
    for c in csv_maps(&merged.join("chunks.csv")) {
        assert!(ids.contains(c["request_id"].as_str()));
    }
    let rec = m.manifest.merge.as_ref().unwrap();
    assert_eq!(rec.shards.len(), 4);
    assert!(rec.missing.is_empty() && !rec.partial);
    assert!(rec
        .shards
        .iter()
        .all(|s| s.offset_uncertainty_ns < 1_000_000_000));
    assert!(m.manifest.resources.as_ref().unwrap().peak_sessions >= 4);

    // `compare` and `report` take the merged directory.
    let (ss, ms) = (single.to_string_lossy(), merged.to_string_lossy());
    let o = run_bin(&["compare", &ss, &ms, "--format", "json"], &[]).await;
    assert!(matches!(o.status.code(), Some(0 | 1)), "{:?}", texts(&o));
    let out = tmp.path().join("report");
    let o = run_bin(
        &[
            "report",
            &ms,
            "--out",
            &out.to_string_lossy(),
            "--format",
            "md",
        ],
        &[],
    )
    .await;
    assert!(o.status.success(), "{:?}", texts(&o));
    assert!(std::fs::read_to_string(out.join("report.md"))
        .unwrap()
        .contains("ws"));

    // Refusals: a shard twice, a missing shard, a shard of another plan.
    let o = merge(
        &[refs[0], refs[0], refs[1], refs[2]],
        &tmp.path().join("dup"),
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
    assert!(texts(&o).1.contains("given twice"), "{:?}", texts(&o));
    let o = merge(&refs[..3], &tmp.path().join("miss"), &[]).await;
    assert_eq!(o.status.code(), Some(2));
    assert!(
        texts(&o).1.contains("missing shards 3/4"),
        "{:?}",
        texts(&o)
    );
    let o = merge(&refs[..3], &tmp.path().join("partial"), &["--partial"]).await;
    assert!(o.status.success(), "{:?}", texts(&o));
    let p = LoadedRun::open(&tmp.path().join("partial")).unwrap();
    assert_eq!(p.manifest.merge.unwrap().missing, vec![3]);
    assert_eq!(p.manifest.status.to_string(), "interrupted");
    let other = run(
        &tmp.path().join("other"),
        &["--seed", "9", "--shard", "3/4"],
    )
    .await;
    let o = merge(
        &[refs[0], refs[1], refs[2], &other],
        &tmp.path().join("foreign"),
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(2));
    assert!(texts(&o).1.contains("different plans"), "{:?}", texts(&o));
    let o = merge(&[&single], &tmp.path().join("notashard"), &[]).await;
    assert!(texts(&o).1.contains("is not a shard"), "{:?}", texts(&o));
}

/// The fixture behind `scripts/merge-1m.sh` (`examples/shard_fixture.rs`) writes shards that
/// `merge` takes: one plan hash, every shard's rows in the merged files, ids disjoint.
#[tokio::test]
async fn the_synthetic_shard_fixture_merges() {
    let tmp = testkit::tempdir().unwrap();
    let dirs =
        spark_bench::report::fixture::synthetic_shards(&tmp.path().join("fx"), 4, 800, 8).unwrap();
    assert_eq!(dirs.len(), 4);
    let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let out = tmp.path().join("merged");
    let o = merge(&refs, &out, &[]).await;
    assert!(o.status.success(), "{:?}", texts(&o));
    let shard_rows: usize = dirs
        .iter()
        .map(|d| csv_maps(&d.join("requests.csv")).len())
        .sum();
    let merged = csv_maps(&out.join("requests.csv"));
    assert_eq!(merged.len(), shard_rows);
    let ids: HashSet<&str> = merged.iter().map(|r| r["id"].as_str()).collect();
    assert_eq!(ids.len(), merged.len(), "request ids are disjoint");
    let run = LoadedRun::open(&out).unwrap();
    let measured: u64 = run.summary.cells.iter().map(|c| c.requests).sum();
    let shards_measured: u64 = dirs
        .iter()
        .map(|d| {
            let r = LoadedRun::open(d).unwrap();
            r.summary.cells.iter().map(|c| c.requests).sum::<u64>()
        })
        .sum();
    assert_eq!(measured, shards_measured);
    assert!(measured >= 800, "{measured}");
}
