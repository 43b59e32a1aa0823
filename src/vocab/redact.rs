//! Redaction of secrets from text that goes into results: an API key a server echoes back
//! (a 401 body, a refused WebSocket upgrade quoting the `Authorization` header, a response
//! id), a bearer token in any message, and `user:password@` in URLs.
//!
//! Owns: [`Secrets`], the one redaction set of a target (the exact values sent: the key as
//! sent and as read from the environment, credential-like header values, URL userinfo and
//! its base64), and [`Secrets::scrub`], the one function that removes them, whole or cut
//! off (any 8+ byte start of a secret), from a text; [`excerpt`], the cut every
//! server-derived text excerpt goes through (it never ends inside a token, so a key is
//! whole when the scrub sees it).
//! Does not own: what is secret for a target (`backend::request::secrets`) or where texts
//! are written (`driver::exchange` scrubs a record's server-derived texts, `store::manifest`
//! the stored scenario source and plan).

use std::fmt;

use base64::Engine as _;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not looked for (they would shred ordinary words).
const MIN_SECRET: usize = 4;

/// A text that starts like a secret for this many bytes (a key cut off by a length limit)
/// is redacted as far as it matches.
pub const PARTIAL_MIN: usize = 8;

/// How far past its limit [`excerpt`] may go to finish the token it would cut.
const TOKEN_SLACK: usize = 256;

/// A value kept out of results: never serialized, shown as `<withheld>` by `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Withheld(pub String);

impl fmt::Debug for Withheld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<withheld>")
    }
}

/// One redaction set: the exact secrets to remove from text. `Debug` shows only how many.
#[derive(Clone, Default)]
pub struct Secrets {
    list: Vec<String>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({})", self.list.len())
    }
}

impl Secrets {
    /// Adds `value` as it is and trimmed (a variable ending in a newline is sent trimmed);
    /// values under 4 bytes are ignored.
    pub fn add(&mut self, value: &str) {
        for v in [value, value.trim()] {
            if v.len() >= MIN_SECRET && !self.list.iter().any(|s| s == v) {
                self.list.push(v.to_string());
            }
        }
        // Longest first, so that a secret containing another is replaced whole.
        self.list.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// Adds a URL's `user:password` (or `user`): the whole, the password, and the base64
    /// of the whole (what `Basic` authentication would send).
    pub fn add_userinfo(&mut self, userinfo: &str) {
        self.add(userinfo);
        if let Some((_, password)) = userinfo.split_once(':') {
            self.add(password);
        }
        self.add(&base64::engine::general_purpose::STANDARD.encode(userinfo));
    }

    /// Adds every secret of `other`.
    pub fn extend(&mut self, other: &Secrets) {
        for s in &other.list {
            self.add(s);
        }
    }

    /// Nothing to look for.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// `text` with every secret, whole or cut off (a run of 8+ bytes matching a secret's
    /// start), every `Bearer <token>` / `Basic <token>` value and every URL's
    /// `user:password@` replaced by [`REDACTED`].
    pub fn scrub(&self, text: &str) -> String {
        redact_userinfo(&redact_auth_schemes(&self.remove(text)))
    }

    /// [`Self::scrub`] in place. A text it would give back unchanged (no start of a secret of
    /// the set, no `scheme://`, no `bearer ` or `basic ` in any case: a response id, an ALPN,
    /// most error messages) is kept as it is, without a copy.
    pub fn scrub_in_place(&self, text: &mut String) {
        if !self.leaves_alone(text) {
            *text = self.scrub(text);
        }
    }

    /// True only when [`Self::scrub`] gives `text` back unchanged (it may also be false then).
    fn leaves_alone(&self, text: &str) -> bool {
        let has_secret = self.list.iter().any(|s| text.contains(probe(s)));
        // Every scheme starts with a `b` (a test holds it): look at each `b` or `B` only.
        let b = text.as_bytes();
        let scheme = memchr::memchr2_iter(b'b', b'B', b).any(|i| {
            let rest = &b[i..];
            AUTH_SCHEMES.iter().any(|w| {
                rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w.as_bytes())
            })
        });
        !has_secret && !scheme && !text.contains("://")
    }

    /// `text` with every secret of the set, whole or cut off, replaced by [`REDACTED`] and
    /// nothing else touched (for text the user wrote, where `basic <word>` is prose).
    pub fn remove(&self, text: &str) -> String {
        let mut hits: Vec<(usize, usize)> = Vec::new();
        for s in &self.list {
            let probe = probe(s);
            let whole_only = s.len() < PARTIAL_MIN;
            for (start, _) in text.match_indices(probe) {
                let matched = common_prefix(&text.as_bytes()[start..], s.as_bytes());
                if whole_only && matched < s.len() {
                    continue;
                }
                let mut end = start + matched;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                hits.push((start, end));
            }
        }
        replace_ranges(text, hits)
    }
}

