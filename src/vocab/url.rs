//! A target's base URL, parsed once: `scheme://host[:port][/prefix]`. The plan uses it to
//! tell which cells share a server; the transport connects to it and builds request URLs.

/// URL scheme of a base URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain TCP.
    Http,
    /// TLS.
    Https,
}

/// A parsed base URL such as `https://api.openai.com/v1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// Host name or IP literal (without IPv6 brackets).
    pub host: String,
    /// Port (default 80 / 443).
    pub port: u16,
    /// Path prefix without a trailing slash (`/v1`, or empty).
    pub prefix: String,
}

/// A base URL that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid base URL {url:?}: {reason}. Expected e.g. \"https://api.openai.com/v1\" or \"http://127.0.0.1:8080/v1\"")]
pub struct BaseUrlError {
    url: String,
    reason: String,
}

impl BaseUrl {
    /// Parses `scheme://host[:port][/prefix]`.
    pub fn parse(base_url: &str) -> Result<Self, BaseUrlError> {
        let err = |reason: &str| BaseUrlError {
            url: base_url.to_string(),
            reason: reason.to_string(),
        };
        let uri: ::http::Uri = base_url.trim().parse().map_err(|_| err("not a URL"))?;
        let scheme = match uri.scheme_str() {
            Some("http") => Scheme::Http,
            Some("https") => Scheme::Https,
            Some(_) => return Err(err("the scheme must be http or https")),
            None => return Err(err("missing scheme (http:// or https://)")),
        };
        let host = uri.host().ok_or_else(|| err("missing host"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if uri.query().is_some() {
            return Err(err("a query string is not allowed in the base URL"));
        }
        let port = uri.port_u16().unwrap_or(match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        });
        let prefix = uri.path().trim_end_matches('/').to_string();
        Ok(BaseUrl {
            scheme,
            host,
            port,
            prefix,
        })
    }

    /// True when the host is an IP literal (no DNS lookup needed).
    pub fn is_ip_literal(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_ok()
    }

    /// The `Host` header / authority value.
    pub fn authority(&self) -> String {
        let default = match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// `http(s)://authority{prefix}{path}` for HTTP/2 request URIs.
    pub fn http_url(&self, path: &str) -> String {
        let s = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{s}://{}{}{}", self.authority(), self.prefix, path)
    }

    /// The WebSocket URL for `path`: the base URL with scheme ws/wss (what the SDKs do).
    pub fn ws_url(&self, path: &str) -> String {
        let s = match self.scheme {
            Scheme::Http => "ws",
            Scheme::Https => "wss",
        };
        format!("{s}://{}{}{}", self.authority(), self.prefix, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_base_urls() {
        let e = BaseUrl::parse("https://api.openai.com/v1").unwrap();
        assert_eq!(
            (e.scheme, e.host.as_str(), e.port, e.prefix.as_str()),
            (Scheme::Https, "api.openai.com", 443, "/v1")
        );
        assert!(!e.is_ip_literal());
        assert_eq!(e.ws_url("/responses"), "wss://api.openai.com/v1/responses");
        let e = BaseUrl::parse("http://127.0.0.1:8080/v1/").unwrap();
        assert_eq!(
            (e.scheme, e.port, e.prefix.as_str()),
            (Scheme::Http, 8080, "/v1")
        );
        assert!(e.is_ip_literal());
        assert_eq!(e.authority(), "127.0.0.1:8080");
        assert_eq!(
            e.http_url("/responses"),
            "http://127.0.0.1:8080/v1/responses"
        );
        assert_eq!(e.ws_url("/responses"), "ws://127.0.0.1:8080/v1/responses");
        let e = BaseUrl::parse("http://[::1]:9/").unwrap();
        assert_eq!((e.host.as_str(), e.prefix.as_str()), ("::1", ""));
        assert_eq!(e.authority(), "[::1]:9");
        for bad in [
            "ftp://x/v1",
            "127.0.0.1:80/v1",
            "https://x/v1?a=b",
            "not a url",
        ] {
            let msg = BaseUrl::parse(bad).unwrap_err().to_string();
            assert!(msg.contains("https://api.openai.com/v1"), "{bad}: {msg}");
        }
    }
}
