//! `spark-bench calibrate`: [`crate::runner::calibrate`] run, printed (each ceiling found,
//! or the bound where it was not reached), and saved where every run reads it.

use crate::cli::CalibrateArgs;
use crate::runner::calibrate::{calibrate, Plan};

use super::EXIT_OK;

/// Executes `spark-bench calibrate`; returns the exit code.
pub async fn execute(args: CalibrateArgs) -> anyhow::Result<u8> {
    let plan = Plan::new(args.quick);
    let quiet = args.quiet;
    if !quiet {
        errln!(
            "calibrating this machine ({} cores){}: ingest, then a request-rate ramp",
            crate::store::Host::current().cpus,
            if args.quick { ", quick" } else { "" }
        );
    }
    let mut say = |line: &str| {
        if !quiet {
            errln!("  {line}")
        }
    };
    let c = calibrate(&plan, &mut say).await?;
    let path = if args.no_save {
        None
    } else {
        args.save
            .clone()
            .or_else(crate::store::default_calibration_path)
    };
    if let Some(path) = &path {
        crate::store::save_calibration(path, &c)?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&c)?);
    } else {
        outln!(
            "ingest ceiling:       {} ({} streams, process CPU {} cores)",
            c.ingest.describe("chunks/s"),
            c.ingest_streams,
            c.ingest_cpu_cores.map_or("-".into(), |v| format!("{v:.2}"))
        );
        outln!(
            "timestamp error:      p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs at {:.0} chunks/s (arrival stamp − the simulator's write)",
            c.stamp_error_p50_us,
            c.stamp_error_p99_us,
            c.stamp_error_max_us,
            c.stamp_error_rate
        );
        outln!(
            "request-rate ceiling: {} (a rate holds with dispatch lag p99 under {} ms)",
            c.request_rate.describe("req/s"),
            crate::recorder::harness::Thresholds::DEFAULT.driver_lag_p99_ms,
        );
        if !c.ingest.found() {
            outln!("runs are not judged against the ingest figure: only a ceiling that was found is (calibrate on a quieter machine, or in a release build, to find it)");
        }
        outln!("took {:.1} s", c.took_s);
    }
    match &path {
        Some(_) if quiet => {}
        Some(p) => errln!(
            "saved: {} (every run compares its chunk rate with a found ceiling)",
            p.display()
        ),
        None if args.no_save => {}
        None => {
            errln!("warning: not saved: neither XDG_CACHE_HOME nor HOME is set; pass --save FILE")
        }
    }
    Ok(EXIT_OK)
}
