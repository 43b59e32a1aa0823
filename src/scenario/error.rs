//! Scenario errors that point at the file, line, column and key, and say how to fix it.
//!
//! toml/serde report a byte span and a terse message ("unknown field `think`, expected one
//! of …"); this turns them into "unknown key `think` in `[[turns]]` (entry 2) at
//! scenarios/x.toml:12:1; did you mean `think_time`?".

use std::ops::Range;
use std::path::PathBuf;

/// A scenario or targets file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read {}: {source}; check the path (scenarios live in scenarios/*.toml)", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid for the schema.
    #[error("{message} at {path}:{line}:{col}{}", hint.as_ref().map(|h| format!("; {h}")).unwrap_or_default())]
    Invalid {
        /// File path as given.
        path: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters).
        col: usize,
        /// The key involved, when known.
        key: Option<String>,
        /// What is wrong, with the table it is in.
        message: String,
        /// How to fix it.
        hint: Option<String>,
    },
}

/// 1-based (line, column) of a byte offset.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = src.get(..offset).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, col)
}

/// Levenshtein distance (for "did you mean").
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest candidate within a small distance (or sharing a prefix), if any.
pub fn suggest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| {
            *d <= (word.len().max(c.len()) / 3).max(2) || c.starts_with(word) || word.starts_with(c)
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The backquoted words of a serde message: "unknown field `a`, expected one of `b`, `c`".
fn backquoted(msg: &str) -> Vec<&str> {
    msg.split('`').skip(1).step_by(2).collect()
}

/// One line of a scenario's text, as a line scan sees it.
struct Line<'a> {
    text: &'a str,
    /// The table the line belongs to: its header (whitespace removed, `[[turns]]`) and entry
    /// number (1-based; always 1 for plain tables); `None` at the top level. A header line
    /// belongs to the table it opens.
    table: Option<(String, usize)>,
    header: bool,
    /// Inside a multi-line string (`"""` or `'''`): text, not TOML.
    in_string: bool,
}

/// Scans `src` line by line, following tables, array-of-tables entries and multi-line strings
/// (so a prompt that quotes `[[turns]]` or `agent.py` is not taken for TOML).
fn scan(src: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut table: Option<(String, usize)> = None;
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    let mut open: Option<&str> = None;
    for text in src.lines() {
        if let Some(delim) = open {
            out.push(Line {
                text,
                table: table.clone(),
                header: false,
                in_string: true,
            });
            if text.contains(delim) {
                open = None;
            }
            continue;
        }
        let t = text.trim_start();
        let header = t.starts_with('[');
        if header {
            let head: String = t
                .split('#')
                .next()
                .unwrap_or(t)
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            let entry = if head.starts_with("[[") {
                let n = counts.entry(head.clone()).or_default();
                *n += 1;
                *n
            } else {
                1
            };
            table = Some((head, entry));
        }
        out.push(Line {
            text,
            table: table.clone(),
            header,
            in_string: false,
        });
        // A multi-line string opened (and not closed) on this line.
        for delim in ["\"\"\"", "'''"] {
            if let Some(i) = text.find(delim) {
                if !text[i + 3..].contains(delim) {
                    open = Some(delim);
                }
                break;
            }
        }
    }
    out
}

/// The table header that governs byte `offset` (`[load]`, `[[turns]]`, `[targets.openai]`),
/// with the entry number for arrays of tables; `None` at the top level. A missing-key error
/// points at the header of the table that lacks the key, so a header line governs itself.
fn table_at(src: &str, offset: usize) -> Option<String> {
    let (line, _) = line_col(src, offset.min(src.len()));
    let (head, entry) = scan(src).into_iter().nth(line - 1)?.table?;
    if head.starts_with("[[") {
        Some(format!("{head} (entry {entry})"))
    } else {
        Some(head)
    }
}

/// Where `key` is set in a scenario's text: in the table `table` (`"[load]"`,
/// `"[[turns]]"`; `None` for the top level), entry `entry` (1-based, for arrays of tables).
/// Returns the key's line and column, or the table header's when the key is not written
/// there (a default, or a key set in a way this line scan does not follow); `None` when
/// neither is found.
pub fn locate(src: &str, table: Option<&str>, entry: usize, key: &str) -> Option<(usize, usize)> {
    let mut header_at = None;
    for (i, line) in scan(src).iter().enumerate() {
        let here = line.table.as_ref().map(|(h, n)| (h.as_str(), *n));
        let wanted = table.map(|t| (t, entry));
        if line.in_string || here != wanted {
            continue;
        }
        let t = line.text.trim_start();
        let col = line.text.len() - t.len() + 1;
        if line.header {
            header_at = Some((i + 1, col));
            continue;
        }
        if let Some(rest) = t.strip_prefix(key) {
            let rest = rest.trim_start();
            if rest.starts_with('=') || (rest.starts_with('.') && rest.contains('=')) {
                return Some((i + 1, col));
            }
        }
    }
    header_at
}

