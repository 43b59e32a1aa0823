//! `spark-bench serve`.

use crate::cli::ServeArgs;

/// Executes `spark-bench serve`; returns the exit code.
pub async fn execute(_args: ServeArgs) -> anyhow::Result<u8> {
    anyhow::bail!("`spark-bench serve` is not implemented yet")
}
