//! `spark-bench merge`: shards' results directories → one results directory
//! ([`crate::store::merge`]), its table and its report.

use crate::cli::MergeArgs;

/// Executes `spark-bench merge`; returns the exit code.
pub async fn execute(args: MergeArgs) -> anyhow::Result<u8> {
    let command_line: Vec<String> = std::env::args().collect();
    let (dirs, out, partial) = (args.shards.clone(), args.out.clone(), args.partial);
    let outcome = tokio::task::spawn_blocking(move || {
        crate::store::merge::merge(&dirs, &out, partial, &command_line)
    })
    .await??;
    let r = &outcome.record;
    let requests: u64 = r.shards.iter().map(|s| s.requests).sum();
    let worst = r
        .shards
        .iter()
        .map(|s| s.offset_uncertainty_ns)
        .max()
        .unwrap_or(0);
    let say = !args.quiet;
    if say {
        errln!(
        "merged {} of {} shards of plan {} ({requests} requests); shards placed on one wall-clock axis within ± {:.3} ms",
        r.shards.len(),
        r.shard_count,
        r.plan_hash,
        worst as f64 / 1e6
    );
    }
    if !r.missing.is_empty() {
        let list: Vec<String> = r
            .missing
            .iter()
            .map(|i| format!("{i}/{}", r.shard_count))
            .collect();
        errln!(
            "warning: --partial: shards {} are missing; the merged run is marked interrupted",
            list.join(", ")
        );
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&outcome.summary)?);
    } else {
        outln!("{}", crate::recorder::table(&outcome.summary));
    }
    if say {
        errln!("results: {}", outcome.dir.display());
    }
    if !args.no_report {
        let dir = outcome.dir.clone();
        match tokio::task::spawn_blocking(move || crate::report::render_run(&dir)).await? {
            Ok(paths) => {
                if let Some(html) = paths
                    .iter()
                    .find(|p| p.extension().is_some_and(|e| e == "html"))
                {
                    if say {
                        errln!("report:  {}", html.display());
                    }
                }
            }
            Err(e) => errln!("warning: the report could not be rendered: {e:#}"),
        }
    }
    Ok(super::EXIT_OK)
}
