//! `spark-bench compare` and the `run --baseline NAME` gate: find and load both runs, refuse
//! to compare apples with oranges, stream their samples into `compare`, print the verdict,
//! and map it to the exit code (0 pass, 1 regression, 2 error).
//!
//! Owns: the I/O around the pure `compare` module (reading `requests.csv`, `chunks.csv`,
//! `sessions.csv`, `stalls.json`; finding charts), the comparability check, and argument
//! validation. A side is one results directory or a directory of repeats (`run --repeat N`
//! writes DIR/SET/ with one run directory per repeat); the runs of a side are taken in
//! directory-name order (run ids start with their start time).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{EXIT_OK, EXIT_REGRESSION};
use crate::cli::CompareArgs;
use crate::compare::{
    self, render, Comparison, GateMetric, RunLabel, RunSamples, Settings, Thresholds,
};
use crate::recorder::CellKey;
use crate::store::{self, LoadedRun};

/// Executes `spark-bench compare`; returns the exit code.
pub async fn execute(args: CompareArgs) -> anyhow::Result<u8> {
    let format = args.format;
    let metrics: Vec<GateMetric> = args
        .metrics
        .iter()
        .flat_map(|l| l.0.iter().copied())
        .collect();
    let cli_thresholds = Thresholds::parse_cli(&args.thresholds)?;
    let candidate_dir = args.candidate.clone();
    let baseline_dir = find_baseline(&args.baseline, &candidate_dir)?;
    let confirm_dirs = args.confirm_run.clone();
    let history = args.history.clone();
    let comparison = tokio::task::spawn_blocking(move || -> anyhow::Result<Comparison> {
        let base = open(&baseline_dir, "baseline")?;
        let cand = open(&candidate_dir, "candidate")?;
        let mut settings = Settings {
            metrics,
            fail_on_inconclusive: args.fail_on_inconclusive,
            ..Settings::default()
        };
        settings.thresholds = gate_thresholds(&cand[0])?;
        settings.thresholds.extend(&cli_thresholds);
        let mut c = compare_sides(&base, &cand, &settings, args.allow_mismatch)?;
        let mut reruns = Vec::new();
        for dir in &confirm_dirs {
            let rerun = open(dir, "confirmation re-run")?;
            reruns.push(compare_sides(
                &base,
                &rerun,
                &settings,
                args.allow_mismatch,
            )?);
        }
        c.confirm_with(&reruns);
        if let Some(h) = &history {
            let label = args
                .label
                .clone()
                .or_else(|| std::env::var("GITHUB_SHA").ok().filter(|s| !s.is_empty()));
            let n = super::history::append(h, &c, label, args.history_keep)?;
            errln!("history: {} ({n} entries)", h.display());
        }
        Ok(c)
    })
    .await
    .context("the comparison task failed")??;
    out!("{}", format.render(&comparison));
    Ok(exit_code(&comparison))
}

/// The gate of `spark-bench run --baseline NAME`: compares `candidate_dir` against the
/// baseline `NAME` (looked up under the candidate's results root, i.e. its parent
/// directory, then `./results`), prints the text verdict, and returns the exit code
/// (0 pass, 1 regression). Thresholds come from the candidate's scenario `[gate]`.
/// Mismatched runs (different scenario, link or cells) are an error.
pub fn gate_against_baseline(name: &str, candidate_dir: &Path) -> anyhow::Result<u8> {
    gate_with_confirm(name, candidate_dir, &[])
}

/// [`gate_against_baseline`] with re-runs of the candidate (`run --confirm K`): a
/// regression must reproduce in every re-run before the gate fails.
pub fn gate_with_confirm(
    name: &str,
    candidate_dir: &Path,
    reruns: &[PathBuf],
) -> anyhow::Result<u8> {
    let comparison = gate_comparison(name, candidate_dir, reruns)?;
    out!("{}", render::text(&comparison));
    Ok(exit_code(&comparison))
}

