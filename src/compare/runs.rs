//! The gate's use case over results directories: `spark-bench compare` and the
//! `run --baseline NAME` gate. Finds and opens both sides ([`super::sides`]), refuses to
//! compare apples with oranges, streams every run's samples into [`RunSamples`] (leaving
//! out requests in a run's stall windows), pairs repeats run by run, compares, confirms a
//! regression with re-runs, and maps the verdict to the exit code.
//!
//! Owns: the comparability refusal, pairing, the stall policy ([`MAX_STALLED_SHARE`]), the
//! notes about the runs (harness-bound sides among them, those bound by dispatch lag alone
//! handed to [`super::lag`]), confirmation pairs, and the
//! outcome → exit code mapping ([`exit_code`]).
//! Does not own: argument parsing and printing (`commands::compare`), the statistics and the
//! decision rule ([`super::compare`]), reading the files (`store`).

use std::path::{Path, PathBuf};

use super::lag::LagRun;
use super::samples::Window;
use super::sides::{self, check_comparable, find_baseline, gate_thresholds, open};
use super::{Comparison, GateMetric, Outcome, RunSamples, Settings, Thresholds};
use crate::recorder::stalls::Stalls;
use crate::store::{self, LoadedRun};
use crate::vocab::RequestRecord;

/// Exit code of a gate that passed.
pub const EXIT_PASS: u8 = 0;
/// Exit code of a gate that failed: a regression (or, with `--fail-on-inconclusive`, an
/// inconclusive row).
pub const EXIT_REGRESSION: u8 = 1;
/// Exit code of a gate that decided nothing: no regression, and not one gated row reached
/// a decision (every row inconclusive or not gated, e.g. a smoke scenario too small for its
/// bands). Not a pass: the CI job should say the gate could not judge this change.
pub const EXIT_NO_DECISION: u8 = 4;

/// Runs whose stall windows cover more than this share of their measured requests keep
/// them: that many stalls is not a moment of the machine but how the system behaves.
pub const MAX_STALLED_SHARE: f64 = 0.25;

/// What to compare and how: `spark-bench compare`'s arguments once parsed.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// A results directory (or directory of repeats), or a baseline name looked up under the
    /// candidate's results root (its parent), then `./results`.
    pub baseline: PathBuf,
    /// The candidate's results directory (or directory of repeats).
    pub candidate: PathBuf,
    /// Re-runs of the candidate that a regression must reproduce in (`--confirm-run`).
    pub confirm: Vec<PathBuf>,
    /// Fresh baseline runs beside the re-runs (`--confirm-baseline`): re-run i of the
    /// candidate is compared with the i-th of these (or with the baseline when absent), so
    /// a fault in the baseline can be cleared as well as one in the candidate.
    pub confirm_baseline: Vec<PathBuf>,
    /// Metrics to compare; empty for the default set.
    pub metrics: Vec<GateMetric>,
    /// Thresholds layered over the candidate scenario's `[gate]` (`--threshold`).
    pub thresholds: Thresholds,
    /// Count `Inconclusive` as a failure.
    pub fail_on_inconclusive: bool,
    /// Compare the cells two mismatched runs share instead of refusing.
    pub allow_mismatch: bool,
}

/// 1 ([`EXIT_REGRESSION`]) when the gate fails, 4 ([`EXIT_NO_DECISION`]) when it decided
/// nothing, else 0 ([`EXIT_PASS`]).
pub fn exit_code(c: &Comparison) -> u8 {
    match c.outcome() {
        Outcome::Regression | Outcome::Failed => EXIT_REGRESSION,
        Outcome::NoDecision => EXIT_NO_DECISION,
        Outcome::Pass | Outcome::PassInconclusive => EXIT_PASS,
    }
}

/// Finds and opens both sides of `req`, compares them, and confirms the comparison with
/// each re-run. Thresholds come from the candidate's scenario `[gate]`, then
/// `req.thresholds`.
pub fn compare_dirs(req: &Request) -> anyhow::Result<Comparison> {
    let baseline_dir = find_baseline(&req.baseline, &req.candidate)?;
    let base = open(&baseline_dir, "baseline")?;
    let cand = open(&req.candidate, "candidate")?;
    let mut settings = Settings {
        metrics: req.metrics.clone(),
        fail_on_inconclusive: req.fail_on_inconclusive,
        ..Settings::default()
    };
    settings.thresholds = gate_thresholds(&cand[0])?;
    settings.thresholds.extend(&req.thresholds);
    let mut comparison = compare_sides(&base, &cand, &settings, req.allow_mismatch)?;
    if req.confirm_baseline.len() > req.confirm.len() {
        anyhow::bail!(
            "{} --confirm-baseline but {} --confirm-run: give each fresh baseline its candidate re-run",
            req.confirm_baseline.len(),
            req.confirm.len()
        );
    }
    let mut confirmations = Vec::new();
    for (i, dir) in req.confirm.iter().enumerate() {
        let rerun = open(dir, "confirmation re-run")?;
        let c = match req.confirm_baseline.get(i) {
            Some(b) => {
                let fresh = open(b, "confirmation baseline")?;
                compare_sides(&fresh, &rerun, &settings, req.allow_mismatch)?
            }
            None => compare_sides(&base, &rerun, &settings, req.allow_mismatch)?,
        };
        confirmations.push(c);
    }
    comparison.confirm_with(&confirmations);
    Ok(comparison)
}

