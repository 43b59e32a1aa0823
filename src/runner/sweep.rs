//! Runs a sweep: one full run per load point (every target × transport), each its own run
//! directory under `<sweep-id>/points/`, and `sweep.json` with the curves and knees.
//!
//! Owns: the order of the points, including the automatic search (`…=auto`):
//! * `concurrency=auto`: concurrency 1 (synchronous), then doubling (2, 4, 8, … up to 1024)
//!   until every curve has a saturated point (see `recorder::sweep`), then three points
//!   evenly between each curve's knee and the point after it.
//! * `rate=auto`, as GuideLLM's sweep: a synchronous run (concurrency 1) measures the
//!   lowest request rate R₀, a throughput run (concurrency 64) the highest R₁; then six
//!   open-loop rates evenly spaced strictly between R₀ and R₁, and one at 1.2 × R₁ to show
//!   the saturated side. The synchronous and throughput runs are kept as points but are not
//!   on the rate curve (they are not rate-driven).
//!
//! Does not own: each run (`runner::run`), how a point sets its load knobs
//! (`plan::sweep::PointLoad::apply`, on the inputs the caller read once: no file is read
//! again per point), the knee rule (`recorder::sweep`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::plan::sweep::{PointLoad, SweepParam, SweepSpec};
use crate::plan::{Plan, PlanInput};
use crate::recorder::sweep::{self, SweepPoint, SweepSummary};
use crate::recorder::Summary;

use super::Options;

/// What a sweep left behind.
pub struct SweepOutcome {
    /// The sweep directory.
    pub dir: PathBuf,
    /// What `sweep.json` holds.
    pub summary: SweepSummary,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
}

struct State<'a> {
    dir: PathBuf,
    options: Options,
    /// The sweep's inputs; each point edits a copy's load knobs.
    input: &'a PlanInput,
    /// The base plan (the inputs as given): its session count and duration size a point.
    base: &'a Plan,
    summary: SweepSummary,
    /// (load value, on the curve, summary) of every point run.
    ran: Vec<(f64, bool, Summary)>,
    interrupted: bool,
}

impl State<'_> {
    async fn point(&mut self, load: PointLoad, role: &str, on_curve: bool) -> anyhow::Result<()> {
        if self.interrupted {
            return Ok(());
        }
        let (param, value) = match load {
            PointLoad::Concurrency(c) => ("concurrency", f64::from(c)),
            PointLoad::Rate(r) => ("rate", r),
        };
        let plan = Arc::new(self.plan_of(load)?);
        errln!(
            "sweep: point {} ({role}): {param} {}",
            self.ran.len() + 1,
            sweep::num(value)
        );
        let points = self.dir.join("points");
        let outcome = super::run(plan, &points, self.options.clone()).await?;
        let name = format!(
            "{:02}-{param}-{}",
            self.ran.len(),
            sweep::num(value).replace('.', "_")
        );
        let dest = points.join(&name);
        std::fs::rename(&outcome.dir, &dest).map_err(|e| {
            anyhow::anyhow!(
                "cannot rename {} to {}: {e}",
                outcome.dir.display(),
                dest.display()
            )
        })?;
        self.interrupted = outcome.interrupted;
        self.summary.points.push(SweepPoint {
            value,
            dir: format!("points/{name}"),
            role: role.to_string(),
        });
        self.ran.push((value, on_curve, outcome.summary));
        self.refresh();
        crate::store::write_sweep(&self.dir, &self.summary)?;
        Ok(())
    }

    /// The plan of one point: the inputs with the point's load set on their load knobs.
    fn plan_of(&self, load: PointLoad) -> anyhow::Result<Plan> {
        let mut input = self.input.clone();
        let file = &input.scenario.scenario.load;
        load.apply(&mut input.overrides.load, file, &self.base.load);
        Ok(input.build()?)
    }

    fn refresh(&mut self) {
        let pts: Vec<(f64, &Summary)> = self
            .ran
            .iter()
            .filter(|(_, on, _)| *on)
            .map(|(v, _, s)| (*v, s))
            .collect();
        self.summary.curves = sweep::curves(&pts);
    }

    /// Achieved request rates of the last point, per cell.
    fn last_rates(&self) -> Vec<f64> {
        self.ran.last().map_or_else(Vec::new, |(_, _, s)| {
            s.cells
                .iter()
                .map(|c| sweep::CurvePoint::of(0.0, c).achieved_req_s)
                .collect()
        })
    }

    fn has(&self, v: f64) -> bool {
        self.ran
            .iter()
            .any(|(x, on, _)| *on && (*x - v).abs() < 1e-9)
    }
}