/// The comparison behind [`gate_with_confirm`], without printing it.
pub fn gate_comparison(
    name: &str,
    candidate_dir: &Path,
    reruns: &[PathBuf],
) -> anyhow::Result<Comparison> {
    let baseline_dir = find_baseline(Path::new(name), candidate_dir)?;
    let base = open(&baseline_dir, "baseline")?;
    let cand = open(candidate_dir, "candidate")?;
    let settings = Settings {
        thresholds: gate_thresholds(&cand[0])?,
        ..Settings::default()
    };
    let mut comparison = compare_sides(&base, &cand, &settings, false)?;
    let mut confirmations = Vec::new();
    for dir in reruns {
        let rerun = open(dir, "confirmation re-run")?;
        confirmations.push(compare_sides(&base, &rerun, &settings, false)?);
    }
    comparison.confirm_with(&confirmations);
    Ok(comparison)
}

/// 1 when the gate fails, else 0.
pub fn exit_code(c: &Comparison) -> u8 {
    if c.fails() {
        EXIT_REGRESSION
    } else {
        EXIT_OK
    }
}

/// [`compare_sides`] for one run per side.
pub fn compare_loaded(
    base: &LoadedRun,
    cand: &LoadedRun,
    settings: &Settings,
    allow_mismatch: bool,
) -> anyhow::Result<Comparison> {
    compare_sides(
        std::slice::from_ref(base),
        std::slice::from_ref(cand),
        settings,
        allow_mismatch,
    )
}

/// One run's samples (stall windows left out), as the gate sees them.
pub fn load_samples(run: &LoadedRun) -> anyhow::Result<RunSamples> {
    load_side(std::slice::from_ref(run), "run", &mut Vec::new())
}

/// Checks comparability, streams both sides' samples (every run of each) and compares
/// them. Requests in a run's stall windows are left out of latencies (and the notes say so).
pub fn compare_sides(
    base: &[LoadedRun],
    cand: &[LoadedRun],
    settings: &Settings,
    allow_mismatch: bool,
) -> anyhow::Result<Comparison> {
    let mut mismatches = check_comparable(&base[0], &cand[0]);
    for (side, runs) in [("baseline", base), ("candidate", cand)] {
        for r in &runs[1..] {
            for m in check_comparable(&runs[0], r) {
                mismatches.push(format!("within the {side}'s repeats: {m}"));
            }
        }
    }
    if !mismatches.is_empty() && !allow_mismatch {
        anyhow::bail!(
            "the runs are not comparable:\n  - {}\nCompare two runs of the same scenario file, link and target × transport \
             matrix, or pass --allow-mismatch to compare the cells they share anyway",
            mismatches.join("\n  - ")
        );
    }
    let mut notes: Vec<String> = mismatches
        .into_iter()
        .map(|m| format!("allowed mismatch (--allow-mismatch): {m}"))
        .collect();
    let sb = load_side(base, "baseline", &mut notes)?;
    let sc = load_side(cand, "candidate", &mut notes)?;
    let mut settings = settings.clone();
    settings.same_conversation = same_conversation(base, cand);
    settings.paired_runs = base.len() == cand.len() && base.len() > 1;
    if settings.paired_runs {
        notes.push(format!(
            "{} runs per side: run i of the baseline is paired with run i of the candidate (interleave them, as scripts/ci-regression.sh does, so each pair saw the same machine)",
            base.len()
        ));
    }
    let length_metrics_compared =
        settings.metrics.is_empty() || settings.metrics.iter().any(|m| m.length_dependent());
    if settings.same_conversation && length_metrics_compared {
        notes.push(
            "both sides replayed the same conversation (same scenario and seed per run): e2e, output_tok_s and session_wall are compared request by request".to_string(),
        );
    }
    let mut c = compare::compare(&sb, &sc, &settings, label(base), label(cand));
    for (side, runs) in [("baseline", base), ("candidate", cand)] {
        for run in runs {
            let status = run.manifest.status.as_str();
            if status != "complete" {
                notes.push(format!(
                    "the {side} run {} has status {status:?}: it did not run to completion, so its samples may be fewer or skewed",
                    run.manifest.run_id
                ));
            }
        }
    }
    if base[0].manifest.host.hostname != cand[0].manifest.host.hostname {
        notes.push(format!(
            "the runs came from different hosts ({} vs {}); host differences are not noise the bands allow for",
            base[0].manifest.host.hostname, cand[0].manifest.host.hostname
        ));
    }
    for (runs, side) in [(base, "baseline"), (cand, "candidate")] {
        for run in runs {
            notes.extend(
                run.row_notes()
                    .into_iter()
                    .map(|n| format!("the {side} run {}: {n}", run.manifest.run_id)),
            );
        }
    }
    notes.append(&mut c.notes);
    c.notes = notes;
    Ok(c)
}