/// What [`Secrets::remove`] looks for of secret `s`: its first [`PARTIAL_MIN`] bytes (all of
/// a shorter one).
fn probe(s: &str) -> &str {
    prefix_of(s, PARTIAL_MIN.min(s.len()))
}

/// The first `n` bytes of `s`, widened to a character boundary.
fn prefix_of(s: &str, n: usize) -> &str {
    let mut n = n.min(s.len());
    while !s.is_char_boundary(n) {
        n += 1;
    }
    &s[..n]
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `text` with each of the (possibly overlapping) byte ranges replaced by one [`REDACTED`].
fn replace_ranges(text: &str, mut hits: Vec<(usize, usize)>) -> String {
    if hits.is_empty() {
        return text.to_string();
    }
    hits.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut i = 0;
    while i < hits.len() {
        let (start, mut end) = hits[i];
        while i + 1 < hits.len() && hits[i + 1].0 <= end {
            i += 1;
            end = end.max(hits[i].1);
        }
        out.push_str(&text[at..start.max(at)]);
        out.push_str(REDACTED);
        at = at.max(end);
        i += 1;
    }
    out.push_str(&text[at..]);
    out
}

/// The lossy text of `data` cut at about `limit` bytes: where the cut would fall inside a
/// token (a run without spaces or quotes, as a key is), it moves to the token's end (at
/// most 256 bytes further), so that a secret is never cut in two and [`Secrets::scrub`]
/// finds it whole. Every server-derived excerpt is taken with this.
pub fn excerpt(data: &[u8], limit: usize) -> String {
    let mut end = limit.min(data.len());
    let stop = (limit + TOKEN_SLACK).min(data.len());
    while end < stop && end > 0 && is_token_byte(data[end - 1]) && is_token_byte(data[end]) {
        end += 1;
    }
    String::from_utf8_lossy(&data[..end]).into_owned()
}

fn is_token_byte(b: u8) -> bool {
    !b.is_ascii_whitespace() && !b"\"'<>,;()[]{}".contains(&b)
}

/// `text` with every occurrence of each secret in `secrets` (those of 4+ bytes, and an
/// 8+ byte start of one), every `Bearer <token>` / `Basic <token>` value and every URL's
/// `user:password@` replaced by [`REDACTED`].
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut set = Secrets::default();
    for s in secrets {
        set.add(s);
    }
    set.scrub(text)
}

/// Every `user:password` (or `user`) in a `scheme://user:password@host` URL of `text`.
pub fn userinfos(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(p) = rest.find("://") {
        let tail = &rest[p + 3..];
        let auth_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"')
            .unwrap_or(tail.len());
        if let Some(at) = tail[..auth_end].rfind('@') {
            out.push(tail[..at].to_string());
        }
        rest = tail;
    }
    out
}

/// The HTTP authentication schemes whose token [`redact_auth_schemes`] replaces, lower case,
/// with the space after them.
const AUTH_SCHEMES: [&str; 2] = ["bearer ", "basic "];

/// Replaces the token after `Bearer ` / `Basic ` (any case) up to the next space, quote,
/// comma or bracket.
fn redact_auth_schemes(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let rest = &lower[i..];
        let hit = AUTH_SCHEMES
            .iter()
            .find(|p| rest.starts_with(*p))
            .map(|p| p.len());
        match hit {
            Some(n) if text[i + n..].starts_with(REDACTED) => {
                out.push_str(&text[i..i + n + REDACTED.len()]);
                i += n + REDACTED.len();
            }
            Some(n) => {
                out.push_str(&text[i..i + n]);
                let start = i + n;
                let end = text[start..]
                    .find(|c: char| c.is_whitespace() || "\"',;)]}<>\\".contains(c))
                    .map_or(text.len(), |e| start + e);
                if end > start {
                    out.push_str(REDACTED);
                }
                i = end;
            }
            None => {
                let c = text[i..].chars().next().unwrap_or(' ');
                out.push(c);
                i += c.len_utf8().max(1);
            }
        }
    }
    out
}

