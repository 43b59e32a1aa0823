//! `spark-bench merge DIR… --out DIR`: the results directories of one plan's shards
//! (`run --shard I/N`) folded into one results directory, as if one machine had run the
//! whole plan.
//!
//! Owns: refusing what cannot be merged (directories of different plans, a shard twice,
//! missing shards unless `partial`, a shard that did not finish unless `partial`), the
//! merged time axis (every shard's instants moved by the distance between its monotonic
//! origin and the earliest shard's, both read on the wall clock; the uncertainty of that
//! mapping is recorded), the histograms (the shards' HdrHistogram logs added: lossless, so
//! the merged percentiles are those of the union of the samples), the rows (see
//! `store::merge_rows`), and the rebuilt summary, timeline and manifest.
//! Does not own: rendering the report (`commands::merge` calls `report` afterwards).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::manifest::{rfc3339, LoadRecord, Manifest, Resources, RunStatus};
use super::merge_rows::{Shift, Writers};
use super::reader::{LoadedRun, TimelineFile, TIMELINE_SCHEMA_VERSION};
use super::rows::shift_instants;
use super::{hlog, write_json, Result, StoreError};
use super::{MANIFEST_FILE, SUMMARY_FILE, TIMELINE_FILE};
use crate::clock::Anchor;
use crate::plan::shard::{plan_hash, Shard};
use crate::plan::Plan;
use crate::recorder::harness::{Harness, Thresholds, Verdict};
use crate::recorder::{Recorder, SessionTimeline, Summary};

pub use super::manifest::{MergeRecord, MergedShard};

/// What a merge wrote.
#[derive(Debug)]
pub struct MergeOutcome {
    /// The merged directory.
    pub dir: PathBuf,
    /// Its summary.
    pub summary: Summary,
    /// Its manifest's `merge` section.
    pub record: MergeRecord,
}

fn refuse(message: String) -> StoreError {
    StoreError::Parse {
        path: PathBuf::from("merge"),
        message,
    }
}

/// The shards being merged, in index order, each with its plan.
type Shards = [(LoadedRun, Plan)];

/// Merges the shard directories `dirs` into the new directory `out` (which must not exist or
/// be empty). `partial`: merge even when shards are missing or did not finish, and say so.
pub fn merge(
    dirs: &[PathBuf],
    out: &Path,
    partial: bool,
    command_line: &[String],
) -> Result<MergeOutcome> {
    let (shards, first) = load_shards(dirs)?;
    let (missing, unfinished) = coverage(&shards, &first, partial)?;
    let axis = Axis::of(&shards);

    prepare_out(out)?;
    let mut writers = Writers::create(out)?;
    let whole_plan = whole_plan(&shards, &first, missing.is_empty())?;
    let mut rec = Recorder::counts_only(whole_plan.slo);
    let (merged, end_ns) = add_shards(&shards, &axis, &mut writers, &mut rec)?;
    writers.finish()?;

    let mut summary = Summary::from_recorder(&rec);
    summary.harness = Some(merged_harness(&rec, &shards));
    write_json(&out.join(SUMMARY_FILE), &summary)?;
    write_json(
        &out.join(TIMELINE_FILE),
        &TimelineFile {
            schema_version: TIMELINE_SCHEMA_VERSION,
            sessions: merged_timeline(&shards, &merged)?,
        },
    )?;
    let origin = axis.origin();
    hlog::write_histograms(out, &rec, origin, Duration::from_nanos(end_ns))?;

    let record = MergeRecord {
        plan_hash: first.plan_hash.clone(),
        shard_count: first.count,
        shards: merged,
        missing: missing.clone(),
        partial: !missing.is_empty() || !unfinished.is_empty(),
        axis: format!(
            "ns since shard {}'s monotonic origin ({}); every other shard's instants were moved by the distance between the origins on the wall clock (offset_ns, ± offset_uncertainty_ns)",
            shards[axis.ref_i].1.shard.as_ref().map_or(0, |s| s.index),
            rfc3339(origin)
        ),
    };
    let mut manifest = merged_manifest(&shards, out, &record, &axis);
    manifest.plan = serde_json::to_value(&whole_plan).unwrap_or(serde_json::Value::Null);
    manifest.command_line = command_line.to_vec();
    manifest.load = Some(LoadRecord::of(&whole_plan));
    manifest.resources = merged_resources(&shards, rec.peak_sessions());
    write_json(&out.join(MANIFEST_FILE), &manifest)?;
    Ok(MergeOutcome {
        dir: out.to_path_buf(),
        summary,
        record,
    })
}

