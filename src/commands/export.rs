//! `spark-bench export FORMAT RUN_DIR`: a run in a peer tool's format ([`crate::report::vllm`]).

use crate::cli::ExportArgs;

/// Executes `spark-bench export`; returns the exit code.
pub fn execute(args: ExportArgs) -> anyhow::Result<u8> {
    let out = args.out.clone().unwrap_or_else(|| args.dir.clone());
    let paths = crate::report::vllm::export(&args.dir, &out)?;
    if args.json {
        let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        outln!("{}", serde_json::to_string_pretty(&shown)?);
    } else if !args.quiet {
        for p in &paths {
            outln!("{}", p.display());
        }
    }
    Ok(super::EXIT_OK)
}
