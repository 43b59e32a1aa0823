//! What may leave the recording proxy: known API key formats (always), the user's
//! `--redact REGEX` patterns, and `--synthesize-text` (every message replaced by corpus text
//! of the same token length, so a shared scenario keeps its shape and loses its content).
//!
//! Owns: the key patterns and the replacement rules. Every string the recorder writes passes
//! through [`Privacy::clean`] (or [`Privacy::text`] for message text).

use regex::Regex;

use crate::rng::Rng;
use crate::sim::text;

/// What a redacted span becomes.
pub const REDACTED: &str = "[REDACTED]";

/// Key formats always redacted: OpenAI (`sk-…`, `sk-proj-…`), Anthropic (`sk-ant-…`), xAI,
/// Groq, Cerebras, and any `Bearer` token.
const KEY_PATTERNS: &[&str] = &[
    r"sk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_\-]{8,}",
    r"xai-[A-Za-z0-9_\-]{8,}",
    r"gsk_[A-Za-z0-9_\-]{8,}",
    r"csk-[A-Za-z0-9_\-]{8,}",
    r"(?i)bearer\s+[A-Za-z0-9._~+/=\-]{8,}",
    // Credentials in a URL's user-info.
    r"(?i)(?:https?|wss?)://[^/\s:@]+:[^/\s@]+@",
];

/// The recorder's privacy rules.
#[derive(Debug, Clone)]
pub struct Privacy {
    patterns: Vec<Regex>,
    synthesize: bool,
    seed: u64,
}

impl Privacy {
    /// The built-in key patterns plus `extra` (`--redact`); a bad pattern is an error naming it.
    pub fn new(extra: &[String], synthesize: bool, seed: u64) -> anyhow::Result<Privacy> {
        let mut patterns = Vec::new();
        for p in KEY_PATTERNS {
            patterns.push(Regex::new(p)?);
        }
        for p in extra {
            patterns.push(Regex::new(p).map_err(|e| {
                anyhow::anyhow!("--redact {p:?} is not a valid regular expression: {e}")
            })?);
        }
        Ok(Privacy {
            patterns,
            synthesize,
            seed,
        })
    }

    /// `s` with every key and `--redact` match replaced by a `[REDACTED…]` marker that keeps
    /// the text's token count (simulator rule), so a redacted prompt replays to the same
    /// input tokens.
    pub fn clean(&self, s: &str) -> String {
        let mut out = s.to_string();
        for re in &self.patterns {
            let mut pos = 0;
            while let Some(m) = re.find_at(&out, pos) {
                if m.as_str().is_empty() {
                    break;
                }
                let (start, end) = (m.start(), m.end());
                let repl = same_length_marker(&out[..start], m.as_str(), &out[end..]);
                out.replace_range(start..end, &repl);
                pos = start + repl.len();
                if pos >= out.len() {
                    break;
                }
            }
        }
        out
    }

    /// Message text as it may be written: with `--synthesize-text`, corpus text with the same
    /// number of tokens by the simulator's rule (`salt` picks the passage); else [`Self::clean`].
    pub fn text(&self, s: &str, salt: u64) -> String {
        if !self.synthesize {
            return self.clean(s);
        }
        synthesize(s, self.seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// Whether `--synthesize-text` is on.
    pub fn synthesizing(&self) -> bool {
        self.synthesize
    }
}

/// A marker for `secret` between `before` and `after` with the same total token count:
/// `[REDACTED]` grown one token at a time (`_rdc`) when the secret is longer, shorter
/// markers (`[R]`, `R-R`, `R]`, `R`, …) when it is shorter than `[REDACTED]`.
fn same_length_marker(before: &str, secret: &str, after: &str) -> String {
    let target = text::count(&format!("{before}{secret}{after}"));
    let with = |m: &str| text::count(&format!("{before}{m}{after}"));
    let mut first_over = None;
    for k in 0..=4096 {
        let m = format!("[REDACTED{}]", "_rdc".repeat(k));
        let n = with(&m);
        if n == target {
            return m;
        }
        if n > target {
            first_over = Some(m);
            break;
        }
    }
    // Short markers of 1 to 5 tokens, with and without a space joining a word before them.
    for m in ["[R]", "R-R", "R]", "R-", "R", "[R-R]", "R-R-", "R-R-R", "*"] {
        if with(m) == target {
            return m.to_string();
        }
    }
    first_over.unwrap_or_else(|| REDACTED.to_string())
}

/// Corpus text with exactly as many tokens as `s` (by the simulator's rule).
pub fn synthesize(s: &str, seed: u64) -> String {
    let n = text::count(s);
    if n == 0 {
        return String::new();
    }
    let style = text::Style::for_prompt(s);
    let mut rng = Rng::new(seed);
    let mut out = text::generate(&mut rng, n, style).concat();
    // Re-tokenising a generated passage can merge pieces at the corpus' wrap; trim or pad
    // with single-token words until the count is exact.
    let mut guard = 0;
    while text::count(&out) != n && guard < 10_000 {
        guard += 1;
        if text::count(&out) > n {
            out.pop();
        } else {
            out.push_str(" x");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_patterns_are_redacted_and_synthesis_keeps_the_token_count() {
        let p = Privacy::new(&["acme-[0-9]+".into()], false, 1).unwrap();
        let s = "key sk-proj-AbCdEf0123456789xyz and Bearer abc.def-123456 xai-0123456789abcdef \
                 gsk_0123456789abcdef csk-0123456789abcdef https://u:pw@host/v1 acme-42";
        let c = p.clean(s);
        assert_eq!(text::count(&c), text::count(s), "{c}");
        assert!(c.contains("REDACTED"));
        for bad in [
            "sk-proj", "abc.def", "xai-0", "gsk_0", "csk-0", "u:pw", "acme-42",
        ] {
            assert!(!c.contains(bad), "{bad} left in {c}");
        }
        assert!(Privacy::new(&["(".into()], false, 1).is_err());
        let prompt = "Fix the failing test in src/lib.rs; the key is sk-proj-zzzzzzzzzzzzzzzzzzzz.";
        let syn = synthesize(prompt, 7);
        assert_eq!(text::count(&syn), text::count(prompt));
        assert!(!syn.contains("sk-proj"));
        let q = Privacy::new(&[], true, 3).unwrap();
        assert_eq!(text::count(&q.text(prompt, 1)), text::count(prompt));
    }
}