/// Opens every directory in `dirs` and returns them in shard-index order with the first
/// one's shard, refusing an empty list, a directory that is not a shard, a shard given twice,
/// shards of different plans, and a shard without a clock anchor.
fn load_shards(dirs: &[PathBuf]) -> Result<(Vec<(LoadedRun, Plan)>, Shard)> {
    if dirs.is_empty() {
        return Err(refuse(
            "no shard directories given; pass the results directories of `run --shard I/N`".into(),
        ));
    }
    let mut shards: Vec<(LoadedRun, Plan)> = Vec::new();
    for d in dirs {
        let run = LoadedRun::open(d)?;
        let plan = run.plan()?;
        if plan.shard.is_none() {
            return Err(refuse(format!(
                "{} is not a shard (its plan has no `shard`); merge takes the directories that `spark-bench run … --shard I/N` wrote",
                d.display()
            )));
        }
        shards.push((run, plan));
    }
    shards.sort_by_key(|(_, p)| p.shard.as_ref().map_or(0, |s| s.index));
    let first = shards[0].1.shard.clone().unwrap_or_else(|| unreachable!());
    for pair in shards.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (sa, sb) = (a.1.shard.as_ref(), b.1.shard.as_ref());
        let (Some(sa), Some(sb)) = (sa, sb) else {
            continue;
        };
        if sa.index == sb.index {
            return Err(refuse(format!(
                "shard {}/{} is given twice: {} and {}; pass each shard's directory once",
                sa.index,
                sa.count,
                a.0.dir.display(),
                b.0.dir.display()
            )));
        }
    }
    for (run, plan) in &shards {
        let s = plan.shard.as_ref().unwrap_or_else(|| unreachable!());
        if s.plan_hash != first.plan_hash || s.count != first.count {
            return Err(refuse(format!(
                "{} is shard {}/{} of plan {}, but {} is shard {}/{} of plan {}: these are different plans (scenario, seed, targets, transports or load differ); merge only the shards of one plan",
                run.dir.display(), s.index, s.count, s.plan_hash,
                shards[0].0.dir.display(), first.index, first.count, first.plan_hash
            )));
        }
        if run.manifest.clock.is_none() {
            return Err(refuse(format!(
                "{} has no clock anchor in its manifest (written by an older spark-bench); re-run the shard with this version",
                run.dir.display()
            )));
        }
    }
    Ok((shards, first))
}

/// The plan's shard indices that are not among `shards`, and the shards that did not
/// finish (described); unless `partial`, either refuses the merge.
fn coverage(shards: &Shards, first: &Shard, partial: bool) -> Result<(Vec<u32>, Vec<String>)> {
    let present: Vec<u32> = shards
        .iter()
        .filter_map(|(_, p)| p.shard.as_ref().map(|s| s.index))
        .collect();
    let missing: Vec<u32> = (0..first.count).filter(|i| !present.contains(i)).collect();
    let unfinished: Vec<String> = shards
        .iter()
        .filter(|(r, _)| r.manifest.status != RunStatus::Complete)
        .map(|(r, p)| {
            format!(
                "shard {} ({}: {})",
                p.shard.as_ref().map_or(0, |s| s.index),
                r.dir.display(),
                r.manifest.status
            )
        })
        .collect();
    if !partial && !missing.is_empty() {
        let list: Vec<String> = missing
            .iter()
            .map(|i| format!("{i}/{}", first.count))
            .collect();
        return Err(refuse(format!(
            "missing shards {} of plan {}: the merge would not be the whole plan. Run them (`spark-bench run … --shard I/N`) and pass their directories, or pass --partial to merge what there is (the manifest then lists what is missing)",
            list.join(", "), first.plan_hash
        )));
    }
    if !partial && !unfinished.is_empty() {
        return Err(refuse(format!(
            "{} did not finish; re-run it, or pass --partial to merge it as it is",
            unfinished.join(", ")
        )));
    }
    Ok((missing, unfinished))
}

/// The merged time axis: every shard's clock anchor and the earliest of them on the wall
/// clock, whose origin the merged instants count from.
struct Axis {
    /// Each shard's anchor, in shard order.
    anchors: Vec<Anchor>,
    /// The position of the earliest shard.
    ref_i: usize,
    /// The earliest shard's anchor.
    reference: Anchor,
}

impl Axis {
    /// The axis of `shards` (every one has an anchor: [`load_shards`] checked).
    fn of(shards: &Shards) -> Axis {
        let anchors: Vec<Anchor> = shards
            .iter()
            .map(|(r, _)| r.manifest.clock.clone().unwrap_or_else(|| unreachable!()))
            .collect();
        let (ref_i, reference) = anchors
            .iter()
            .enumerate()
            .min_by_key(|(_, a)| a.origin_unix_ns)
            .map(|(i, a)| (i, a.clone()))
            .unwrap_or_else(|| unreachable!());
        Axis {
            anchors,
            ref_i,
            reference,
        }
    }

