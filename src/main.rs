use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = spark_bench::cli::Cli::parse();
    spark_bench::commands::main(cli)
}
