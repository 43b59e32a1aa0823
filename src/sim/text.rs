//! The simulator's tokenizer and text generator.
//!
//! Owns: the rule that turns text into tokens (~4 characters per token, whitespace-aware),
//! token counts for prompts, and drawing output text from the corpus.
//! Does not own: timing (see `model`) or the corpus itself (see `corpus`).
//!
//! The rule, applied left to right: a newline is one token; a run of spaces/tabs longer than
//! one character becomes tokens of at most four characters; a single space sticks to the word
//! that follows; a word (letters, digits, `_`) is cut into pieces of at most four characters;
//! any other character is a token of its own. Concatenating the tokens gives back the text.

use std::sync::OnceLock;

use crate::rng::Rng;

use super::corpus;

/// Splits `text` into tokens by the simulator's rule.
pub fn tokenize(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes: Vec<(usize, char)> = text.char_indices().collect();
    let end_of = |i: usize| bytes.get(i).map(|(b, _)| *b).unwrap_or(text.len());
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let c = bytes[i].1;
        if c == '\n' {
            i += 1;
        } else if c == ' ' || c == '\t' {
            let mut j = i;
            while j < bytes.len() && (bytes[j].1 == ' ' || bytes[j].1 == '\t') {
                j += 1;
            }
            if j - i == 1 && j < bytes.len() && is_word(bytes[j].1) {
                // A single space joins the first piece of the following word.
                i = j;
                let mut n = 0;
                while i < bytes.len() && is_word(bytes[i].1) && n < 4 {
                    i += 1;
                    n += 1;
                }
            } else {
                i += (j - i).min(4);
            }
        } else if is_word(c) {
            let mut n = 0;
            while i < bytes.len() && is_word(bytes[i].1) && n < 4 {
                i += 1;
                n += 1;
            }
        } else {
            i += 1;
        }
        out.push(&text[bytes[start].0..end_of(i)]);
    }
    out
}

/// Number of tokens in `text`.
pub fn count(text: &str) -> u32 {
    tokenize(text).len() as u32
}

/// Which corpus to draw from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Code with a little explanation.
    Code,
    /// Plain prose.
    Prose,
}

impl Style {
    /// Code for prompts that look like programming requests, prose otherwise.
    pub fn for_prompt(prompt: &str) -> Style {
        let p = prompt.to_ascii_lowercase();
        const HINTS: [&str; 16] = [
            "code",
            "function",
            "write",
            "implement",
            "rust",
            "python",
            "javascript",
            "fn ",
            "def ",
            "class",
            "bug",
            "fix",
            "test",
            "script",
            "program",
            "snake",
        ];
        if p.trim().is_empty() || HINTS.iter().any(|h| p.contains(h)) {
            Style::Code
        } else {
            Style::Prose
        }
    }
}

fn corpus_tokens(style: Style) -> &'static [String] {
    static CODE: OnceLock<Vec<String>> = OnceLock::new();
    static PROSE: OnceLock<Vec<String>> = OnceLock::new();
    let (cell, text) = match style {
        Style::Code => (&CODE, corpus::CODE),
        Style::Prose => (&PROSE, corpus::PROSE),
    };
    cell.get_or_init(|| tokenize(text).into_iter().map(str::to_string).collect())
}

/// Draws exactly `n` output tokens, starting at a seeded line start in the corpus and
/// wrapping around it as often as needed.
pub fn generate(rng: &mut Rng, n: u32, style: Style) -> Vec<String> {
    let toks = corpus_tokens(style);
    if toks.is_empty() || n == 0 {
        return Vec::new();
    }
    // Line starts are the tokens right after a newline; start at one of them.
    let starts: Vec<usize> = std::iter::once(0)
        .chain((1..toks.len()).filter(|&i| toks[i - 1] == "\n"))
        .collect();
    let mut pos = starts[rng.below(starts.len() as u64) as usize];
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        out.push(toks[pos].clone());
        pos = (pos + 1) % toks.len();
    }
    out
}

/// The arguments of a simulated function call, as a JSON string and its tokens. Every draw
/// has the same token length for a given function (paths of five tokens, patterns of two),
/// so a replay of a recorded session reproduces its token counts exactly.
pub fn tool_arguments(rng: &mut Rng, function: &str) -> Vec<String> {
    const PATHS: [&str; 4] = ["src/main.rs", "lib/game.py", "src/util.js", "docs/api.md"];
    const PATTERNS: [&str; 4] = ["fn_main", "def_step", "debounce", "TODO_fix"];
    let path = PATHS[rng.below(PATHS.len() as u64) as usize];
    let pattern = PATTERNS[rng.below(PATTERNS.len() as u64) as usize];
    let args = serde_json::json!({
        "path": path,
        "pattern": pattern,
        "reason": format!("{function} needs the lines around {pattern}"),
    })
    .to_string();
    tokenize(&args).into_iter().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_concatenate_back_and_average_a_few_chars() {
        for text in [corpus::CODE, corpus::PROSE, "  héllo,\n\tworld  ", ""] {
            let t = tokenize(text);
            assert_eq!(t.concat(), text);
            assert!(t.iter().all(|s| !s.is_empty()));
        }
        let t = tokenize(corpus::PROSE);
        let avg = corpus::PROSE.len() as f64 / t.len() as f64;
        assert!((3.0..5.0).contains(&avg), "{avg} chars per token");
        assert_eq!(
            tokenize("fn main() {"),
            vec!["fn", " main", "(", ")", " ", "{"]
        );
    }

    #[test]
    fn generation_is_seeded_and_exact_in_length() {
        let a = generate(&mut Rng::new(3), 5000, Style::Code);
        let b = generate(&mut Rng::new(3), 5000, Style::Code);
        assert_eq!(a.len(), 5000);
        assert_eq!(a, b);
        assert_eq!(Style::for_prompt("Write a snake game"), Style::Code);
        assert_eq!(Style::for_prompt("Why is the sky blue?"), Style::Prose);
        let args = tool_arguments(&mut Rng::new(1), "grep").concat();
        assert!(serde_json::from_str::<serde_json::Value>(&args).is_ok());
        let lens: std::collections::BTreeSet<usize> = (0..200)
            .map(|s| tool_arguments(&mut Rng::new(s), "read_file").len())
            .collect();
        assert_eq!(lens.len(), 1, "tool argument lengths {lens:?}");
    }
}
