//! `spark-bench compare`.

use crate::cli::CompareArgs;

/// Executes `spark-bench compare`; returns the exit code.
pub async fn execute(_args: CompareArgs) -> anyhow::Result<u8> {
    anyhow::bail!("`spark-bench compare` is not implemented yet")
}
