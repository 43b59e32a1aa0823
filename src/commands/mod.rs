//! One module per subcommand: glue only (load → build → execute → persist → render).

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub mod compare;
pub mod report;
pub mod run;
pub mod serve;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: `compare` found a regression.
pub const EXIT_REGRESSION: u8 = 1;
/// Exit code: usage, configuration or runtime error.
pub const EXIT_ERROR: u8 = 2;
/// Exit code: interrupted by Ctrl-C (results written, marked interrupted).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Runs a parsed command line and maps the outcome to an exit code.
pub fn main(cli: Cli) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let result = rt.block_on(async {
        match cli.command {
            Command::Run(args) => run::execute(args).await,
            Command::Serve(args) => serve::execute(args).await,
            Command::Report(args) => report::execute(args).await,
            Command::Compare(args) => compare::execute(args).await,
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::from(EXIT_OK);
            }
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
