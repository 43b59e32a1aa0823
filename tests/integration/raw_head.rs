//! A raw HTTP/1.1 request head, read by the small servers the secret tests write: the
//! method and lower-cased headers, the body (by `content-length`) read and dropped.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A request head: the request line's method and lower-cased headers.
pub struct Head {
    pub method: String,
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// The value of header `name` (lower-case), or an empty string.
    pub fn get(&self, name: &str) -> String {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map_or(String::new(), |(_, v)| v.clone())
    }
}

/// The next request head on `s` (`None` at end of stream), its body read past.
pub async fn read_head(s: &mut TcpStream) -> Option<Head> {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    let end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        let n = s.read(&mut b).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&b[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let method = lines.next()?.split(' ').next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let h = Head { method, headers };
    let len: usize = h.get("content-length").parse().unwrap_or(0);
    let mut have = buf.len() - end - 4;
    while have < len {
        let n = s.read(&mut b).await.ok()?;
        if n == 0 {
            break;
        }
        have += n;
    }
    Some(h)
}
