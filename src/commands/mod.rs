//! One module per subcommand: glue only (parse → call the library → print → exit code);
//! [`run_status`] is `run`'s verdict on itself (failed cells, status, `--json` object).

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub mod calibrate;
pub mod compare;
pub mod export;
pub mod history;
pub mod merge;
pub mod record;
pub mod report;
pub mod run;
pub mod run_status;
pub mod serve;
pub mod url_model;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: `compare` found a regression (the gate's own, [`crate::compare::EXIT_REGRESSION`]).
pub const EXIT_REGRESSION: u8 = crate::compare::EXIT_REGRESSION;
/// Exit code: usage, configuration or runtime error.
pub const EXIT_ERROR: u8 = 2;
/// Exit code: `run` finished and wrote its results, but a measured cell's requests all
/// failed, or a cell's error rate passed `--max-error-rate` ([`run_status`]).
pub const EXIT_FAILED_REQUESTS: u8 = 3;
/// Exit code: interrupted by Ctrl-C (results written, marked interrupted).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Runs a parsed command line and maps the outcome to an exit code.
pub fn main(cli: Cli) -> ExitCode {
    let rt = match crate::runner::resources::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Run(args) => run::execute(args).await,
            Command::Serve(args) => serve::execute(args).await,
            Command::Report(args) => report::execute(args).await,
            Command::Compare(args) => compare::execute(args).await,
            Command::Calibrate(args) => calibrate::execute(args).await,
            Command::Record(args) => record::execute(args).await,
            Command::Merge(args) => merge::execute(args).await,
            Command::History(args) => history::execute(args).await,
            Command::Export(args) => export::execute(args),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::from(EXIT_OK);
            }
            errln!("error: {}", error_text(&e));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// The error and its causes, `: `-separated like `{:#}`, but without a cause whose text the
/// message already carries: many error types both quote their source in their message and
/// expose it as `source()`, which `{:#}` would print twice.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::error_text;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read x.toml: {source}; check the path")]
    struct Quoting {
        source: std::io::Error,
    }

    #[test]
    fn error_text_prints_each_cause_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "gone (os error 2)");
        let e = anyhow::Error::new(Quoting { source: io() });
        assert_eq!(
            error_text(&e),
            "cannot read x.toml: gone (os error 2); check the path"
        );
        // Causes the message does not quote are kept, in order.
        let e = anyhow::Error::new(io()).context("loading the plan");
        assert_eq!(error_text(&e), "loading the plan: gone (os error 2)");
    }
}
