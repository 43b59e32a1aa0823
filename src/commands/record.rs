//! `spark-bench record`: runs the recording proxy until Ctrl-C, SIGTERM or `--duration`,
//! then writes the scenario and the live session's results directory.

use crate::capture::{self, privacy::Privacy, Config};
use crate::cli::RecordArgs;
use crate::vocab::BaseUrl;

/// Executes `spark-bench record`; returns the exit code.
pub async fn execute(args: RecordArgs) -> anyhow::Result<u8> {
    let upstream =
        BaseUrl::parse(&args.upstream).map_err(|e| anyhow::anyhow!("--upstream: {e}"))?;
    let pv = Privacy::new(&args.redact, args.synthesize_text, 1)?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on --listen {}: {e}", args.listen))?;
    let addr = listener.local_addr()?;
    outln!(
        "spark-bench record: proxy listening on {} → {}",
        capture::base_url(addr),
        pv.clean(&args.upstream)
    );
    if !args.quiet {
        outln!(
            "point your agent at it (e.g. OPENAI_BASE_URL={}); Ctrl-C writes {}",
            capture::base_url(addr),
            args.out.display()
        );
    }
    let duration = args.duration;
    let stop = async move {
        let term = async {
            #[cfg(unix)]
            {
                if let Ok(mut s) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                {
                    s.recv().await;
                    return;
                }
            }
            std::future::pending::<()>().await
        };
        let timer = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term => {}
            _ = timer => {}
        }
    };
    let clock = crate::clock::Clock::start();
    let bounds = capture::Bounds {
        header_timeout: args.header_timeout,
        ..Default::default()
    };
    let rec = capture::record_with(listener, Config { upstream }, bounds, clock, stop).await?;
    let command_line: Vec<String> = std::env::args().collect();
    let w = capture::finish(
        &rec,
        &args.name,
        &args.upstream,
        &args.out,
        &args.results,
        &pv,
        &command_line,
    )?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&w)?);
    } else if w.sessions == 0 {
        outln!("nothing recorded: no requests reached the proxy");
    } else {
        outln!(
            "recorded {} requests ({} failed) in {} sessions; session 1: {} turns, {} tool calls",
            w.requests,
            w.failed,
            w.sessions,
            w.turns,
            w.tool_calls
        );
        for s in &w.scenarios {
            outln!("scenario: {}", s.display());
        }
        if let Some(d) = &w.results {
            outln!("results:  {}", d.display());
        }
    }
    Ok(super::EXIT_OK)
}
