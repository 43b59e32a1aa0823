//! HTTP proxies: which proxy a connection goes through, and the `CONNECT` tunnel.
//!
//! Owns: the `NO_PROXY` list with curl's semantics, choosing a proxy for an endpoint from a
//! target's `proxy` key or the environment's values (handed in by the caller: this module
//! reads no environment), and opening a `CONNECT` tunnel on a stream.
//! Does not own: parsing proxy URLs ([`crate::vocab::Proxy`]), the TCP connect to the proxy
//! or the timing of the tunnel (see [`super::connect`]).
//!
//! Every transport goes through the tunnel, plain-http targets too, so a connection means
//! the same thing (one TCP connection to the proxy, one tunnel) whatever the scheme.
//! Credentials in a proxy URL are sent as `Proxy-Authorization: Basic` and appear nowhere
//! else: not in `Debug`, not in [`Proxy::url`], not in any error.

use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::vocab::{authority, BaseUrl, Proxy, Scheme};

/// Longest proxy answer head accepted.
const MAX_HEAD: usize = 16 * 1024;

/// The proxy for `endpoint`: the target's `proxy` setting when it has one (it overrides the
/// environment, `NO_PROXY` included), else the environment as `var` reports it:
/// `https_proxy`/`HTTPS_PROXY` for https targets, `http_proxy`/`HTTP_PROXY` for http ones
/// (lower case first, as curl), unless `no_proxy`/`NO_PROXY` matches the host.
pub fn choose(
    setting: Option<&str>,
    endpoint: &BaseUrl,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<Proxy>, String> {
    if let Some(s) = setting {
        return Proxy::from_target_setting(s);
    }
    let names: [&str; 2] = match endpoint.scheme {
        Scheme::Https => ["https_proxy", "HTTPS_PROXY"],
        Scheme::Http => ["http_proxy", "HTTP_PROXY"],
    };
    let Some((name, url)) = names
        .iter()
        .find_map(|n| var(n).filter(|v| !v.trim().is_empty()).map(|v| (*n, v)))
    else {
        return Ok(None);
    };
    // A malformed variable is an error even where NO_PROXY would bypass it.
    let proxy = Proxy::parse(&url, name)?;
    let no_proxy = ["no_proxy", "NO_PROXY"].iter().find_map(|n| var(n));
    if let Some(list) = no_proxy {
        if NoProxy::parse(&list).matches(&endpoint.host, endpoint.port) {
            return Ok(None);
        }
    }
    Ok(Some(proxy))
}

/// A `NO_PROXY` list: comma-separated host names (a name matches itself and its
/// subdomains; a leading `.` or `*.` is ignored), IP addresses, CIDR ranges
/// (`10.0.0.0/8`), IPv6 without brackets, `*` for every host; an entry may end in `:port`
/// (`[v6]:port` for IPv6) to apply to that port only.
#[derive(Debug, Clone, Default)]
pub struct NoProxy {
    all: bool,
    entries: Vec<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    pattern: Pattern,
    port: Option<u16>,
}

#[derive(Debug, Clone)]
enum Pattern {
    Name(String),
    Ip(IpAddr),
    Cidr(IpAddr, u8),
}

impl NoProxy {
    /// Parses the list; entries that mean nothing are ignored (as curl does).
    pub fn parse(list: &str) -> Self {
        let mut out = NoProxy::default();
        for raw in list.split(',') {
            let e = raw.trim();
            if e.is_empty() {
                continue;
            }
            if e == "*" {
                out.all = true;
                continue;
            }
            if let Some(entry) = parse_entry(e) {
                out.entries.push(entry);
            }
        }
        out
    }

    /// True when a connection to `host:port` goes direct.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.all {
            return true;
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let ip = host.parse::<IpAddr>().ok();
        self.entries.iter().any(|e| {
            e.port.is_none_or(|p| p == port)
                && match (&e.pattern, ip) {
                    (Pattern::Name(n), None) => {
                        host == *n
                            || (host.len() > n.len()
                                && host.ends_with(n.as_str())
                                && host.as_bytes()[host.len() - n.len() - 1] == b'.')
                    }
                    (Pattern::Ip(a), Some(b)) => *a == b,
                    (Pattern::Cidr(net, bits), Some(b)) => in_cidr(*net, *bits, b),
                    _ => false,
                }
        })
    }
}

