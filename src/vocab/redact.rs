//! Redaction of secrets from text that goes into results: an API key a server echoes back
//! (a 401 body, a refused WebSocket upgrade quoting the `Authorization` header), a bearer
//! token in any message, and `user:password@` in URLs.
//!
//! Applied where text enters a record (the driver's `exchange` sets `RequestRecord::error`
//! through [`redact`]) and where a base URL enters the plan ([`strip_userinfo`]), so
//! `requests.csv`, `timeline.json` and `manifest.json` never hold them.

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// `text` with every occurrence of each secret in `secrets` (those of 4+ bytes), every
/// `Bearer <token>` / `Basic <token>` value and every URL's `user:password@` replaced by
/// [`REDACTED`].
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        if out.contains(*s) {
            out = out.replace(*s, REDACTED);
        }
    }
    out = redact_auth_schemes(&out);
    redact_userinfo(&out)
}

/// Replaces the token after `Bearer ` / `Basic ` (any case) up to the next space, quote,
/// comma or bracket.
fn redact_auth_schemes(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let rest = &lower[i..];
        let hit = ["bearer ", "basic "]
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
