//! Scenario files: the TOML schema and loading, data only.
//!
//! Owns: reading `scenarios/*.toml` and `targets/*.toml` into typed values, errors that
//! point at `file:line:col` with the key and a fix, and the `[load]` knobs type that the
//! `run` flags share (`knobs`).
//! Does not own: defaults that depend on other fields, validation across fields, built-in
//! targets or seeds (all in `plan`), and anything environmental (DNS, clocks, API keys).

mod error;
mod knobs;
mod schema;
mod workload;

use crate::vocab::input::{read_text, MAX_WHOLE_FILE_BYTES};
use std::path::Path;

pub use error::{edit_distance, line_col, locate, suggest, ScenarioError};
pub use knobs::LoadKnobs;
pub use schema::{
    AgentSpec, Dur, LinkSpec, MatrixSpec, Scenario, SloSpec, TargetSpec, TargetsFile, ToolCallSpec,
    TurnSpec,
};
pub use workload::{DatasetFormat, DatasetSource, DistKind, DistSpec, WorkloadSpec};

/// A scenario file as read: the parsed scenario, its path and its exact bytes (the plan
/// hashes them, and the manifest keeps the text).
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    /// The parsed scenario.
    pub scenario: Scenario,
    /// The path as given.
    pub path: String,
    /// The file's text.
    pub source: String,
}

/// Parses scenario text; `path` is only used in error messages.
pub fn parse(path: &str, text: &str) -> Result<Scenario, ScenarioError> {
    toml::from_str(text).map_err(|e| error::from_toml(path, text, &e))
}

/// Parses a `--targets FILE` text.
pub fn parse_targets(path: &str, text: &str) -> Result<TargetsFile, ScenarioError> {
    let mut file: TargetsFile =
        toml::from_str(text).map_err(|e| error::from_toml(path, text, &e))?;
    file.path = path.to_string();
    Ok(file)
}

/// The largest `[workload] dataset` file read (1 GiB; ShareGPT's largest public file is
/// about 650 MB).
pub const MAX_DATASET_BYTES: u64 = 1 << 30;

/// Reads and parses a scenario file (a regular file of at most
/// [`MAX_WHOLE_FILE_BYTES`]), and the `[workload] dataset` it names (relative to the
/// scenario's folder), so that the plan builder stays free of I/O.
pub fn load(path: &Path) -> Result<LoadedScenario, ScenarioError> {
    let source = read(path)?;
    let shown = path.display().to_string();
    let mut scenario = parse(&shown, &source)?;
    if let Some(w) = scenario.workload.as_mut() {
        if let Some(name) = w.dataset.as_deref().filter(|d| !d.trim().is_empty()) {
            let file = path.parent().unwrap_or(Path::new("")).join(name);
            let text = read_text(&file, MAX_DATASET_BYTES).map_err(|e| {
                let (line, col) = locate(&source, Some("[workload]"), 1, "dataset").unwrap_or((1, 1));
                ScenarioError::Invalid {
                    path: shown.clone(),
                    line,
                    col,
                    key: Some("dataset".into()),
                    message: format!(
                        "cannot read the [workload] dataset {} ({e})",
                        file.display()
                    ),
                    hint: Some(
                        "the path is relative to the scenario file's folder, e.g. dataset = \"data/sample-sharegpt.jsonl\"".into(),
                    ),
                }
            })?;
            w.dataset_source = Some(DatasetSource {
                path: file.display().to_string(),
                text,
            });
        }
    }
    Ok(LoadedScenario {
        scenario,
        path: shown,
        source,
    })
}

/// Reads and parses a `--targets FILE`.
pub fn load_targets(path: &Path) -> Result<TargetsFile, ScenarioError> {
    parse_targets(&path.display().to_string(), &read(path)?)
}