/// True when run i of both sides replayed the same conversation: same scenario, same seed.
fn same_conversation(base: &[LoadedRun], cand: &[LoadedRun]) -> bool {
    base.len() == cand.len()
        && base.iter().zip(cand).all(|(b, c)| {
            b.manifest.scenario.hash == c.manifest.scenario.hash
                && matches!((b.plan(), c.plan()), (Ok(pb), Ok(pc)) if pb.seed == pc.seed)
        })
}

/// Runs whose stall windows cover more than this share of their measured requests keep
/// them: that many stalls is not a moment of the machine but how the system behaves.
const MAX_STALLED_SHARE: f64 = 0.25;

fn load_side(
    runs: &[LoadedRun],
    side: &str,
    notes: &mut Vec<String>,
) -> anyhow::Result<RunSamples> {
    let mut samples = RunSamples::new();
    for run in runs {
        if run.request_rows()?.next().is_none() {
            anyhow::bail!(
                "the {side} run {} has no requests in {}: there is nothing to compare (status {:?}); \
                 rerun it, or check that the file was not emptied or cut short when it was copied",
                run.dir.display(),
                store::REQUESTS_FILE,
                run.manifest.status.as_str()
            );
        }
        let stalls = run.stalls()?;
        let records = run.records()?;
        let spans = stalls.spans();
        let measured = records.iter().filter(|r| !r.warmup).count().max(1);
        let hit = records
            .iter()
            .filter(|r| !r.warmup)
            .filter(|r| {
                let from = r.intended_ns.min(r.dispatch_ns);
                let to = r.end_ns.or(r.last_token_ns).unwrap_or(r.dispatch_ns);
                spans.iter().any(|&(a, b)| from < b && to > a)
            })
            .count();
        let share = hit as f64 / measured as f64;
        let exclude = !spans.is_empty() && share <= MAX_STALLED_SHARE;
        if !spans.is_empty() {
            notes.push(format!(
                "{side} run {}: {}; {}",
                run.manifest.run_id,
                stalls.line(),
                if exclude {
                    format!("{hit} request(s) overlapping it left out of latencies (still counted for the error rate)")
                } else {
                    format!("they overlap {:.0}% of its requests, more than a passing stall, so they were kept", share * 100.0)
                }
            ));
        }
        samples.begin_run(if exclude { spans } else { Vec::new() });
        for c in cells(run) {
            samples.ensure_cell(c);
        }
        for r in &records {
            samples.add_request(r);
        }
        for s in run.sessions()? {
            samples.add_session(&s);
        }
    }
    Ok(samples)
}

