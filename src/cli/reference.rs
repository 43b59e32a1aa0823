//! Test-only: `docs/cli.md`, every subcommand's `--help` text as clap renders it, generated
//! from the definitions in `cli.rs` so the reference cannot drift from the binary.
//!
//! Owns: rendering the reference and the check that the checked-in file is current. Does not
//! own: the flags (`cli.rs`).

use clap::CommandFactory;

/// The whole reference: the top-level help, then each subcommand's long help, at a fixed
/// width so it renders the same on every machine.
fn render() -> String {
    let mut cmd = super::Cli::command().term_width(100);
    cmd.build();
    let mut s = String::from(
        "# Command-line reference\n\n\
         A part of the [spark-bench](../README.md) documentation. Generated from the code \
         (`src/cli.rs`): each section is what `spark-bench help COMMAND` prints. A test \
         fails when this file is stale; `UPDATE_DOCS=1 cargo test --lib cli_reference` \
         rewrites it.\n\n",
    );
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "help")
        .collect();
    s.push_str("Subcommands: ");
    s.push_str(
        &names
            .iter()
            .map(|n| format!("[`{n}`](#spark-bench-{n})"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.push_str(".\n\n## spark-bench\n\n```text\n");
    s.push_str(&cmd.render_long_help().to_string());
    s.push_str("```\n");
    for name in &names {
        let sub = cmd.find_subcommand_mut(name).expect("a listed subcommand");
        s.push_str(&format!("\n## spark-bench {name}\n\n```text\n"));
        s.push_str(&sub.render_long_help().to_string());
        s.push_str("```\n");
    }
    // Trailing spaces clap leaves on wrapped lines are not part of the text.
    s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n") + "\n"
}

#[test]
fn cli_reference_in_the_docs_is_generated_from_the_definitions() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md");
    let want = render();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(path, &want).unwrap();
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "docs/cli.md is stale: run `UPDATE_DOCS=1 cargo test --lib cli_reference`"
    );
    // Every subcommand has its section.
    for sub in [
        "run",
        "serve",
        "report",
        "compare",
        "calibrate",
        "record",
        "merge",
        "history",
    ] {
        assert!(have.contains(&format!("\n## spark-bench {sub}\n")), "{sub}");
    }
}
