//! A strict reader of the text expositions [`super::openmetrics`] writes: checks the
//! structure (families declared once by `# TYPE`, each sample under its family with a suffix
//! its type allows, `# UNIT` matching the name's suffix, labels and values well formed,
//! `# EOF` last and only in OpenMetrics) and returns the samples, so tests, the CI step and
//! users can read a `metrics.om` or a `/metrics` scrape back.
//!
//! Owns: that check. Does not own: the exposition (see `openmetrics`); it is not a general
//! OpenMetrics parser (no exemplars, timestamps or histograms, which spark-bench never writes).

use std::collections::BTreeMap;

use super::openmetrics::Format;

/// One sample read back: full name (with suffix), labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSample {
    /// The sample's name, e.g. `spark_bench_ttft_seconds_count`.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// Reads `text` in `format`; an error names the line and what is wrong with it.
pub fn parse(text: &str, format: Format) -> Result<Vec<ParsedSample>, String> {
    let om = format == Format::OpenMetrics;
    let mut families: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut samples = Vec::new();
    let mut eof = false;
    for (i, line) in text.lines().enumerate() {
        let at = |why: String| format!("line {}: {why}: {line:?}", i + 1);
        if eof {
            return Err(at("text after # EOF".into()));
        }
        if line == "# EOF" {
            if !om {
                return Err(at("# EOF in the 0.0.4 text format".into()));
            }
            eof = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (word, name, arg) = (parts.next(), parts.next(), parts.next());
            let (Some(word), Some(name), Some(arg)) = (word, name, arg) else {
                return Err(at(
                    "a comment line needs a keyword, a name and a value".into()
                ));
            };
            check_name(name).map_err(&at)?;
            match word {
                "TYPE" => {
                    let allowed: &[&str] = if om {
                        &[
                            "counter",
                            "gauge",
                            "summary",
                            "info",
                            "histogram",
                            "unknown",
                        ]
                    } else {
                        &["counter", "gauge", "summary", "histogram", "untyped"]
                    };
                    if !allowed.contains(&arg) {
                        return Err(at(format!("unknown type {arg:?}")));
                    }
                    if families.insert(name.to_string(), arg.to_string()).is_some() {
                        return Err(at(format!("family {name} declared twice")));
                    }
                    current = Some((name.to_string(), arg.to_string()));
                }
                "UNIT" => {
                    if !om {
                        return Err(at("# UNIT in the 0.0.4 text format".into()));
                    }
                    if current.as_ref().map(|c| c.0.as_str()) != Some(name) {
                        return Err(at("# UNIT for a family other than the current one".into()));
                    }
                    if !name.ends_with(&format!("_{arg}")) {
                        return Err(at(format!("the name does not end with its unit _{arg}")));
                    }
                }
                "HELP" => {
                    if current.as_ref().map(|c| c.0.as_str()) != Some(name) {
                        return Err(at("# HELP for a family other than the current one".into()));
                    }
                }
                _ => return Err(at(format!("unknown comment keyword {word:?}"))),
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            return Err(at("empty line or bare comment".into()));
        }
        let s = sample(line).map_err(&at)?;
        let Some((family, kind)) = &current else {
            return Err(at("a sample before any # TYPE".into()));
        };
        let suffixes: &[&str] = match (kind.as_str(), om) {
            ("counter", true) => &["_total", "_created"],
            ("summary", _) => &["", "_sum", "_count", "_created"],
            ("info", _) => &["_info"],
            _ => &[""],
        };
        let belongs = suffixes
            .iter()
            .any(|suf| s.name.strip_suffix(suf) == Some(family.as_str()));
        if !belongs {
            return Err(at(format!(
                "sample {} is not of family {family} ({kind})",
                s.name
            )));
        }
        if kind == "summary" && s.name == *family && !s.labels.contains_key("quantile") {
            return Err(at(
                "a summary's quantile sample without a quantile label".into()
            ));
        }
        samples.push(s);
    }
    if om && !eof {
        return Err("no # EOF at the end of an OpenMetrics exposition".into());
    }
    Ok(samples)
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if ok {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

/// `name{k="v",…} value`.
fn sample(line: &str) -> Result<ParsedSample, String> {
    let name_end = line.find(['{', ' ']).ok_or("a sample needs a value")?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(r) = rest.strip_prefix('{') {
        rest = r;
        loop {
            if let Some(r) = rest.strip_prefix('}') {
                rest = r;
                break;
            }
            let eq = rest.find('=').ok_or("a label without =")?;
            let key = &rest[..eq];
            check_name(key).map_err(|e| format!("label: {e}"))?;
            let (value, r) = quoted(
                rest[eq + 1..]
                    .strip_prefix('"')
                    .ok_or("unquoted label value")?,
            )?;
            if labels.insert(key.to_string(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            rest = r.strip_prefix(',').unwrap_or(r);
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().map_err(|_| format!("bad value {v:?}"))?,
    };
    Ok(ParsedSample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// The rest of a quoted label value (after its opening quote): the unescaped value and what
/// follows the closing quote.
fn quoted(s: &str) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &s[i + 1..])),
            '\\' => match chars.next().map(|(_, c)| c) {
                Some('\\') => out.push('\\'),
                Some('"') => out.push('"'),
                Some('n') => out.push('\n'),
                other => return Err(format!("bad escape \\{other:?} in a label value")),
            },
            '\n' => return Err("a newline in a label value".into()),
            c => out.push(c),
        }
    }
    Err("an unterminated label value".into())
}

/// The value of the one sample named `name` whose labels include every pair of `labels`.
pub fn value(samples: &[ParsedSample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}
