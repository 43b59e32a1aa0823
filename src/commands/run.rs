//! `spark-bench run`.

use crate::cli::RunArgs;

/// Executes `spark-bench run`; returns the exit code.
pub async fn execute(_args: RunArgs) -> anyhow::Result<u8> {
    anyhow::bail!("`spark-bench run` is not implemented yet")
}