    /// The axis's origin on the wall clock.
    fn origin(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.reference.origin_unix_ns)
    }
}

/// The whole plan the shards were cut from. `complete` (no shard missing): it must hash to
/// the plan hash the shards name, else the merge is refused.
fn whole_plan(shards: &Shards, first: &Shard, complete: bool) -> Result<Plan> {
    let plans: Vec<Plan> = shards.iter().map(|(_, p)| p.clone()).collect();
    let whole = Plan::unshard(&plans).unwrap_or_else(|| unreachable!());
    if complete {
        let h = plan_hash(&whole);
        if h != first.plan_hash {
            return Err(refuse(format!(
                "the shards' plans fold back into plan {h}, not the {} they name: a shard's manifest was edited or written by a different version",
                first.plan_hash
            )));
        }
    }
    Ok(whole)
}

/// Streams every shard's rows into `writers` and `rec` (with disjoint ids, on the merged
/// axis) and adds its histograms to `rec`; returns what each shard contributed and the end
/// of the merged run on the axis (for the histogram logs' interval length), ns.
fn add_shards(
    shards: &Shards,
    axis: &Axis,
    writers: &mut Writers,
    rec: &mut Recorder,
) -> Result<(Vec<MergedShard>, u64)> {
    let mut merged = Vec::new();
    let (mut id_base, mut connection_base) = (0u64, 0u64);
    let mut end_ns = 0u64;
    for (k, (run, plan)) in shards.iter().enumerate() {
        let index = plan.shard.as_ref().map_or(0, |s| s.index);
        let offset_ns = axis.anchors[k].origin_unix_ns - axis.reference.origin_unix_ns;
        let shift = Shift {
            shard: index,
            offset_ns,
            id_base,
            connection_base,
        };
        let added = writers.add_shard(&run.dir, shift, rec)?;
        for ((key, metric), h) in &run.histograms {
            rec.add_histogram(key, *metric, h);
        }
        end_ns = end_ns.max(offset_ns + run_length_ns(run));
        merged.push(MergedShard {
            index,
            dir: run.dir.display().to_string(),
            run_id: run.manifest.run_id.clone(),
            host: run.manifest.host.hostname.clone(),
            status: run.manifest.status,
            offset_ns,
            offset_uncertainty_ns: if k == axis.ref_i {
                axis.anchors[k].uncertainty_ns
            } else {
                axis.anchors[k].uncertainty_ns + axis.reference.uncertainty_ns
            },
            id_offset: id_base,
            connection_id_offset: connection_base,
            requests: added.requests,
            harness: run.summary.harness.as_ref().map(|h| h.verdict),
        });
        id_base += added.max_id.map_or(0, |m| m + 1);
        connection_base += added.max_connection.map_or(0, |m| m + 1);
    }
    Ok((merged, end_ns))
}

/// The merged manifest, from the first shard's: the run id of `out`, the status `record`
/// implies, the axis's start and clock, the last end, every shard's network notes, and
/// `record` as its `merge` section. The caller sets the plan, command line, load and
/// resources.
fn merged_manifest(shards: &Shards, out: &Path, record: &MergeRecord, axis: &Axis) -> Manifest {
    let mut manifest = shards[0].0.manifest.clone();
    manifest.run_id = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    manifest.status = if record.partial {
        RunStatus::Interrupted
    } else {
        RunStatus::Complete
    };
    manifest.started_at = rfc3339(axis.origin());
    manifest.ended_at = shards
        .iter()
        .filter_map(|(r, _)| r.manifest.ended_at.clone())
        .max();
    for (r, _) in &shards[1..] {
        manifest.network.extend(r.manifest.network.clone());
    }
    let worst = record
        .shards
        .iter()
        .map(|s| s.offset_uncertainty_ns)
        .max()
        .unwrap_or(0);
    manifest.clock = Some(Anchor {
        origin_unix_ns: axis.reference.origin_unix_ns,
        uncertainty_ns: worst,
        how: format!("merged: the earliest shard's anchor; shards placed on it within ± {worst} ns (see merge.shards)"),
    });
    manifest.merge = Some(record.clone());
    manifest
}

