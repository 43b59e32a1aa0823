//! Which read delivered which response byte, on an HTTP connection.
//!
//! Owns: a scanner of the plaintext an HTTP/1.1 or HTTP/2 connection reads, run on every read
//! as it returns (in [`super::io::MeteredIo`]), that follows the response framing (HTTP/1.1
//! heads, chunked or sized bodies; HTTP/2 frame headers) and logs, per response, at which
//! body offset each read's bytes end and when that read's bytes arrived.
//! Does not own: parsing for meaning. hyper still decodes; this only counts.
//!
//! Why: hyper decodes in a connection task of its own. When it hands a body frame up, that
//! task may already have read the next bytes (HTTP/2 reads ahead freely; HTTP/1.1 reads the
//! next chunk as soon as the frame is taken), so "the connection's latest read" can be a
//! later arrival than the frame's own. With this log the pump asks instead: when did the read
//! that delivered body byte N of my response arrive? That answer does not depend on who ran
//! first.
//!
//! Responses are keyed: on HTTP/1.1 by their order on the connection (0, 1, …; no
//! pipelining), on HTTP/2 by stream id, which hyper does not expose: a response claims its
//! stream by the first bytes of its body ([`ByteClock::claim`]), which carry a response id
//! on every API we speak. When framing is not understood (a malformed response, an upgrade)
//! or a claim is ambiguous, lookups return `None` and the caller keeps the latest-read time.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

/// How many body bytes of an HTTP/2 stream are kept to claim it by: the whole first event
/// of every API we speak, whose id makes it unique (the first 64 bytes are often the same
/// for every stream: keys in the same order, the same model name).
const PREFIX: usize = 1024;
/// Reads remembered per response before the oldest are forgotten (a consumer that stopped
/// asking must not grow the log without bound).
const MAX_RUNS: usize = 4096;
/// Responses remembered per connection.
const MAX_KEYS: usize = 256;
/// The longest HTTP/1.1 head or chunk-size line accepted (hyper's own limit is ~400 KiB).
const MAX_HEAD: usize = 512 * 1024;

/// The per-connection log. Shared by the connection's reader (which feeds it) and the
/// requests on the connection (which ask it).
#[derive(Debug)]
pub struct ByteClock {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    scan: Scan,
    keys: BTreeMap<u32, KeyLog>,
    /// The framing stopped making sense: every lookup from here on is `None`.
    broken: bool,
}

#[derive(Debug, Default)]
struct KeyLog {
    /// When the read completing the response head (HTTP/1.1) arrived.
    head_at: Option<u64>,
    /// When the read completing the response arrived.
    end_at: Option<u64>,
    /// Body bytes seen so far.
    got: u64,
    /// (body offset the read's bytes end at, that read's arrival), in order.
    runs: VecDeque<(u64, u64)>,
    /// Body offsets at or below this were forgotten.
    floor: u64,
    /// The stream's first body bytes (HTTP/2).
    prefix: Vec<u8>,
    claimed: bool,
}

#[derive(Debug)]
enum Scan {
    H1 { key: u32, state: H1 },
    H2(H2),
}

#[derive(Debug)]
enum H1 {
    /// Status line and headers, up to the empty line.
    Head(Vec<u8>),
    /// A chunk-size line.
    Size(Vec<u8>),
    /// Chunk data still to come.
    Data(u64),
    /// The CRLF after chunk data.
    DataEnd,
    /// Trailer lines; the count is the length of the current line.
    Trailer(usize),
    /// A sized body.
    Length(u64),
    /// A body delimited by the connection's end.
    Close,
}

#[derive(Debug, Default)]
struct H2 {
    head: [u8; 9],
    head_len: usize,
    frame: Option<Frame>,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    len: u32,
    kind: u8,
    flags: u8,
    stream: u32,
    pos: u32,
    /// Padding length of a padded DATA frame (known once its first byte is read).
    pad: u32,
}

impl ByteClock {
    /// A log for an HTTP/1.1 connection.
    pub fn h1() -> Self {
        Self::with(Scan::H1 {
            key: 0,
            state: H1::Head(Vec::new()),
        })
    }