/// The key on the line of `offset` (`key = value`), if the offset is in the value part.
fn key_on_line(src: &str, offset: usize) -> Option<String> {
    let (line, _) = line_col(src, offset);
    let text = src.lines().nth(line - 1)?;
    let (k, _) = text.split_once('=')?;
    let k = k.trim().trim_matches('"');
    // For inline tables (`agent = { calls = "x" }`) the last `key =` before the value wins.
    let k = k.rsplit(['{', ',']).next().unwrap_or(k).trim();
    (!k.is_empty() && !k.starts_with('#')).then(|| k.to_string())
}

/// Turns a toml error into a located, hinted [`ScenarioError::Invalid`].
pub fn from_toml(path: &str, src: &str, err: &toml::de::Error) -> ScenarioError {
    let span: Range<usize> = err.span().unwrap_or(0..0);
    let (line, col) = line_col(src, span.start);
    let raw = err.message().trim().to_string();
    // A key missing from the root table comes with an empty span; from any other table,
    // with the table's span (its header onwards).
    let root_missing = raw.starts_with("missing field") && span.is_empty();
    let table = if root_missing {
        None
    } else {
        table_at(src, span.start)
    };
    let where_ = table
        .as_ref()
        .map_or_else(|| " at the top level".to_string(), |t| format!(" in {t}"));
    let words = backquoted(&raw);
    let (key, message, hint) = if raw.starts_with("unknown field") {
        let key = words.first().map(|s| s.to_string());
        let expected: Vec<&str> = words.iter().skip(1).copied().collect();
        let k = key.clone().unwrap_or_default();
        let hint = match suggest(&k, &expected) {
            Some(s) => Some(format!(
                "did you mean `{s}`? (known keys: {})",
                expected.join(", ")
            )),
            None if expected.is_empty() => Some("this table takes no keys".to_string()),
            None => Some(format!("known keys here: {}", expected.join(", "))),
        };
        (key, format!("unknown key `{k}`{where_}"), hint)
    } else if raw.starts_with("unknown variant") {
        let value = words.first().copied().unwrap_or("");
        let expected: Vec<&str> = words.iter().skip(1).copied().collect();
        let key = key_on_line(src, span.start);
        let hint = match suggest(value, &expected) {
            Some(s) => format!("did you mean `{s}`? (one of: {})", expected.join(", ")),
            None => format!("use one of: {}", expected.join(", ")),
        };
        let k = key.clone().unwrap_or_default();
        (
            key,
            format!("unknown value `{value}` for `{k}`{where_}"),
            Some(hint),
        )
    } else if raw.starts_with("missing field") {
        let k = words.first().copied().unwrap_or("").to_string();
        let hint = Some(format!("add `{k} = …` (see scenarios/README.md)"));
        (Some(k.clone()), format!("missing key `{k}`{where_}"), hint)
    } else if raw.starts_with("invalid type") {
        let key = key_on_line(src, span.start);
        let k = key.clone().unwrap_or_default();
        let hint = if raw.contains("duration") {
            Some("write durations as strings, e.g. \"3s\" or \"250ms\"".to_string())
        } else if raw.contains("expected u32")
            || raw.contains("expected u64")
            || raw.contains("integer") && raw.contains("expected u")
        {
            Some(format!(
                "write a whole number without quotes, e.g. `{k} = 2`"
            ))
        } else if raw.contains("expected a string") || raw.contains("expected a link") {
            Some(format!("quote the value, e.g. `{k} = \"…\"`"))
        } else if raw.contains("expected a boolean") {
            Some(format!("write `{k} = true` or `{k} = false`"))
        } else {
            None
        };
        (key, format!("bad value for `{k}`{where_}: {raw}"), hint)
    } else if raw.contains("bad duration") || raw.contains("invalid link spec") {
        let key = key_on_line(src, span.start);
        let k = key.clone().unwrap_or_default();
        (key, format!("bad value for `{k}`{where_}: {raw}"), None)
    } else {
        (key_on_line(src, span.start), format!("{raw}{where_}"), None)
    };
    ScenarioError::Invalid {
        path: path.to_string(),
        line,
        col,
        key,
        message,
        hint,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_suggestions() {
        let src = "a = 1\nbb = 2\n  ccc";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 6), (2, 1));
        assert_eq!(line_col(src, 15), (3, 3));
        assert_eq!(edit_distance("think", "think_time"), 5);
        assert_eq!(edit_distance("sesions", "sessions"), 1);
        assert_eq!(
            suggest("think", &["prompt", "think_time", "fault"]),
            Some("think_time")
        );
        assert_eq!(
            suggest("sesions", &["sessions", "concurrency"]),
            Some("sessions")
        );
        assert_eq!(suggest("zzz", &["sessions", "concurrency"]), None);
        assert_eq!(
            table_at("[load]\nx = 1\n[[turns]]\na=1\n[[turns]]\nb = 2", 40),
            Some("[[turns]] (entry 2)".into())
        );
    }
}
