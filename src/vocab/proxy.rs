//! An HTTP proxy's URL, parsed once: `http://[user:pass@]host[:port]`. The plan checks a
//! target's `proxy` key with it; the transport tunnels through it (`transport::proxy`).
//! Credentials are kept for `Proxy-Authorization: Basic` and appear nowhere else: not in
//! `Debug`, not in [`Proxy::url`], not in any error; [`Proxy::secrets`] is what of them a
//! text must be scrubbed of (a proxy or a server may echo them).

use base64::Engine as _;

/// The port of a proxy URL without one (curl's default).
pub const DEFAULT_PROXY_PORT: u16 = 1080;

/// An HTTP proxy reached over plain TCP.
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    host: String,
    port: u16,
    /// `Basic …`, from the URL's `user:pass@`.
    authorization: Option<String>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("url", &self.url())
            .field("credentials", &self.authorization.is_some())
            .finish()
    }
}

impl Proxy {
    /// Parses `[http://][user:pass@]host[:port][/]`. Errors never contain the value (it
    /// may hold a password); `what` names where it came from (`HTTPS_PROXY`, `proxy`).
    pub fn parse(url: &str, what: &str) -> Result<Proxy, String> {
        let url = url.trim();
        let rest = match url.split_once("://") {
            None => url,
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => {
                return Err(format!(
                    "{what}: an https:// proxy (TLS to the proxy) is not supported; use the proxy's http:// address (the tunnel to the target is still TLS)"
                ))
            }
            Some((scheme, _)) => {
                let scheme = if scheme.len() <= 10 && scheme.chars().all(|c| c.is_ascii_alphanumeric()) {
                    scheme
                } else {
                    "?"
                };
                return Err(format!(
                    "{what}: proxy scheme {scheme:?} is not supported; only http:// proxies (HTTP CONNECT) are"
                ));
            }
        };
        let authority = match rest.split_once('/') {
            Some((a, "")) => a,
            Some(_) => {
                return Err(format!(
                    "{what}: a proxy URL has no path; write it as http://host:port"
                ))
            }
            None => rest,
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = split_host_port(hostport)
            .ok_or_else(|| format!("{what}: not a proxy URL; write it as http://host:port"))?;
        if host.is_empty() {
            return Err(format!(
                "{what}: the proxy URL has no host; write it as http://host:port"
            ));
        }
        // A host name (letters, digits, '-', '_', '.') or an IP literal; anything else
        // ("not a url", a stray quote) is a configuration error here, not a DNS error per
        // request later.
        let name_like = host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !name_like && host.parse::<std::net::IpAddr>().is_err() {
            return Err(format!(
                "{what}: the proxy URL's host is not a host name or an IP address; write it as http://host:port"
            ));
        }
        let authorization = match userinfo {
            None => None,
            Some(u) => {
                let (user, pass) = u.split_once(':').unwrap_or((u, ""));
                let plain = format!("{}:{}", percent_decode(user), percent_decode(pass));
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(plain)
                ))
            }
        };
        Ok(Proxy {
            host: host.to_ascii_lowercase(),
            port: port.unwrap_or(DEFAULT_PROXY_PORT),
            authorization,
        })
    }

    /// Host name or IP literal (no brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// True when the URL carried `user:pass@`.
    pub fn has_credentials(&self) -> bool {
        self.authorization.is_some()
    }

    /// `http://host:port`, without credentials: safe to show and to write.
    pub fn url(&self) -> String {
        format!("http://{}", authority(&self.host, self.port))
    }

    /// The proxy's credentials as a redaction set: the `Basic` token as sent, and the
    /// `user:password` it encodes (whole, the password, and its base64); empty without.
    pub fn secrets(&self) -> crate::vocab::redact::Secrets {
        let mut s = crate::vocab::redact::Secrets::default();
        if let Some(token) = self
            .authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Basic "))
        {
            s.add(token);
            if let Ok(plain) = base64::engine::general_purpose::STANDARD.decode(token) {
                s.add_userinfo(&String::from_utf8_lossy(&plain));
            }
        }
        s
    }

    /// The `Proxy-Authorization` header value (`Basic …`), when the URL carried credentials.
    pub fn authorization(&self) -> Option<&str> {
        self.authorization.as_deref()
    }

    /// A target's `proxy` setting: `"none"` is `Ok(None)`, a URL is its proxy. Credentials
    /// are refused: files end up in the results (the manifest keeps the scenario), so a
    /// password belongs in `HTTPS_PROXY`/`HTTP_PROXY`.
    pub fn from_target_setting(value: &str) -> Result<Option<Proxy>, String> {
        let value = value.trim();
        if value.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        let p = Proxy::parse(value, "proxy")?;
        if p.has_credentials() {
            return Err("the proxy URL carries user:password@, and credentials must not be written in files (they would end up in results); put the URL with its credentials in HTTPS_PROXY / HTTP_PROXY instead".to_string());
        }
        Ok(Some(p))
    }
}

/// `host[:port]` or `[v6][:port]`; `None` when the port is not a number.
fn split_host_port(s: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(p) => Some((host, Some(p.parse().ok()?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h, Some(p.parse().ok()?))),
        Some(_) => None,
        None => Some((s, None)),
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && b[i + 1].is_ascii_hexdigit()
            && b[i + 2].is_ascii_hexdigit()
        {
            let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            out.push(hex(b[i + 1]) * 16 + hex(b[i + 2]));
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `host:port`, with brackets around IPv6.
pub fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_urls_parse_and_never_show_credentials() {
        let p = Proxy::parse("http://alice:s%40cret@Proxy.Corp:3128/", "HTTPS_PROXY").unwrap();
        assert_eq!((p.host(), p.port()), ("proxy.corp", 3128));
        assert_eq!(p.url(), "http://proxy.corp:3128");
        assert_eq!(
            p.authorization.as_deref(),
            Some(
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode("alice:s@cret")
                )
                .as_str()
            )
        );
        let dbg = format!("{p:?}");
        assert!(!dbg.contains("alice") && !dbg.contains("cret") && !dbg.contains("Basic"));
        let p = Proxy::parse("10.1.2.3", "HTTP_PROXY").unwrap();
        assert_eq!((p.host(), p.port()), ("10.1.2.3", DEFAULT_PROXY_PORT));
        let p = Proxy::parse("http://[::1]:8888", "x").unwrap();
        assert_eq!(p.url(), "http://[::1]:8888");
        for bad in [
            "https://bob:hunter2@proxy:443",
            "socks5://bob:hunter2@proxy:1080",
            "http://bob:hunter2@proxy:port",
            "http://bob:hunter2@proxy:3128/path",
            "http://bob:hunter2@:3128",
            "not a url",
            "http://bob:hunter2@pro xy:3128",
            "\"proxy.corp:3128\"",
        ] {
            let e = Proxy::parse(bad, "HTTPS_PROXY").unwrap_err();
            assert!(e.contains("HTTPS_PROXY"), "{e}");
            assert!(!e.contains("hunter2") && !e.contains("bob"), "{e}");
        }
        let e = Proxy::from_target_setting("http://bob:hunter2@proxy:3128").unwrap_err();
        assert!(!e.contains("hunter2") && e.contains("HTTPS_PROXY"), "{e}");
        assert_eq!(Proxy::from_target_setting("none").unwrap(), None);
    }
}