    /// A log for an HTTP/2 connection (the server's side of it: no preface to skip).
    pub fn h2() -> Self {
        Self::with(Scan::H2(H2::default()))
    }

    fn with(scan: Scan) -> Self {
        ByteClock {
            inner: Mutex::new(Inner {
                scan,
                keys: BTreeMap::new(),
                broken: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves counts, never memory, inconsistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Feeds one read's bytes, which arrived at `at_ns`.
    pub fn feed(&self, bytes: &[u8], at_ns: u64) {
        let mut g = self.lock();
        if g.broken || bytes.is_empty() {
            return;
        }
        let inner = &mut *g;
        let ok = match &mut inner.scan {
            Scan::H1 { key, state } => feed_h1(key, state, &mut inner.keys, bytes, at_ns),
            Scan::H2(h2) => feed_h2(h2, &mut inner.keys, bytes, at_ns),
        };
        if !ok {
            inner.broken = true;
            inner.keys.clear();
        }
        while inner.keys.len() > MAX_KEYS {
            inner.keys.pop_first();
        }
    }

    /// When the head of response `key` was complete (HTTP/1.1 only).
    pub fn head(&self, key: u32) -> Option<u64> {
        let g = self.lock();
        g.keys.get(&key)?.head_at
    }

    /// When body byte `end - 1` of response `key` arrived (`end` ≥ 1: the body bytes received
    /// so far, counting this frame). Forgets what lies before it.
    pub fn body(&self, key: u32, end: u64) -> Option<u64> {
        let mut g = self.lock();
        let log = g.keys.get_mut(&key)?;
        if end == 0 || end <= log.floor || end > log.got {
            return None;
        }
        while log.runs.front().is_some_and(|&(e, _)| e < end) {
            let (e, _) = log.runs.pop_front().expect("front");
            log.floor = e;
        }
        log.runs.front().map(|&(_, at)| at)
    }

    /// When the read completing response `key` arrived.
    pub fn end(&self, key: u32) -> Option<u64> {
        let g = self.lock();
        g.keys.get(&key)?.end_at
    }

    /// Finds the one unclaimed response whose body begins with `first` (an HTTP/2 stream,
    /// by its first body bytes) and claims it. `None` when none or several match.
    pub fn claim(&self, first: &[u8]) -> Option<u32> {
        if first.is_empty() {
            return None;
        }
        let mut g = self.lock();
        let k = first.len().min(PREFIX);
        let mut found = None;
        for (&key, log) in g.keys.iter() {
            if !log.claimed && log.prefix.len() >= k && log.prefix[..k] == first[..k] {
                if found.is_some() {
                    return None;
                }
                found = Some(key);
            }
        }
        let key = found?;
        g.keys.get_mut(&key).expect("found").claimed = true;
        Some(key)
    }

    /// Response `key` is finished with: forgets it.
    pub fn done(&self, key: u32) {
        self.lock().keys.remove(&key);
    }

    /// The framing was not understood; lookups return `None`.
    pub fn is_broken(&self) -> bool {
        self.lock().broken
    }
}

impl KeyLog {
    fn data(&mut self, bytes: &[u8], at: u64) {
        if bytes.is_empty() {
            return;
        }
        if self.prefix.len() < PREFIX {
            let take = (PREFIX - self.prefix.len()).min(bytes.len());
            self.prefix.extend_from_slice(&bytes[..take]);
        }
        self.got += bytes.len() as u64;
        match self.runs.back_mut() {
            Some((e, a)) if *a == at => *e = self.got,
            _ => {
                self.runs.push_back((self.got, at));
                if self.runs.len() > MAX_RUNS {
                    if let Some((e, _)) = self.runs.pop_front() {
                        self.floor = e;
                    }
                }
            }
        }
    }
}

/// Advances the HTTP/1.1 scanner over `b`. `false` when the bytes are not HTTP/1.1 framing.
fn feed_h1(
    key: &mut u32,
    state: &mut H1,
    keys: &mut BTreeMap<u32, KeyLog>,
    mut b: &[u8],
    at: u64,
) -> bool {
    while !b.is_empty() {
        let log = keys.entry(*key).or_default();
        let mut complete = false;
        match state {
            H1::Head(buf) => match h1_head(buf, &mut b) {
                HeadStep::More => return true,
                HeadStep::Invalid => return false,
                HeadStep::Ended(Next::Interim) => *state = H1::Head(Vec::new()),
                HeadStep::Ended(Next::Body(s)) => {
                    log.head_at = Some(at);
                    match s {
                        Some(s) => *state = s,
                        None => complete = true,
                    }
                }
            },
            H1::Size(line) => match b.iter().position(|&c| c == b'\n') {
                None => {
                    line.extend_from_slice(b);
                    if line.len() > MAX_HEAD {
                        return false;
                    }
                    b = &[];
                }
                Some(i) => {
                    line.extend_from_slice(&b[..i]);
                    b = &b[i + 1..];
                    let Some(size) = chunk_size(line) else {
                        return false;
                    };
                    *state = if size == 0 {
                        H1::Trailer(0)
                    } else {
                        H1::Data(size)
                    };
                }
            },
            H1::Data(left) => {
                let n = (*left).min(b.len() as u64) as usize;
                log.data(&b[..n], at);
                *left -= n as u64;
                b = &b[n..];
                if *left == 0 {
                    *state = H1::DataEnd;
                }
            }
            H1::DataEnd => match b.iter().position(|&c| c == b'\n') {
                None => {
                    if b.iter().any(|&c| c != b'\r') {
                        return false;
                    }
                    b = &[];
                }
                Some(i) => {
                    if b[..i].iter().any(|&c| c != b'\r') {
                        return false;
                    }
                    b = &b[i + 1..];
                    *state = H1::Size(Vec::new());
                }
            },
            H1::Trailer(len) => match b.iter().position(|&c| c == b'\n') {
                None => {
                    *len += b.len();
                    b = &[];
                }
                Some(i) => {
                    let line = *len + i;
                    // An empty line ("\r\n" or "\n") ends the trailers and the response.
                    // (A lone byte before the LF that came in an earlier read is taken to be
                    // the CR: a one-byte trailer line is not valid anyway.)
                    let empty = line == 0 || (line == 1 && (*len == 1 || b[0] == b'\r'));
                    b = &b[i + 1..];
                    if empty {
                        complete = true;
                    } else {
                        *len = 0;
                    }
                }
            },
            H1::Length(left) => {
                let n = (*left).min(b.len() as u64) as usize;
                log.data(&b[..n], at);
                *left -= n as u64;
                b = &b[n..];
                complete = *left == 0;
            }
            H1::Close => {
                log.data(b, at);
                b = &[];
            }
        }
        if complete {
            log.end_at = Some(at);
            *key += 1;
            *state = H1::Head(Vec::new());
        }
    }
    true
}

/// What [`h1_head`] made of a read's bytes.
enum HeadStep {
    /// Every byte was taken and the head is not complete yet: wait for the next read.
    More,
    /// Not an HTTP/1.1 response head (or a head longer than [`MAX_HEAD`]).
    Invalid,
    /// The head ended; what follows it.
    Ended(Next),
}

/// Takes a response head's bytes from the front of `b` into `buf` (the head so far), leaving
/// in `b` what follows the head once it ended.
fn h1_head<'a>(buf: &mut Vec<u8>, b: &mut &'a [u8]) -> HeadStep {
    let mut rest: &'a [u8] = b;
    if buf.is_empty() {
        // Stray line ends between responses are not part of the next head.
        let skip = rest
            .iter()
            .take_while(|&&c| c == b'\r' || c == b'\n')
            .count();
        rest = &rest[skip..];
        *b = rest;
        if rest.is_empty() {
            return HeadStep::More;
        }
    }
    // Look for the blank line, including across the previous read's end.
    let start = buf.len().saturating_sub(3);
    buf.extend_from_slice(rest);
    let Some(i) = find(&buf[start..], b"\r\n\r\n") else {
        return if buf.len() > MAX_HEAD {
            HeadStep::Invalid
        } else {
            HeadStep::More
        };
    };
    let head_end = start + i + 4;
    let consumed_here = head_end - (buf.len() - rest.len());
    let Some(next) = after_head(&buf[..head_end]) else {
        return HeadStep::Invalid;
    };
    *b = &rest[consumed_here..];
    HeadStep::Ended(next)
}

/// What follows a response head.
enum Next {
    /// A 1xx response: another head follows.
    Interim,
    /// The body's framing; `None` when there is no body.
    Body(Option<H1>),
}

/// Reads the framing a response head announces. `None` when it is not a response head or
/// announces something this scanner cannot follow (an upgrade).
fn after_head(head: &[u8]) -> Option<Next> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(head) {
        // A head that ends elsewhere (bare LF line ends) would put the body in the wrong
        // place: give up rather than count it wrong.
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        _ => return None,
    }
    let code = resp.code?;
    if code == 101 {
        return None;
    }
    if (100..200).contains(&code) {
        return Some(Next::Interim);
    }
    if code == 204 || code == 304 {
        return Some(Next::Body(None));
    }
    let mut chunked = false;
    let mut length = None;
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = String::from_utf8_lossy(h.value)
                .rsplit(',')
                .next()
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("chunked"));
        } else if h.name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(h.value)
                .ok()?
                .trim()
                .parse::<u64>()
                .ok();
            length?;
        }
    }
    Some(Next::Body(if chunked {
        Some(H1::Size(Vec::new()))
    } else {
        match length {
            Some(0) => None,
            Some(n) => Some(H1::Length(n)),
            None => Some(H1::Close),
        }
    }))
}

