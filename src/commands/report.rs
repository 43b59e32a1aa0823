//! `spark-bench report`.

use crate::cli::ReportArgs;

/// Executes `spark-bench report`; returns the exit code.
pub async fn execute(_args: ReportArgs) -> anyhow::Result<u8> {
    anyhow::bail!("`spark-bench report` is not implemented yet")
}