fn read(path: &Path) -> Result<String, ScenarioError> {
    read_text(path, MAX_WHOLE_FILE_BYTES).map_err(|source| ScenarioError::Read {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse("scenarios/x.toml", text).unwrap_err().to_string()
    }

    #[test]
    fn unknown_key_names_table_location_and_suggestion() {
        let e = err("name = \"x\"\n\n[[turns]]\nprompt = \"hi\"\n\n[[turns]]\nprompt = \"again\"\nthink = \"3s\"\n");
        assert!(e.starts_with("unknown key `think` in [[turns]] (entry 2) at scenarios/x.toml:8:1; did you mean `think_time`?"), "{e}");
        let e = err("name = \"x\"\n[load]\nsesions = 2\n");
        assert!(
            e.contains(
                "unknown key `sesions` in [load] at scenarios/x.toml:3:1; did you mean `sessions`?"
            ),
            "{e}"
        );
        let e = err("nme = \"x\"\n");
        assert!(
            e.contains("at the top level at scenarios/x.toml:1:1; did you mean `name`?"),
            "{e}"
        );
    }

    #[test]
    fn bad_duration_shows_an_example() {
        let e = err("name = \"x\"\n[[turns]]\nprompt = \"hi\"\nthink_time = \"three seconds\"\n");
        assert!(
            e.contains("bad value for `think_time` in [[turns]] (entry 1)"),
            "{e}"
        );
        assert!(e.contains("scenarios/x.toml:4:14"), "{e}");
        assert!(e.contains("\"1.5s\""), "{e}");
        let e = err("name = \"x\"\n[[turns]]\nprompt = \"hi\"\nthink_time = 3\n");
        assert!(
            e.contains("scenarios/x.toml:4:14")
                && e.contains("write durations as strings, e.g. \"3s\""),
            "{e}"
        );
    }

    #[test]
    fn bad_type_and_bad_variant() {
        let e = err("name = \"x\"\n[load]\nsessions = \"two\"\n");
        assert!(
            e.contains("bad value for `sessions` in [load]") && e.contains("scenarios/x.toml:3:12"),
            "{e}"
        );
        assert!(
            e.contains("write a whole number without quotes, e.g. `sessions = 2`"),
            "{e}"
        );
        let e = err("name = \"x\"\n[matrix]\ntransports = [\"http\", \"websocket\"]\n");
        assert!(
            e.contains("unknown value `websocket` for `transports` in [matrix]")
                && e.contains("x.toml:3:23"),
            "{e}"
        );
        assert!(
            e.contains("use one of: http, http-pooled, http2, ws") || e.contains("did you mean"),
            "{e}"
        );
        let e = err("name = \"x\"\nlink = \"rtt=fast\"\n");
        assert!(
            e.contains("bad value for `link`")
                && e.contains("x.toml:2:8")
                && e.contains("rtt=40ms"),
            "{e}"
        );
    }

    #[test]
    fn missing_key_and_unknown_key_in_inline_table() {
        let e = err("[[turns]]\nprompt = \"hi\"\n");
        assert!(
            e.contains("missing key `name`") && e.contains("add `name = …`"),
            "{e}"
        );
        let e = err("name = \"x\"\n[[turns]]\nprompt = \"hi\"\nagent = { calls = 3, tools = [\"a\"], tool_tme = \"1s\" }\n");
        assert!(
            e.contains("unknown key `tool_tme` in [[turns]] (entry 1) at scenarios/x.toml:4:"),
            "{e}"
        );
        assert!(e.contains("did you mean `tool_time`?"), "{e}");
    }

    #[test]
    fn a_missing_key_names_the_table_that_lacks_it() {
        let e =
            err("name = \"x\"\n[matrix]\ntransports = [\"ws\"]\n[[turns]]\nthink_time = \"1s\"\n");
        assert!(
            e.starts_with("missing key `prompt` in [[turns]] (entry 1) at scenarios/x.toml:4:1"),
            "{e}"
        );
        let e = err("name = \"x\"\n[[turns]]\nprompt = \"a\"\n[[turns]]\nthink_time = \"1s\"\n");
        assert!(
            e.starts_with("missing key `prompt` in [[turns]] (entry 2) at scenarios/x.toml:4:1"),
            "{e}"
        );
        let e = err("[[turns]]\nthink_time = \"1s\"\n");
        assert!(
            e.starts_with("missing key `prompt` in [[turns]] (entry 1) at scenarios/x.toml:1:1"),
            "{e}"
        );
        let e = err("[[turns]]\nprompt = \"hi\"\n");
        assert!(e.starts_with("missing key `name` at the top level"), "{e}");
    }

    fn readme() -> String {
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/README.md"))
            .unwrap()
    }

    /// The known keys of a table, read from the error for an unknown key.
    fn known_keys(text: &str) -> Vec<String> {
        let e = err(text);
        let list = e
            .split("known keys")
            .nth(1)
            .unwrap_or_else(|| panic!("{e}"));
        let list = list.trim_start_matches(" here").trim_start_matches(": ");
        list.trim_end_matches(')')
            .split(", ")
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn readme_documents_every_key_and_its_example_parses() {
        let doc = readme();
        let t = "[[turns]]\nprompt = \"p\"\n";
        let tables = [
            "name = \"x\"\nzzz = 1\n".to_string(),
            "name = \"x\"\n[load]\nzzz = 1\n".to_string(),
            "name = \"x\"\n[matrix]\nzzz = 1\n".to_string(),
            "name = \"x\"\n[[turns]]\nzzz = 1\n".to_string(),
            format!("name = \"x\"\n{t}tool_calls = [{{ name = \"a\", zzz = 1 }}]\n"),
            format!("name = \"x\"\n{t}agent = {{ calls = 1, tools = [\"a\"], zzz = 1 }}\n"),
            "name = \"x\"\n[targets.a]\nzzz = 1\n".to_string(),
            "name = \"x\"\n[workload]\nzzz = 1\n".to_string(),
            "name = \"x\"\n[workload]\ninput_tokens = { dist = \"fixed\", zzz = 1 }\n".to_string(),
            "name = \"x\"\n[slo]\nzzz = 1\n".to_string(),
        ];
        let mut checked = 0;
        for text in &tables {
            for key in known_keys(text) {
                let documented = [
                    format!("| `{key}` |"),
                    format!("## `[{key}]`"),
                    format!("## `[[{key}]]`"),
                    format!("## `[{key}.NAME]`"),
                ];
                assert!(
                    documented.iter().any(|d| doc.contains(d.as_str())),
                    "scenarios/README.md does not document `{key}`"
                );
                checked += 1;
            }
        }
        assert!(checked > 30, "{checked}");
        let example = doc
            .split("```toml\n")
            .nth(1)
            .unwrap()
            .split("```")
            .next()
            .unwrap();
        // That it also builds into a plan is checked in `plan::build`'s tests.
        parse("README example", example).unwrap();
    }
}
