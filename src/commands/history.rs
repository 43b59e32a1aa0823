//! `spark-bench history`: arguments → [`crate::compare::history_file::write_report`] (the
//! charts and `history.md`) → a summary line, and the Markdown (for `$GITHUB_STEP_SUMMARY`)
//! or JSON on stdout.
//!
//! Owns: printing. Does not own: the history file, its charts and Markdown
//! (`compare::history_file`, `compare::history`).

use super::EXIT_OK;
use crate::cli::HistoryArgs;
use crate::compare::history_file;

/// Executes `spark-bench history`.
pub async fn execute(args: HistoryArgs) -> anyhow::Result<u8> {
    let w = history_file::write_report(&args.dir, args.out.as_deref(), args.last)?;
    if !args.quiet {
        errln!(
        "history: {} gate runs, {} series, {} with a change point; {} charts in {}, Markdown in {}",
        w.entries,
        w.series.len(),
        w.series.iter().filter(|s| s.change_point.is_some()).count(),
        w.charts,
        w.charts_dir.display(),
        w.markdown_path.display()
    );
    }
    // `--json` is `--format json` (clap refuses it beside another --format).
    let format = if args.json {
        "json"
    } else {
        args.format.as_str()
    };
    match format {
        "md" => out!("{}", w.markdown),
        "json" => outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "entries": w.entries,
                "series": w.series,
            }))?
        ),
        _ => {}
    }
    Ok(EXIT_OK)
}
