//! The two sides of a comparison as they lie on disk: finding the baseline (a results
//! directory, or a baseline name), opening a side (one results directory, or a directory of
//! repeats: `run --repeat N` writes DIR/SET/ with one run directory per repeat, taken in
//! directory-name order, and run ids start with their start time), the thresholds in the
//! candidate's scenario `[gate]`, what the renderers say about each side ([`RunLabel`]:
//! directory, ids, charts), and whether two runs can be compared at all.
//!
//! Owns: the reads of results directories the gate needs (through `store`), and the
//! comparability check (scenario hash, link model, target × transport cells).
//! Does not own: streaming samples and the stall policy ([`super::runs`]), the statistics.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{RunLabel, Thresholds};
use crate::recorder::CellKey;
use crate::store::{self, LoadedRun};

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
pub(crate) fn cells(run: &LoadedRun) -> BTreeSet<CellKey> {
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
pub(crate) fn gate_thresholds(run: &LoadedRun) -> anyhow::Result<Thresholds> {
    let plan = run.plan()?;
    Ok(Thresholds::parse_gate(
        &plan.gate,
        &run.manifest.scenario.path,
    )?)
}

/// A results directory as given, else a baseline name: under the candidate's results root
/// (its parent), then under `./results`.
pub fn find_baseline(given: &Path, candidate_dir: &Path) -> anyhow::Result<PathBuf> {
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

/// What the renderers say about a side: its directory (the set's, for repeats), run ids,
/// status, scenario hash, link and charts.
pub(crate) fn label(runs: &[LoadedRun]) -> RunLabel {
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
