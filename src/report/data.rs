//! What a report is drawn from: one or more loaded runs, each with a short label, reduced to
//! what the renderers read (manifest, summary, histograms, the timeline sample, and the few
//! plan facts a report shows). Never the raw CSV rows, so a run of any size loads quickly.
//!
//! Owns: loading through `store`, run labels, cell ordering, and plan facts read tolerantly
//! from the manifest's JSON (a plan from a newer version must not stop a report).
//! Does not own: any formatting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use hdrhistogram::Histogram;

use super::style::transport_rank;
use crate::recorder::{CellKey, CellSummary, Metric, SessionTimeline, Summary};
use crate::store::{LoadedRun, Manifest};

/// One run as a report sees it.
#[derive(Debug, Clone)]
pub struct RunView {
    /// Short label for charts and tables: the run id for a single run, `A`, `B`, … for several.
    pub label: String,
    /// Where it was loaded from.
    pub dir: PathBuf,
    /// `manifest.json`.
    pub manifest: Manifest,
    /// `summary.json` (or rebuilt from rows, see `rebuilt`).
    pub summary: Summary,
    /// Histograms by cell and metric, stored units.
    pub histograms: BTreeMap<(CellKey, Metric), Histogram<u64>>,
    /// The sampled session per cell (`timeline.json`).
    pub timeline: Vec<SessionTimeline>,
    /// True when the run did not finish and its statistics were recomputed from its rows.
    pub rebuilt: bool,
    /// `load.concurrency` of the plan, when readable.
    pub concurrency: Option<u64>,
    /// Target name → hardware label from the plan.
    pub hardware: BTreeMap<String, String>,
    /// The plan builder's warnings.
    pub warnings: Vec<String>,
    /// The run's stall windows (`stalls.json`), when the run wrote them.
    pub stalls: Option<crate::recorder::stalls::Stalls>,
}

/// Everything one report shows.
#[derive(Debug, Clone)]
pub struct ReportInput {
    /// The runs, in the order given.
    pub runs: Vec<RunView>,
}

impl ReportInput {
    /// Loads runs from directories. One run is labelled by its run id; several by letters.
    pub fn load(dirs: &[PathBuf]) -> anyhow::Result<ReportInput> {
        anyhow::ensure!(
            !dirs.is_empty(),
            "no results directory given; pass one or more results/<run-id> directories"
        );
        let mut runs = Vec::with_capacity(dirs.len());
        for (i, dir) in dirs.iter().enumerate() {
            let loaded = LoadedRun::open(dir)?;
            let label = if dirs.len() == 1 {
                loaded.manifest.run_id.clone()
            } else {
                run_letter(i)
            };
            runs.push(RunView::from_loaded(loaded, label)?);
        }
        Ok(ReportInput { runs })
    }

    /// True when more than one run is shown.
    pub fn is_comparison(&self) -> bool {
        self.runs.len() > 1
    }
}

/// `A`, `B`, …, `Z`, `AA`, `AB`, …
pub fn run_letter(i: usize) -> String {
    let mut n = i + 1;
    let mut s = Vec::new();
    while n > 0 {
        n -= 1;
        s.push(b'A' + (n % 26) as u8);
        n /= 26;
    }
    s.reverse();
    String::from_utf8_lossy(&s).into_owned()
}

impl RunView {
    /// A view of a loaded run.
    pub fn from_loaded(run: LoadedRun, label: String) -> anyhow::Result<RunView> {
        let timeline = run
            .timeline()
            .with_context(|| format!("reading the session timeline of {}", run.dir.display()))?;
        let plan = &run.manifest.plan;
        let concurrency = plan
            .get("load")
            .and_then(|l| l.get("concurrency"))
            .and_then(|c| c.as_u64());
        let mut hardware = BTreeMap::new();
        if let Some(cells) = plan.get("cells").and_then(|c| c.as_array()) {
            for cell in cells {
                let t = cell.get("target");
                if let (Some(name), Some(hw)) = (
                    t.and_then(|t| t.get("name")).and_then(|v| v.as_str()),
                    t.and_then(|t| t.get("hardware")).and_then(|v| v.as_str()),
                ) {
                    hardware.insert(name.to_string(), hw.to_string());
                }
            }
        }
        let warnings = plan
            .get("warnings")
            .and_then(|w| w.as_array())
            .map(|w| {
                w.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        // Only the file: detecting windows in an older run would read every record.
        let stalls = if run.dir.join(crate::store::STALLS_FILE).is_file() {
            run.stalls().ok()
        } else {
            None
        };
        let mut warnings: Vec<String> = warnings;
        warnings.extend(run.row_notes()?);
        Ok(RunView {
            stalls,
            label,
            dir: run.dir,
            manifest: run.manifest,
            summary: run.summary,
            histograms: run.histograms,
            timeline,
            rebuilt: run.rebuilt,
            concurrency,
            hardware,
            warnings,
        })
    }

    /// Targets in order of first appearance in the summary.
    pub fn targets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in &self.summary.cells {
            if !out.contains(&c.target) {
                out.push(c.target.clone());
            }
        }
        out
    }

    /// The cells of one target, transports in the documented order.
    pub fn cells_of(&self, target: &str) -> Vec<&CellSummary> {
        let mut v: Vec<&CellSummary> = self
            .summary
            .cells
            .iter()
            .filter(|c| c.target == target)
            .collect();
        v.sort_by_key(|c| transport_rank(&c.transport));
        v
    }

    /// A histogram of a cell, when it has samples.
    pub fn histogram(&self, target: &str, transport: &str, m: Metric) -> Option<&Histogram<u64>> {
        self.histograms
            .get(&(CellKey::new(target, transport), m))
            .filter(|h| !h.is_empty())
    }

    /// The sampled session of a cell.
    pub fn timeline_of(&self, target: &str, transport: &str) -> Option<&SessionTimeline> {
        self.timeline
            .iter()
            .find(|t| t.target == target && t.transport == transport)
    }

    /// The hardware label of a target (its name when the plan has none).
    pub fn hardware_of(&self, target: &str) -> String {
        self.hardware
            .get(target)
            .cloned()
            .unwrap_or_else(|| target.to_string())
    }

    /// The run directory's last component (a run id or a baseline name).
    pub fn dir_name(&self) -> String {
        dir_name(&self.dir)
    }
}

fn dir_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters() {
        assert_eq!(run_letter(0), "A");
        assert_eq!(run_letter(25), "Z");
        assert_eq!(run_letter(26), "AA");
        assert_eq!(run_letter(27), "AB");
    }
}
