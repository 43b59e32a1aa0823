//! `spark-bench compare` and the `run --baseline NAME` gate: find and load both runs, refuse
//! to compare apples with oranges, stream their samples into `compare`, print the verdict,
//! and map it to the exit code (0 pass, 1 regression, 2 error).
//!
//! Owns: the I/O around the pure `compare` module (reading `requests.csv`, `chunks.csv`,
//! `sessions.csv`; finding charts), the comparability check, and argument validation.

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
    let comparison = tokio::task::spawn_blocking(move || -> anyhow::Result<Comparison> {
        let base = open(&baseline_dir, "baseline")?;
        let cand = open(&candidate_dir, "candidate")?;
        let mut settings = Settings {
            metrics,
            fail_on_inconclusive: args.fail_on_inconclusive,
            ..Settings::default()
        };
        settings.thresholds = gate_thresholds(&cand)?;
        settings.thresholds.extend(&cli_thresholds);
        compare_loaded(&base, &cand, &settings, args.allow_mismatch)
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
    let baseline_dir = find_baseline(Path::new(name), candidate_dir)?;
    let base = open(&baseline_dir, "baseline")?;
    let cand = open(candidate_dir, "candidate")?;
    let settings = Settings {
        thresholds: gate_thresholds(&cand)?,
        ..Settings::default()
    };
    let comparison = compare_loaded(&base, &cand, &settings, false)?;
    out!("{}", render::text(&comparison));
    Ok(exit_code(&comparison))
}

/// 1 when the gate fails, else 0.
pub fn exit_code(c: &Comparison) -> u8 {
    if c.fails() {
        EXIT_REGRESSION
    } else {
        EXIT_OK
    }
}

/// Checks comparability, streams both runs' samples and compares them.
pub fn compare_loaded(
    base: &LoadedRun,
    cand: &LoadedRun,
    settings: &Settings,
    allow_mismatch: bool,
) -> anyhow::Result<Comparison> {
    let mismatches = check_comparable(base, cand);
    if !mismatches.is_empty() && !allow_mismatch {
        anyhow::bail!(
            "the runs are not comparable:\n  - {}\nCompare two runs of the same scenario file, link and target × transport \
             matrix, or pass --allow-mismatch to compare the cells they share anyway",
            mismatches.join("\n  - ")
        );
    }
    let sb = load_samples(base)?;
    let sc = load_samples(cand)?;
    for (run, side) in [(base, "baseline"), (cand, "candidate")] {
        if run.request_rows()?.next().is_none() {
            anyhow::bail!(
                "the {side} run {} has no requests in {}: there is nothing to compare (status {:?}); \
                 rerun it, or check that the file was not emptied or cut short when it was copied",
                run.dir.display(),
                store::REQUESTS_FILE,
                run.manifest.status.as_str()
            );
        }
    }
    let mut c = compare::compare(&sb, &sc, settings, label(base), label(cand));
    let mut notes: Vec<String> = mismatches
        .into_iter()
        .map(|m| format!("allowed mismatch (--allow-mismatch): {m}"))
        .collect();
    for (run, side) in [(base, "baseline"), (cand, "candidate")] {
        let status = run.manifest.status.as_str();
        if status != "complete" {
            notes.push(format!(
                "the {side} run's status is {status:?}: it did not run to completion, so its samples may be fewer or skewed"
            ));
        }
    }
    if base.manifest.host.hostname != cand.manifest.host.hostname {
        notes.push(format!(
            "the runs came from different hosts ({} vs {}); host differences are not noise the bands allow for",
            base.manifest.host.hostname, cand.manifest.host.hostname
        ));
    }
    for (run, side) in [(base, "baseline"), (cand, "candidate")] {
        notes.extend(
            run.row_notes()
                .into_iter()
                .map(|n| format!("the {side} run: {n}")),
        );
    }
    notes.append(&mut c.notes);
    c.notes = notes;
    Ok(c)
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

/// Reads `requests.csv` (with each request's chunks from `chunks.csv`, for ITL) and
/// `sessions.csv` into samples. An unfinished run's torn final row is skipped, as
/// `LoadedRun` does everywhere.
pub fn load_samples(run: &LoadedRun) -> anyhow::Result<RunSamples> {
    let mut samples = RunSamples::new();
    for c in cells(run) {
        samples.ensure_cell(c);
    }
    for r in run.records()? {
        samples.add_request(&r);
    }
    for s in run.sessions()? {
        samples.add_session(&s);
    }
    Ok(samples)
}

fn open(dir: &Path, side: &str) -> anyhow::Result<LoadedRun> {
    LoadedRun::open(dir).with_context(|| format!("cannot load the {side} run"))
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
    if given.join(store::MANIFEST_FILE).is_file() {
        return Ok(given.to_path_buf());
    }
    let name = given.to_string_lossy();
    match store::resolve(root, &name) {
        Ok(p) => Ok(p),
        Err(first) => store::resolve(Path::new("results"), &name).map_err(|_| first.into()),
    }
}

fn label(run: &LoadedRun) -> RunLabel {
    RunLabel {
        dir: run.dir.display().to_string(),
        run_id: run.manifest.run_id.clone(),
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