/// Runs the sweep `spec` into a new directory under `out`. `input` holds the scenario and
/// the command line as read once, `base` is its plan; each point sets its load on a copy of
/// `input`'s load knobs and builds its plan from that.
pub async fn run(
    spec: &SweepSpec,
    input: &PlanInput,
    base: &Plan,
    out: &Path,
    options: Options,
) -> anyhow::Result<SweepOutcome> {
    let scenario = base.scenario_name.as_str();
    let id = crate::store::new_sweep_dir(out, scenario)?;
    let dir = out.join(&id);
    let load_note = match spec.param {
        SweepParam::Concurrency => "closed loop: each point keeps `concurrency` sessions in flight per cell".to_string(),
        SweepParam::Rate => "open loop: `rate` requests per second per cell (constant arrivals unless --arrival or [load] arrival says otherwise), no concurrency cap".to_string(),
    };
    let mut st = State {
        dir: dir.clone(),
        options,
        input,
        base,
        summary: SweepSummary {
            schema_version: sweep::SWEEP_SCHEMA_VERSION,
            sweep_id: id,
            scenario: scenario.to_string(),
            param: spec.param.name().to_string(),
            spec: spec.text.clone(),
            load_note,
            knee_rule: sweep::knee_rule(),
            slo: base.slo.describe(),
            points: Vec::new(),
            curves: Vec::new(),
        },
        ran: Vec::new(),
        interrupted: false,
    };
    let load = |v: f64| match spec.param {
        SweepParam::Concurrency => PointLoad::Concurrency(v.round().max(1.0) as u32),
        SweepParam::Rate => PointLoad::Rate(v),
    };
    if !spec.is_auto() {
        for v in &spec.values {
            st.point(load(*v), "listed", true).await?;
        }
    } else if spec.param == SweepParam::Concurrency {
        st.auto_concurrency().await?;
    } else {
        st.auto_rate().await?;
    }
    Ok(SweepOutcome {
        dir,
        interrupted: st.interrupted,
        summary: st.summary,
    })
}

impl State<'_> {
    /// `concurrency=auto`: doubling from 1 until every curve saturates, then three points
    /// between each curve's knee and the point after it.
    async fn auto_concurrency(&mut self) -> anyhow::Result<()> {
        let mut c = 1u32;
        loop {
            let role = if c == 1 {
                "synchronous"
            } else {
                "throughput search"
            };
            self.point(PointLoad::Concurrency(c), role, true).await?;
            let all_saturated = !self.summary.curves.is_empty()
                && self.summary.curves.iter().all(|cv| cv.knee.is_some());
            if all_saturated || c >= 1024 || self.interrupted {
                break;
            }
            c *= 2;
        }
        let mut between: Vec<u32> = Vec::new();
        for cv in &self.summary.curves {
            let Some(k) = cv.knee else { continue };
            let (lo, hi) = (
                cv.points[k].value,
                cv.points.get(k + 1).map_or(0.0, |p| p.value),
            );
            for j in 1..=3 {
                let v = (lo + (hi - lo) * f64::from(j) / 4.0).round() as u32;
                if f64::from(v) > lo && f64::from(v) < hi && !between.contains(&v) {
                    between.push(v);
                }
            }
        }
        between.sort_unstable();
        for v in between {
            if !self.has(f64::from(v)) {
                self.point(PointLoad::Concurrency(v), "between", true)
                    .await?;
            }
        }
        Ok(())
    }

    /// `rate=auto`: a synchronous and a throughput run bound the range, then six rates
    /// between them and one beyond.
    async fn auto_rate(&mut self) -> anyhow::Result<()> {
        self.point(PointLoad::Concurrency(1), "synchronous", false)
            .await?;
        let r0 = self.last_rates().into_iter().fold(f64::INFINITY, f64::min);
        self.point(PointLoad::Concurrency(64), "throughput", false)
            .await?;
        let r1 = self.last_rates().into_iter().fold(0.0, f64::max);
        if !(r0.is_finite() && r1 > r0 && r0 > 0.0) {
            anyhow::bail!(
                "rate=auto: the synchronous run achieved {r0:.3} requests/s and the throughput run {r1:.3}; no range to sweep (did requests fail? see {})",
                self.dir.display()
            );
        }
        for j in 1..=6 {
            let r = r0 + (r1 - r0) * f64::from(j) / 7.0;
            self.point(PointLoad::Rate(round3(r)), "between", true)
                .await?;
        }
        self.point(PointLoad::Rate(round3(r1 * 1.2)), "beyond", true)
            .await
    }
}

/// Three significant figures, so point names and values stay readable.
fn round3(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return v;
    }
    let mag = 10f64.powf(v.log10().floor() - 2.0);
    (v / mag).round() * mag
}
