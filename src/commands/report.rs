//! `spark-bench report`: load results directories, render, print the written paths.

use std::path::PathBuf;

use crate::cli::ReportArgs;
use crate::report::{render, Formats};

/// Executes `spark-bench report`; returns the exit code.
pub async fn execute(args: ReportArgs) -> anyhow::Result<u8> {
    let formats = Formats::union(&args.format)?;
    let out = match (&args.out, args.results.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [one]) => one.clone(),
        (None, _) => PathBuf::from("report"),
    };
    // A results directory, or the name of a baseline under results/baselines/.
    let dirs = args
        .results
        .iter()
        .map(|p| crate::store::resolve(std::path::Path::new("results"), &p.to_string_lossy()))
        .collect::<Result<Vec<_>, _>>()?;
    // Rows a reader must know about (a torn last row, a truncated requests.csv): said here
    // as well as in the report's notes.
    for d in &dirs {
        if let Ok(run) = crate::store::LoadedRun::open(d) {
            for n in run.row_notes()? {
                errln!("warning: {}: {n}", d.display());
            }
        }
    }
    // Rendering is CPU work; keep it off the async worker threads.
    let out_dir = out.clone();
    let written = tokio::task::spawn_blocking(move || render(&dirs, &formats, &out)).await??;
    if args.json {
        let doc = serde_json::json!({
            "status": "ok",
            "out": out_dir.display().to_string(),
            "written": written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        });
        outln!("{doc}");
    } else if !args.quiet {
        for p in written {
            outln!("{}", p.display());
        }
    }
    Ok(super::EXIT_OK)
}