/// Creates `out`, refusing a directory that already holds files.
fn prepare_out(out: &Path) -> Result<()> {
    if out.exists() {
        let empty = std::fs::read_dir(out)
            .map_err(|source| StoreError::Read {
                path: out.to_path_buf(),
                source,
            })?
            .next()
            .is_none();
        if !empty {
            return Err(refuse(format!(
                "--out {} exists and is not empty; pass a new directory (merge never overwrites results)",
                out.display()
            )));
        }
    }
    std::fs::create_dir_all(out).map_err(|source| StoreError::CreateDir {
        path: out.to_path_buf(),
        source,
    })
}

/// The run's length from its manifest's start and end (0 when unknown): only for the
/// histogram logs' interval length.
fn run_length_ns(run: &LoadedRun) -> u64 {
    run.summary
        .cells
        .iter()
        .map(|c| (c.span_s * 1e9) as u64)
        .max()
        .unwrap_or(0)
}

/// The merged harness section: dispatch figures over every shard's requests on the merged
/// axis (no CPU or timer figures: those are per machine), harness-bound when any shard was,
/// with that shard's reasons.
fn merged_harness(rec: &Recorder, shards: &[(LoadedRun, Plan)]) -> Harness {
    let mut h = Harness::judge(rec.dispatch(), None, None, Thresholds::DEFAULT);
    h.reasons.clear();
    h.bound_by.clear();
    h.verdict = Verdict::Ok;
    for (run, plan) in shards {
        let i = plan.shard.as_ref().map_or(0, |s| s.index);
        let Some(sh) = &run.summary.harness else {
            continue;
        };
        if sh.verdict == Verdict::HarnessBound {
            h.verdict = Verdict::HarnessBound;
            h.reasons
                .extend(sh.reasons.iter().map(|r| format!("shard {i}: {r}")));
            h.bound_by.extend(&sh.bound_by);
        }
        h.notes.push(format!(
            "shard {i} on {}: {} (CPU {:.2} cores, timer late p99 {:.0} µs)",
            run.manifest.host.hostname,
            sh.verdict,
            sh.cpu.mean_cores.unwrap_or(0.0),
            sh.timer_late_us.p99
        ));
    }
    h
}

/// One sampled session per cell: the lowest-index shard's that has one, moved onto the
/// merged axis.
fn merged_timeline(
    shards: &[(LoadedRun, Plan)],
    merged: &[MergedShard],
) -> Result<Vec<SessionTimeline>> {
    let mut out: Vec<SessionTimeline> = Vec::new();
    for ((run, _), m) in shards.iter().zip(merged) {
        for mut t in run.timeline()? {
            if out
                .iter()
                .any(|o| o.target == t.target && o.transport == t.transport)
            {
                continue;
            }
            let at = |v: u64| v + m.offset_ns;
            for r in &mut t.requests {
                r.id += m.id_offset;
                r.connection_id += m.connection_id_offset;
                shift_instants!(*r, m.offset_ns);
                for c in &mut r.chunks {
                    c.at_ns = at(c.at_ns);
                }
            }
            if let Some(s) = &mut t.record {
                s.start_ns = at(s.start_ns);
                s.end_ns = at(s.end_ns);
            }
            out.push(t);
        }
    }
    out.sort_by(|a, b| (&a.target, &a.transport).cmp(&(&b.target, &b.transport)));
    Ok(out)
}

/// The shards' resources together: the smallest open-file limit granted, the most sessions
/// in progress at once on the merged axis, memory summed over the shards' processes.
fn merged_resources(shards: &[(LoadedRun, Plan)], peak_sessions: u64) -> Option<Resources> {
    let each: Vec<&Resources> = shards
        .iter()
        .filter_map(|(r, _)| r.manifest.resources.as_ref())
        .collect();
    if each.is_empty() {
        return None;
    }
    let before: u64 = each.iter().map(|r| r.rss_before_kib).sum();
    let peak: u64 = each.iter().map(|r| r.rss_peak_kib).sum();
    let shard_peaks: u64 = each.iter().map(|r| r.peak_sessions).sum();
    Some(Resources {
        nofile_before: each.iter().map(|r| r.nofile_before).min().unwrap_or(0),
        nofile_granted: each.iter().map(|r| r.nofile_granted).min().unwrap_or(0),
        nofile_hard: each.iter().map(|r| r.nofile_hard).min().unwrap_or(0),
        peak_sessions,
        rss_before_kib: before,
        rss_peak_kib: peak,
        kib_per_session: if shard_peaks > 0 {
            Some(peak.saturating_sub(before) as f64 / shard_peaks as f64)
        } else {
            None
        },
    })
}

/// The wall-clock instant `ns` after an anchor's origin (for messages).
pub fn wall_of(anchor: &Anchor, ns: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(anchor.origin_unix_ns + ns)
}