fn parse_entry(e: &str) -> Option<Entry> {
    let (body, port) = if let Some(rest) = e.strip_prefix('[') {
        // [v6] or [v6]:port
        let (inside, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if after.is_empty() => None,
            None => return None,
        };
        (inside, port)
    } else if e.matches(':').count() == 1 {
        let (h, p) = e.split_once(':')?;
        (h, Some(p.parse().ok()?))
    } else {
        (e, None)
    };
    let body = body.trim_end_matches('.');
    if let Some((addr, bits)) = body.split_once('/') {
        let addr: IpAddr = addr.parse().ok()?;
        let bits: u8 = bits.parse().ok()?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if bits > max {
            return None;
        }
        return Some(Entry {
            pattern: Pattern::Cidr(addr, bits),
            port,
        });
    }
    if let Ok(ip) = body.parse::<IpAddr>() {
        return Some(Entry {
            pattern: Pattern::Ip(ip),
            port,
        });
    }
    let name = body
        .strip_prefix("*.")
        .or_else(|| body.strip_prefix('.'))
        .unwrap_or(body)
        .to_ascii_lowercase();
    if name.is_empty() {
        return None;
    }
    Some(Entry {
        pattern: Pattern::Name(name),
        port,
    })
}

fn in_cidr(net: IpAddr, bits: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(bits))
            };
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(bits))
            };
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// Asks the proxy on `io` for a tunnel to `host:port` and reads its answer head. On `Ok`
/// the stream is the tunnel. The error names the proxy (without credentials) and its status.
pub async fn tunnel<IO: AsyncRead + AsyncWrite + Unpin>(
    io: &mut IO,
    proxy: &Proxy,
    host: &str,
    port: u16,
) -> Result<(), String> {
    let target = authority(host, port);
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = proxy.authorization() {
        head.push_str("Proxy-Authorization: ");
        head.push_str(auth);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let at = proxy.url();
    io.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("sending CONNECT {target} to proxy {at}: {e}"))?;
    io.flush()
        .await
        .map_err(|e| format!("sending CONNECT {target} to proxy {at}: {e}"))?;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    let end = loop {
        let n = io
            .read(&mut chunk)
            .await
            .map_err(|e| format!("reading proxy {at}'s answer to CONNECT {target}: {e}"))?;
        if n == 0 {
            return Err(format!(
                "proxy {at} closed the connection before answering CONNECT {target}"
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(format!(
                "proxy {at} answered CONNECT {target} with a head over {MAX_HEAD} bytes"
            ));
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(&buf[..end]) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => {
            return Err(format!(
                "proxy {at} answered CONNECT {target} with something that is not HTTP"
            ))
        }
    }
    let code = resp.code.unwrap_or(0);
    if code != 200 {
        // Scrubbed of the proxy's own credentials before the cut: a proxy may echo them.
        let reason = proxy
            .secrets()
            .scrub(resp.reason.unwrap_or(""))
            .chars()
            .filter(|c| !c.is_control())
            .take(80)
            .collect::<String>();
        let hint = match (code, proxy.has_credentials()) {
            (407, true) => "; the proxy refused the credentials in the proxy URL",
            (407, false) => {
                "; the proxy wants credentials: put them in the proxy URL (http://user:pass@host:port) in HTTPS_PROXY / HTTP_PROXY"
            }
            _ => "",
        };
        return Err(format!(
            "proxy {at} refused CONNECT {target}: HTTP {code} {reason}{hint}"
        ));
    }
    if buf.len() > end {
        return Err(format!(
            "proxy {at} sent bytes after its 200 answer to CONNECT {target}, before the target spoke"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(url: &str) -> BaseUrl {
        BaseUrl::parse(url).unwrap()
    }

    #[test]
    fn no_proxy_follows_curl() {
        let np = NoProxy::parse("example.com, .corp.internal,*.lab.test ,10.0.0.0/8,::1,192.168.1.7,localhost:8080,[fe80::1]:443");
        // A name matches itself and its subdomains, on a label boundary only.
        assert!(np.matches("example.com", 443));
        assert!(np.matches("www.example.com", 80));
        assert!(np.matches("EXAMPLE.com.", 443));
        assert!(!np.matches("notexample.com", 443));
        assert!(!np.matches("example.com.org", 443));
        // A leading dot (or `*.`) is ignored: the domain itself matches too.
        assert!(np.matches("corp.internal", 443));
        assert!(np.matches("vllm.corp.internal", 443));
        assert!(np.matches("a.b.lab.test", 443));
        assert!(np.matches("lab.test", 443));
        // IPs: exact, CIDR, IPv6 without brackets; a name never matches an IP.
        assert!(np.matches("10.20.30.40", 443));
        assert!(!np.matches("11.0.0.1", 443));
        assert!(np.matches("::1", 443));
        assert!(np.matches("[::1]", 443));
        assert!(np.matches("192.168.1.7", 8000));
        assert!(!np.matches("192.168.1.8", 8000));
        // Ports: only the named one.
        assert!(np.matches("localhost", 8080));
        assert!(!np.matches("localhost", 8081));
        assert!(np.matches("fe80::1", 443));
        assert!(!np.matches("fe80::1", 80));
        // `*` alone matches everything; inside a list too.
        assert!(NoProxy::parse("*").matches("anything.example", 1));
        assert!(NoProxy::parse("a.b, *").matches("z", 1));
        // Empty and junk match nothing.
        assert!(!NoProxy::parse("").matches("example.com", 443));
        assert!(!NoProxy::parse(" , ,").matches("example.com", 443));
        assert!(!NoProxy::parse("10.0.0.0/99,host:notaport").matches("10.0.0.1", 443));
        assert!(NoProxy::parse("0.0.0.0/0").matches("8.8.8.8", 443));
        assert!(NoProxy::parse("2001:db8::/32").matches("2001:db8::5", 443));
        assert!(!NoProxy::parse("2001:db8::/32").matches("2001:db9::5", 443));
    }

    #[test]
    fn choice_follows_the_setting_then_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let e = env(&[
            ("HTTPS_PROXY", "http://s:3128"),
            ("http_proxy", "http://h:8080"),
            ("HTTP_PROXY", "http://H:1"),
            ("NO_PROXY", "internal.corp,127.0.0.1"),
        ]);
        let https = ep("https://api.example.com/v1");
        let http = ep("http://vllm.example.com:8000/v1");
        assert_eq!(
            choose(None, &https, e).unwrap().unwrap().url(),
            "http://s:3128"
        );
        // Lower case first, as curl.
        assert_eq!(
            choose(None, &http, e).unwrap().unwrap().url(),
            "http://h:8080"
        );
        assert_eq!(
            choose(None, &ep("https://x.internal.corp/v1"), e).unwrap(),
            None
        );
        assert_eq!(
            choose(None, &ep("http://127.0.0.1:8000/v1"), e).unwrap(),
            None
        );
        // The target's setting overrides the environment, NO_PROXY included.
        assert_eq!(choose(Some("none"), &https, e).unwrap(), None);
        assert_eq!(
            choose(Some("http://p:9"), &ep("https://x.internal.corp/v1"), e)
                .unwrap()
                .unwrap()
                .url(),
            "http://p:9"
        );
        // Empty variables are unset; lower-case no_proxy wins over NO_PROXY.
        let e = env(&[
            ("https_proxy", " "),
            ("HTTPS_PROXY", "http://s:3128"),
            ("no_proxy", "example.com"),
            ("NO_PROXY", "*"),
        ]);
        assert_eq!(choose(None, &https, e).unwrap(), None);
        assert!(choose(None, &ep("https://other.org/v1"), e)
            .unwrap()
            .is_some());
        assert_eq!(choose(None, &http, e).unwrap(), None);
        // A bad variable is named, its value is not shown.
        let e = env(&[("HTTPS_PROXY", "ftp://u:pw123@p")]);
        let msg = choose(None, &https, e).unwrap_err();
        assert!(
            msg.contains("HTTPS_PROXY") && !msg.contains("pw123"),
            "{msg}"
        );
        // Malformed is an error before any request, even where NO_PROXY would bypass it.
        let e = env(&[("HTTP_PROXY", "not a url"), ("NO_PROXY", "*")]);
        let msg = choose(None, &http, e).unwrap_err();
        assert!(
            msg.contains("HTTP_PROXY") && msg.contains("not a host name"),
            "{msg}"
        );
    }

    #[tokio::test]
    async fn a_407_echoing_the_credentials_is_scrubbed_before_its_cut() {
        use base64::Engine as _;
        let proxy =
            Proxy::parse("http://bob:proxypw-83e2a1f0@127.0.0.1:3128", "HTTP_PROXY").unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode("bob:proxypw-83e2a1f0");
        let (mut client, mut server) = tokio::io::duplex(4096);
        // Unscrubbed, the 80-character cut of the reason would keep 19 bytes of the base64.
        let answer = format!("HTTP/1.1 407 {} {b64}\r\n\r\n", "r".repeat(60));
        let serve = async move {
            let mut buf = [0u8; 1024];
            let _ = server.read(&mut buf).await;
            server.write_all(answer.as_bytes()).await.unwrap();
            server
        };
        let (got, _server) = tokio::join!(tunnel(&mut client, &proxy, "h", 80), serve);
        let msg = got.unwrap_err();
        assert!(
            msg.contains("HTTP 407") && msg.contains("[redacted]"),
            "{msg}"
        );
        assert!(!msg.contains(&b64[..8]), "{msg}");
        let set = proxy.secrets();
        assert_eq!(
            set.scrub(&format!("{b64} bob:proxypw-83e2a1f0 proxypw-83e2a1f0")),
            "[redacted] [redacted] [redacted]"
        );
    }
}