/// Replaces the `user:password@` (or `user@`) of every `scheme://…` URL in `text`.
pub fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(p) = rest.find("://") {
        let (head, tail) = rest.split_at(p + 3);
        out.push_str(head);
        let auth_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"')
            .unwrap_or(tail.len());
        match tail[..auth_end].rfind('@') {
            Some(at) => {
                out.push_str(REDACTED);
                out.push('@');
                rest = &tail[at + 1..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// `url` without its `user:password@`, and whether it had one. The transport never sends
/// URL credentials (keys go in `api_key_env`), so nothing is lost by dropping them.
pub fn strip_userinfo(url: &str) -> (String, bool) {
    let Some(p) = url.find("://") else {
        return (url.to_string(), false);
    };
    let tail = &url[p + 3..];
    let auth_end = tail.find(['/', '?', '#']).unwrap_or(tail.len());
    match tail[..auth_end].rfind('@') {
        Some(at) => (format!("{}{}", &url[..p + 3], &tail[at + 1..]), true),
        None => (url.to_string(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_keys_bearer_tokens_and_url_credentials_are_removed() {
        let key = "sk-test-0123456789abcdef";
        let body = format!(
            r#"{{"error":"invalid key {key}","auth":"Bearer {key}"}} via http://bob:hunter2@proxy:3128/v1"#
        );
        let r = redact(&body, &[key]);
        assert!(!r.contains(key), "{r}");
        assert!(!r.contains("hunter2") && !r.contains("bob:"), "{r}");
        assert!(r.contains("http://[redacted]@proxy:3128/v1"), "{r}");
        assert!(r.contains("\"auth\":\"Bearer [redacted]\""), "{r}");
        // A token we were not told about, after Bearer, goes too; other text stays.
        let r = redact(
            "header was 'Authorization: Bearer abc.def-123' (refused)",
            &[],
        );
        assert_eq!(r, "header was 'Authorization: Bearer [redacted]' (refused)");
        assert_eq!(
            redact("no secrets here ünïcode", &[key]),
            "no secrets here ünïcode"
        );
        // Too short to be a key: not replaced (it would shred ordinary words).
        assert_eq!(redact("abc", &["abc"]), "abc");
    }

    #[test]
    fn a_set_redacts_raw_and_trimmed_values_whole_or_cut_off() {
        let mut set = Secrets::default();
        set.add("sk-h2probe-SECRET-0123\n");
        set.add_userinfo("bob:hunter2-pw");
        set.add("abc"); // too short: ignored
                        // The trimmed key (what was sent) and the raw value both go.
        assert_eq!(set.scrub("id=sk-h2probe-SECRET-0123\n!"), "id=[redacted]!");
        // Cut off at a limit: an 8+ byte start goes as far as it matches.
        assert_eq!(set.scrub("key sk-h2probe-SECR"), "key [redacted]");
        assert_eq!(set.scrub("key sk-h2pr"), "key sk-h2pr");
        // In place: what scrub gives, and a text it leaves alone is not rewritten (its scan
        // for a scheme looks at each `b` only).
        assert!(AUTH_SCHEMES.iter().all(|s| s.starts_with('b')));
        for text in [
            "id=sk-h2probe-SECRET-0123\n!",
            "key sk-h2probe-SECR",
            "key sk-h2pr",
            "resp_0123456789abcdef",
            "h2",
            "refused: BEARER abc.def",
            "via https://bob@proxy/",
            "basic",
            "hunter2-pw",
        ] {
            let mut t = text.to_string();
            set.scrub_in_place(&mut t);
            assert_eq!(t, set.scrub(text), "{text}");
            assert_eq!(set.leaves_alone(text), t == text, "{text}");
        }
        // URL userinfo: the whole, the password, its base64.
        let b64 = base64::engine::general_purpose::STANDARD.encode("bob:hunter2-pw");
        let r = set.remove(&format!("pw hunter2-pw basic {b64} abc"));
        assert_eq!(r, "pw [redacted] basic [redacted] abc");
        assert!(format!("{set:?}").starts_with("Secrets("));
        assert_eq!(format!("{:?}", Withheld("x".into())), "<withheld>");
    }

    #[test]
    fn excerpts_never_end_inside_a_token() {
        let body = format!("{} sk-0123456789abcdef rest", "x".repeat(10));
        // A cut at 15 bytes moves to the key's end, so the scrub sees it whole.
        assert_eq!(
            excerpt(body.as_bytes(), 15),
            format!("{} sk-0123456789abcdef", "x".repeat(10))
        );
        assert_eq!(excerpt(b"ab cd", 3), "ab ");
        assert_eq!(excerpt(b"short", 300), "short");
        // A token longer than the slack is still cut (the 8-byte rule catches it).
        let long = "k".repeat(1000);
        assert_eq!(excerpt(long.as_bytes(), 10).len(), 10 + TOKEN_SLACK);
        assert_eq!(
            userinfos("a http://u:p@h/x and https://h2/ ws://v@h3"),
            vec!["u:p".to_string(), "v".to_string()]
        );
    }

    #[test]
    fn strip_userinfo_keeps_the_rest() {
        assert_eq!(
            strip_userinfo("https://u:p@api.example.com:8443/v1"),
            ("https://api.example.com:8443/v1".to_string(), true)
        );
        assert_eq!(
            strip_userinfo("https://api.example.com/v1/a@b"),
            ("https://api.example.com/v1/a@b".to_string(), false)
        );
        assert_eq!(
            redact_userinfo("ws://x@h/p and https://h2/"),
            "ws://[redacted]@h/p and https://h2/"
        );
    }
}