/// The size on a chunk-size line (hex digits, then optional extensions).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let digits = line
        .split(|&c| c == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const END_STREAM: u8 = 0x1;
const PADDED: u8 = 0x8;

/// Advances the HTTP/2 scanner over `b`. `false` when the bytes are not HTTP/2 frames.
fn feed_h2(h2: &mut H2, keys: &mut BTreeMap<u32, KeyLog>, mut b: &[u8], at: u64) -> bool {
    while !b.is_empty() {
        let Some(f) = h2.frame.as_mut() else {
            let n = (9 - h2.head_len).min(b.len());
            h2.head[h2.head_len..h2.head_len + n].copy_from_slice(&b[..n]);
            h2.head_len += n;
            b = &b[n..];
            if h2.head_len == 9 {
                h2.head_len = 0;
                let h = h2.head;
                let f = Frame {
                    len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
                    kind: h[3],
                    flags: h[4],
                    stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
                    pos: 0,
                    pad: 0,
                };
                // SETTINGS_MAX_FRAME_SIZE cannot exceed 2^24 - 1, which 24 bits hold; a
                // frame on a stream must name one.
                if f.len == 0 {
                    frame_done(&f, keys, at);
                } else {
                    h2.frame = Some(f);
                }
            }
            continue;
        };
        let n = ((f.len - f.pos) as usize).min(b.len());
        let (part, rest) = b.split_at(n);
        b = rest;
        if f.kind == DATA && f.stream != 0 {
            let mut lo = f.pos;
            let mut part = part;
            if f.flags & PADDED != 0 && f.pos == 0 {
                f.pad = u32::from(part[0]);
                if f.pad + 1 > f.len {
                    return false;
                }
                part = &part[1..];
                lo = 1;
            }
            let data_end = f.len - f.pad;
            let hi = lo + part.len() as u32;
            let take = hi.min(data_end).saturating_sub(lo) as usize;
            keys.entry(f.stream).or_default().data(&part[..take], at);
        }
        f.pos += n as u32;
        if f.pos == f.len {
            let f = *f;
            h2.frame = None;
            frame_done(&f, keys, at);
        }
    }
    true
}

fn frame_done(f: &Frame, keys: &mut BTreeMap<u32, KeyLog>, at: u64) {
    if f.stream == 0 || !(f.kind == DATA || f.kind == HEADERS) {
        return;
    }
    let log = keys.entry(f.stream).or_default();
    if f.kind == HEADERS && log.head_at.is_none() {
        log.head_at = Some(at);
    }
    if f.flags & END_STREAM != 0 {
        log.end_at = Some(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunked(parts: &[&str]) -> Vec<u8> {
        let mut v = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for p in parts {
            v.extend_from_slice(format!("{:x}\r\n{p}\r\n", p.len()).as_bytes());
        }
        v.extend_from_slice(b"0\r\n\r\n");
        v
    }

    /// Feeds `wire` in reads split at `cuts`, read i stamped i+1; returns the clock.
    fn fed(clock: ByteClock, wire: &[u8], cuts: &[usize]) -> ByteClock {
        let mut last = 0;
        for (i, &c) in cuts.iter().chain(std::iter::once(&wire.len())).enumerate() {
            clock.feed(&wire[last..c], i as u64 + 1);
            last = c;
        }
        clock
    }

    #[test]
    fn h1_each_chunk_gets_the_read_that_delivered_its_last_byte() {
        let wire = chunked(&["data: a\n\n", "data: bb\n\n"]);
        // Cut inside the second chunk's data: its first bytes arrive with read 2, the rest
        // with read 3.
        let second = find(&wire, b"data: bb").expect("second");
        let c = fed(ByteClock::h1(), &wire, &[second - 3, second + 4]);
        assert_eq!(c.head(0), Some(1));
        assert_eq!(c.body(0, 9), Some(1), "first chunk, all in read 1");
        assert_eq!(c.body(0, 13), Some(2));
        assert_eq!(c.body(0, 19), Some(3), "second chunk ends in read 3");
        assert_eq!(c.end(0), Some(3));
        assert_eq!(c.body(0, 20), None, "past what was received");
    }

    #[test]
    fn h1_any_split_gives_the_same_answers_as_byte_by_byte_arithmetic() {
        let wire = chunked(&["data: one\n\n", "data: two two\n\n", "x"]);
        let body_ends = [11u64, 11 + 15, 11 + 15 + 1];
        // The offset in `wire` of each chunk's last data byte.
        let mut last_byte = Vec::new();
        let mut pos = find(&wire, b"\r\n\r\n").expect("head") + 4;
        for p in ["data: one\n\n", "data: two two\n\n", "x"] {
            let hdr = format!("{:x}\r\n", p.len()).len();
            last_byte.push(pos + hdr + p.len() - 1);
            pos += hdr + p.len() + 2;
        }
        for a in 1..wire.len() {
            for b in (a + 1)..wire.len() {
                let c = fed(ByteClock::h1(), &wire, &[a, b]);
                for (k, &e) in body_ends.iter().enumerate() {
                    let read = if last_byte[k] < a {
                        1
                    } else if last_byte[k] < b {
                        2
                    } else {
                        3
                    };
                    assert_eq!(c.body(0, e), Some(read), "cuts {a},{b} chunk {k}");
                }
                assert_eq!(c.end(0), Some(3), "cuts {a},{b}");
                assert!(!c.is_broken());
            }
        }
    }

    #[test]
    fn h1_keep_alive_responses_interim_heads_and_sized_bodies() {
        let mut wire = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
        wire.extend(chunked(&["hello"]));
        wire.extend_from_slice(b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 4\r\n\r\nslow");
        wire.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
        wire.extend(chunked(&["again"]));
        let c = fed(ByteClock::h1(), &wire, &[]);
        assert_eq!(c.body(0, 5), Some(1));
        assert_eq!(c.body(1, 4), Some(1), "the sized body");
        assert_eq!(c.end(1), Some(1));
        assert_eq!(c.head(2), Some(1), "204 has no body");
        assert_eq!(c.end(2), Some(1));
        assert_eq!(
            c.body(3, 5),
            Some(1),
            "the fourth response on the connection"
        );
        assert!(!c.is_broken());
    }

    #[test]
    fn h1_trailers_and_chunk_extensions() {
        let wire = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nx-t: 1\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nz";
        let c = fed(ByteClock::h1(), wire, &[60]);
        assert_eq!(c.body(0, 3), Some(1));
        assert_eq!(c.end(0), Some(2));
        assert_eq!(c.body(1, 1), Some(2));
    }

    #[test]
    fn h1_garbage_breaks_the_log_and_lookups_fall_back() {
        let c = fed(ByteClock::h1(), b"SSH-2.0-OpenSSH\r\n\r\n", &[]);
        assert!(c.is_broken());
        assert_eq!(c.body(0, 1), None);
        let wire = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n";
        let c = fed(ByteClock::h1(), wire, &[]);
        assert!(c.is_broken(), "a chunk size that is not hex");
        // A head that never ends is capped.
        let c = ByteClock::h1();
        for _ in 0..600 {
            c.feed(&[b'a'; 1024], 1);
        }
        assert!(c.is_broken());
        // Bare-LF line ends: the blank line is not where CRLF framing would find it.
        let c = fed(
            ByteClock::h1(),
            b"HTTP/1.1 200 OK\ncontent-length: 4\n\nab\r\n\r\n",
            &[],
        );
        assert!(c.is_broken());
    }

    #[test]
    fn h1_stray_line_ends_between_responses() {
        let mut wire = b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx".to_vec();
        wire.extend_from_slice(b"\r\n");
        wire.extend(chunked(&["yy"]));
        // The stray CRLF alone in a read, then the next response.
        let c = fed(
            ByteClock::h1(),
            &wire,
            &[
                wire.len() - chunked(&["yy"]).len() - 2,
                wire.len() - chunked(&["yy"]).len(),
            ],
        );
        assert!(!c.is_broken());
        assert_eq!(c.body(1, 2), Some(3));
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        v.extend_from_slice(&[kind, flags]);
        v.extend_from_slice(&stream.to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn h2_streams_are_claimed_by_their_first_bytes_and_logged_per_stream() {
        let mut wire = frame(0x4, 0, 0, &[0; 6]); // SETTINGS
        wire.extend(frame(HEADERS, 0x4, 1, b"hpack"));
        wire.extend(frame(HEADERS, 0x4, 3, b"hpack"));
        wire.extend(frame(DATA, 0, 3, b"id=resp_3 first"));
        wire.extend(frame(DATA, 0, 1, b"id=resp_1 first"));
        let cut = wire.len() - 4; // stream 1's first frame ends in read 2
                                  // Padded: pad length 3, data "more", padding.
        let mut padded = vec![3u8];
        padded.extend_from_slice(b"more");
        padded.extend_from_slice(&[0, 0, 0]);
        wire.extend(frame(DATA, PADDED | END_STREAM, 3, &padded));
        wire.extend(frame(DATA, END_STREAM, 1, b"tail"));
        let c = fed(ByteClock::h2(), &wire, &[cut]);
        assert_eq!(c.claim(b"id=resp_1 first"), Some(1));
        assert_eq!(c.claim(b"id=resp_1 first"), None, "claimed once");
        assert_eq!(
            c.claim(b"id=resp_3"),
            Some(3),
            "a frame shorter than the prefix"
        );
        assert_eq!(c.body(1, 15), Some(2));
        assert_eq!(c.body(3, 15), Some(1));
        assert_eq!(c.body(3, 19), Some(2), "padding is not body");
        assert_eq!(c.body(3, 20), None);
        assert_eq!(c.end(3), Some(2));
        assert_eq!(c.head(3), Some(1));
        c.done(3);
        assert_eq!(c.body(3, 19), None, "forgotten once done");
    }

    #[test]
    fn h2_any_split_point_and_ambiguous_claims() {
        let mut wire = frame(DATA, 0, 1, b"same");
        wire.extend(frame(DATA, 0, 3, b"same"));
        wire.extend(frame(DATA, END_STREAM, 1, b"more"));
        for a in 1..wire.len() {
            let c = fed(ByteClock::h2(), &wire, &[a]);
            assert_eq!(c.claim(b"same"), None, "two streams begin alike");
            assert!(!c.is_broken());
            let first_end = 9 + 4 - 1;
            assert_eq!(c.body(1, 4), Some(if first_end < a { 1 } else { 2 }));
            let last = wire.len() - 1;
            assert_eq!(c.body(1, 8), Some(if last < a { 1 } else { 2 }));
        }
    }

    #[test]
    fn logs_stay_bounded_when_nobody_asks() {
        let c = ByteClock::h2();
        for i in 0..(MAX_RUNS as u64 * 2) {
            c.feed(&frame(DATA, 0, 1, b"x"), i + 1);
        }
        for s in 0..(MAX_KEYS as u32 * 2) {
            c.feed(&frame(HEADERS, 0, 2 * s + 3, b"h"), 1);
        }
        let g = c.lock();
        assert!(g.keys.len() <= MAX_KEYS);
        assert!(g.keys.values().all(|k| k.runs.len() <= MAX_RUNS));
    }
}