/// Why two runs cannot be compared: scenario hash, link model, target × transport cells.
/// Each message names both values.
pub fn check_comparable(base: &LoadedRun, cand: &LoadedRun) -> Vec<String> {
    let mut out = Vec::new();
    let (bm, cm) = (&base.manifest, &cand.manifest);
    if bm.scenario.hash != cm.scenario.hash {
        out.push(format!(
            "different scenarios: baseline {} ({}) vs candidate {} ({})",
            bm.scenario.hash, bm.scenario.path, cm.scenario.hash, cm.scenario.path
        ));
    }
    if bm.link != cm.link {
        out.push(format!(
            "different link models: baseline {:?} vs candidate {:?}",
            bm.link, cm.link
        ));
    }
    let (bc, cc) = (cells(base), cells(cand));
    if bc != cc {
        let fmt = |s: &BTreeSet<CellKey>| {
            s.iter()
                .map(CellKey::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!(
            "different target × transport sets: baseline [{}] vs candidate [{}]",
            fmt(&bc),
            fmt(&cc)
        ));
    }
    out
}

/// The cells a run planned (from the plan in its manifest; from its summary when the plan
/// cannot be read).
fn cells(run: &LoadedRun) -> BTreeSet<CellKey> {
    match run.plan() {
        Ok(plan) if !plan.cells.is_empty() => plan
            .cells
            .iter()
            .map(|c| CellKey::new(&c.target.name, c.transport.as_str()))
            .collect(),
        _ => run
            .summary
            .cells
            .iter()
            .map(|c| CellKey::new(&c.target, &c.transport))
            .collect(),
    }
}

/// Opens one side: a results directory, or a directory whose subdirectories are results
/// directories (the repeats of `run --repeat N`), in name order.
pub fn open(dir: &Path, side: &str) -> anyhow::Result<Vec<LoadedRun>> {
    if dir.join(store::MANIFEST_FILE).is_file() || !dir.is_dir() {
        return Ok(vec![
            LoadedRun::open(dir).with_context(|| format!("cannot load the {side} run"))?
        ]);
    }
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the {side} directory {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(store::MANIFEST_FILE).is_file())
        .collect();
    subdirs.sort();
    if subdirs.is_empty() {
        return Ok(vec![
            LoadedRun::open(dir).with_context(|| format!("cannot load the {side} run"))?
        ]);
    }
    subdirs
        .iter()
        .map(|d| {
            LoadedRun::open(d)
                .with_context(|| format!("cannot load the {side} repeat {}", d.display()))
        })
        .collect()
}

/// Thresholds from the run's scenario `[gate]` table.
fn gate_thresholds(run: &LoadedRun) -> anyhow::Result<Thresholds> {
    let plan = run.plan()?;
    Ok(Thresholds::parse_gate(
        &plan.gate,
        &run.manifest.scenario.path,
    )?)
}

/// A results directory as given, else a baseline name: under the candidate's results root
/// (its parent), then under `./results`.
fn find_baseline(given: &Path, candidate_dir: &Path) -> anyhow::Result<PathBuf> {
    let root = candidate_dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    find_baseline_under(given, root)
}

/// A results directory as given, else a baseline name under `root`, then under `./results`.
pub fn find_baseline_under(given: &Path, root: &Path) -> anyhow::Result<PathBuf> {
    // A results directory, or a directory of repeats (`run --repeat`).
    if given.join(store::MANIFEST_FILE).is_file() || given.is_dir() {
        return Ok(given.to_path_buf());
    }
    let name = given.to_string_lossy();
    match store::resolve(root, &name) {
        Ok(p) => Ok(p),
        Err(first) => store::resolve(Path::new("results"), &name).map_err(|_| first.into()),
    }
}

fn label(runs: &[LoadedRun]) -> RunLabel {
    let run = &runs[0];
    let dir = if runs.len() > 1 {
        run.dir.parent().unwrap_or(&run.dir).display().to_string()
    } else {
        run.dir.display().to_string()
    };
    RunLabel {
        dir,
        run_id: runs
            .iter()
            .map(|r| r.manifest.run_id.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        status: run.manifest.status.as_str().to_string(),
        scenario_hash: run.manifest.scenario.hash.clone(),
        link: run.manifest.link.clone(),
        charts: find_charts(&run.dir),
    }
}

/// `report.md`, `report.html` and SVG charts in the run directory or one level below,
/// as paths relative to it (at most 24).
fn find_charts(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for name in ["report.md", "report.html"] {
        if dir.join(name).is_file() {
            out.push(name.to_string());
        }
    }
    let mut svgs = Vec::new();
    let mut visit = |d: &Path, prefix: &str| {
        let Ok(entries) = std::fs::read_dir(d) else {
            return Vec::new();
        };
        let mut subdirs = Vec::new();
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                subdirs.push(name);
            } else if name.ends_with(".svg") {
                svgs.push(format!("{prefix}{name}"));
            }
        }
        subdirs
    };
    let subdirs = visit(dir, "");
    for s in subdirs {
        if s != store::HISTOGRAMS_DIR && !s.starts_with('.') {
            visit(&dir.join(&s), &format!("{s}/"));
        }
    }
    svgs.sort();
    out.extend(svgs);
    out.truncate(24);
    out
}