/// The gate of `spark-bench run --baseline NAME`: compares `candidate_dir` (confirmed with
/// `reruns`, `run --confirm K`) against the baseline `NAME` (looked up under the candidate's
/// results root, i.e. its parent directory, then `./results`) with default settings.
/// Thresholds come from the candidate's scenario `[gate]`. Mismatched runs (different
/// scenario, link or cells) are an error.
pub fn gate_comparison(
    name: &str,
    candidate_dir: &Path,
    reruns: &[PathBuf],
) -> anyhow::Result<Comparison> {
    compare_dirs(&Request {
        baseline: PathBuf::from(name),
        candidate: candidate_dir.to_path_buf(),
        confirm: reruns.to_vec(),
        ..Request::default()
    })
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
    let mut notes = mismatch_notes(base, cand, allow_mismatch)?;
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
    let mut c = super::compare(&sb, &sc, &settings, sides::label(base), sides::label(cand));
    let (loud, lag_runs) = harness_bound(base, cand);
    c.harness_bound = loud;
    c.dispatch_lag = super::lag::apply(&mut c.rows, lag_runs);
    notes.extend(run_notes(base, cand)?);
    notes.append(&mut c.notes);
    c.notes = notes;
    Ok(c)
}

/// Checks that both sides (and the repeats within each) are comparable: an error listing
/// every mismatch, or with `allow_mismatch` one note per mismatch.
fn mismatch_notes(
    base: &[LoadedRun],
    cand: &[LoadedRun],
    allow_mismatch: bool,
) -> anyhow::Result<Vec<String>> {
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
    Ok(mismatches
        .into_iter()
        .map(|m| format!("allowed mismatch (--allow-mismatch): {m}"))
        .collect())
}

/// Notes about the runs themselves: any that did not complete, different hosts, and each
/// run's own row notes.
fn run_notes(base: &[LoadedRun], cand: &[LoadedRun]) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
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
                run.row_notes()?
                    .into_iter()
                    .map(|n| format!("the {side} run {}: {n}", run.manifest.run_id)),
            );
        }
    }
    Ok(notes)
}

/// One warning per run that judged itself harness-bound (`summary.json` → `harness`): its
/// figures say how fast the client kept up, not how fast the target was. Runs bound for
/// their dispatch lag alone come back apart, for [`super::lag::apply`] to judge row by row.
fn harness_bound(base: &[LoadedRun], cand: &[LoadedRun]) -> (Vec<String>, Vec<LagRun>) {
    let mut out = Vec::new();
    let mut lag_only = Vec::new();
    for (side, runs) in [("baseline", base), ("candidate", cand)] {
        for run in runs {
            let id = &run.manifest.run_id;
            if let Some(l) = run
                .summary
                .harness
                .as_ref()
                .and_then(|h| LagRun::of(side, id, h))
            {
                lag_only.push(l);
            } else if let Some(h) = run
                .summary
                .harness
                .as_ref()
                .filter(|h| h.verdict == crate::recorder::harness::Verdict::HarnessBound)
            {
                out.push(format!(
                    "the {side} run {} judged itself HARNESS-BOUND (the client, not the target, limited it: {}); its numbers are not the target's",
                    run.manifest.run_id,
                    if h.reasons.is_empty() {
                        "see its summary".to_string()
                    } else {
                        h.reasons.join("; ")
                    }
                ));
            }
        }
    }
    (out, lag_only)
}

/// True when run i of both sides replayed the same conversation: same scenario, same seed.
fn same_conversation(base: &[LoadedRun], cand: &[LoadedRun]) -> bool {
    base.len() == cand.len()
        && base.iter().zip(cand).all(|(b, c)| {
            b.manifest.scenario.hash == c.manifest.scenario.hash
                && matches!((b.plan(), c.plan()), (Ok(pb), Ok(pc)) if pb.seed == pc.seed)
        })
}

/// Streams every run of a side into one [`RunSamples`], each run's stall windows left out
/// of latencies unless they cover more than [`MAX_STALLED_SHARE`] of its requests.
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
        let excluded = stall_windows(run, &stalls, &records, side, notes);
        samples.begin_run(excluded);
        for c in sides::cells(run) {
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

/// The stall policy for one run: its stall windows to leave out of latencies (none when it
/// has none, or when they overlap more than [`MAX_STALLED_SHARE`] of its measured requests),
/// with a note saying which.
fn stall_windows(
    run: &LoadedRun,
    stalls: &Stalls,
    records: &[RequestRecord],
    side: &str,
    notes: &mut Vec<String>,
) -> Vec<Window> {
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
    if exclude {
        spans
    } else {
        Vec::new()
    }
}
