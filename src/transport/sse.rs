//! A pure, incremental Server-Sent Events parser.
//!
//! Owns: turning arbitrary splits of a `text/event-stream` body into complete events
//! (`event:` name + joined `data:` lines), following the WHATWG rules that matter here:
//! LF, CRLF and CR line endings, comment lines (`:`), multi-line `data:`, one optional
//! space after the colon, events split across reads and several events in one read, and
//! one UTF-8 byte order mark at the very start of the stream, which is dropped (also when
//! it arrives split across reads).
//! Does not own: clocks, I/O or JSON. The caller stamps the read that delivered the bytes
//! and every event completed by that read shares the stamp.
//!
//! Hot path: when an event's `data` is a single line (the usual case) it is a zero-copy
//! slice of the read buffer; only a partial line left at the end of a read is copied, and a
//! long line is copied once in all (a read without a line ending is appended to the partial
//! line, never re-copied with it: linear in the line's length).
//!
//! Limits ([`SseLimits`]): a line longer than `max_line` bytes or an event whose `data`
//! exceeds `max_event` bytes stops the parser (`feed` returns false and
//! [`SseParser::overflow`] says which limit), so one hostile line cannot grow memory
//! without bound.

use bytes::{Bytes, BytesMut};
use memchr::{memchr, memchr2};

/// One complete SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when present.
    pub event: Option<Bytes>,
    /// The `data:` lines joined with `\n`.
    pub data: Bytes,
}

/// The most one SSE line, and one event's joined `data`, may hold. 16 MiB: far above any
/// real event (a `response.completed` carrying a long answer is a few hundred KiB).
pub const MAX_LINE: usize = 16 << 20;

/// Size limits of an [`SseParser`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseLimits {
    /// Longest line (without its line ending), bytes.
    pub max_line: usize,
    /// Largest `data` of one event (its lines joined), bytes.
    pub max_event: usize,
}

impl Default for SseLimits {
    fn default() -> Self {
        SseLimits {
            max_line: MAX_LINE,
            max_event: MAX_LINE,
        }
    }
}

/// Which limit a stream broke (see [`SseParser::overflow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseOverflow {
    /// A line grew past `max_line` bytes without a line ending.
    Line(usize),
    /// An event's `data` grew past `max_event` bytes.
    Event(usize),
}

impl std::fmt::Display for SseOverflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseOverflow::Line(max) => write!(
                f,
                "an SSE line exceeded {max} bytes without a line ending (limit on line size)"
            ),
            SseOverflow::Event(max) => {
                write!(
                    f,
                    "an SSE event's data exceeded {max} bytes (limit on event size)"
                )
            }
        }
    }
}

/// Incremental parser state. Feed it body chunks in order; it calls back once per event.
#[derive(Debug, Default)]
pub struct SseParser {
    limits: SseLimits,
    /// Set when a limit was exceeded; the parser then accepts nothing more.
    overflow: Option<SseOverflow>,
    /// Bytes of an unfinished line carried over from the previous chunk.
    partial: BytesMut,
    /// The previous chunk ended in `\r`: a leading `\n` in the next chunk belongs to it.
    skip_lf: bool,
    event: Option<Bytes>,
    /// First data line (zero-copy) ...
    data: Option<Bytes>,
    /// ... and, only when there are several, the joined lines.
    data_multi: Option<BytesMut>,
    /// Bytes of a leading byte order mark matched so far (the first bytes of the stream).
    bom: u8,
    /// The stream's start was looked at: a BOM there was dropped, or there was none.
    bom_done: bool,
}

/// The UTF-8 byte order mark, which the SSE spec strips from the start of a stream.
const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

impl SseParser {
    /// A parser at the start of a stream, with the default [`SseLimits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser with `limits`.
    pub fn with_limits(limits: SseLimits) -> Self {
        SseParser {
            limits,
            ..Self::default()
        }
    }

    /// The limit the stream broke, if it did (then `feed` returns false from then on).
    pub fn overflow(&self) -> Option<SseOverflow> {
        self.overflow
    }

    /// Feeds one chunk; calls `on_event` for every event the chunk completes.
    /// Returns `false` as soon as `on_event` returns `false` (the rest is dropped), or when a
    /// limit was exceeded ([`Self::overflow`]).
    pub fn feed(&mut self, chunk: Bytes, mut on_event: impl FnMut(SseEvent) -> bool) -> bool {
        if self.overflow.is_some() {
            return false;
        }
        let chunk = if self.bom_done {
            chunk
        } else {
            match self.strip_bom(chunk) {
                Some(c) => c,
                None => return true, // all of it the start of a BOM so far
            }
        };
        if !self.partial.is_empty() && memchr2(b'\n', b'\r', &chunk).is_none() {
            // Still inside the partial line: append, never re-copy what is there.
            if self.partial.len() + chunk.len() > self.limits.max_line {
                return self.overflowed(SseOverflow::Line(self.limits.max_line));
            }
            self.partial.extend_from_slice(&chunk);
            return true;
        }
        let mut buf = if self.partial.is_empty() {
            chunk
        } else {
            self.partial.extend_from_slice(&chunk);
            self.partial.split().freeze()
        };
        // An empty read between a `\r` and its `\n` must not end the wait for the `\n`
        // (found by the fuzzer: an empty HTTP/2 DATA frame there made `\r\n` two line ends).
        if self.skip_lf && !buf.is_empty() {
            self.skip_lf = false;
            if buf.first() == Some(&b'\n') {
                buf = buf.slice(1..);
            }
        }
        let mut pos = 0;
        let len = buf.len();
        while pos < len {
            let Some(rel) = memchr2(b'\n', b'\r', &buf[pos..]) else {
                break;
            };
            let end = pos + rel;
            let mut next = end + 1;
            if buf[end] == b'\r' {
                if next < len {
                    if buf[next] == b'\n' {
                        next += 1;
                    }
                } else {
                    self.skip_lf = true;
                }
            }
            if end - pos > self.limits.max_line {
                return self.overflowed(SseOverflow::Line(self.limits.max_line));
            }
            if !self.line(&buf, pos, end, &mut on_event) {
                self.partial.clear();
                return false;
            }
            if self.overflow.is_some() {
                return false;
            }
            pos = next;
        }
        if pos < len {
            if len - pos > self.limits.max_line {
                return self.overflowed(SseOverflow::Line(self.limits.max_line));
            }
            self.partial.extend_from_slice(&buf[pos..]);
        }
        true
    }

    /// Drops a BOM at the start of the stream; `None` while every byte so far may be one.
    /// Bytes held as a BOM's start that turn out not to be one are given back.
    fn strip_bom(&mut self, chunk: Bytes) -> Option<Bytes> {
        let mut i = 0;
        while usize::from(self.bom) < BOM.len() && i < chunk.len() {
            if chunk[i] != BOM[usize::from(self.bom)] {
                self.bom_done = true;
                let held = &BOM[..usize::from(self.bom)];
                if held.is_empty() {
                    return Some(chunk);
                }
                let mut b = BytesMut::with_capacity(held.len() + chunk.len() - i);
                b.extend_from_slice(held);
                b.extend_from_slice(&chunk[i..]);
                return Some(b.freeze());
            }
            self.bom += 1;
            i += 1;
        }
        if usize::from(self.bom) == BOM.len() {
            self.bom_done = true;
            return Some(chunk.slice(i..));
        }
        None
    }

    fn overflowed(&mut self, why: SseOverflow) -> bool {
        self.overflow = Some(why);
        self.partial = BytesMut::new();
        self.data = None;
        self.data_multi = None;
        false
    }

    /// Handles the line `buf[start..end]`; returns false when the callback asked to stop.
    fn line(
        &mut self,
        buf: &Bytes,
        start: usize,
        end: usize,
        on_event: &mut impl FnMut(SseEvent) -> bool,
    ) -> bool {
        let line = &buf[start..end];
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        if line[0] == b':' {
            return true; // comment / keep-alive
        }
        let (name, value_start) = match memchr(b':', line) {
            Some(c) => {
                let mut v = start + c + 1;
                if v < end && buf[v] == b' ' {
                    v += 1;
                }
                (&line[..c], v)
            }
            None => (line, end),
        };
        match name {
            b"data" => {
                let value = buf.slice(value_start..end);
                match (&mut self.data, &mut self.data_multi) {
                    (None, _) => self.data = Some(value),
                    (Some(first), None) => {
                        let mut m = BytesMut::with_capacity(first.len() + value.len() + 1);
                        m.extend_from_slice(first);
                        m.extend_from_slice(b"\n");
                        m.extend_from_slice(&value);
                        self.data_multi = Some(m);
                    }
                    (Some(_), Some(m)) => {
                        m.extend_from_slice(b"\n");
                        m.extend_from_slice(&value);
                    }
                }
                let size = match (&self.data, &self.data_multi) {
                    (_, Some(m)) => m.len(),
                    (Some(d), None) => d.len(),
                    (None, None) => 0,
                };
                if size > self.limits.max_event {
                    self.overflowed(SseOverflow::Event(self.limits.max_event));
                    return false;
                }
            }
            b"event" => self.event = Some(buf.slice(value_start..end)),
            _ => {} // id, retry and unknown fields carry nothing we measure
        }
        true
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(SseEvent) -> bool) -> bool {
        let event = self.event.take();
        let data = match (self.data.take(), self.data_multi.take()) {
            (_, Some(m)) => m.freeze(),
            (Some(d), None) => d,
            // Per the spec an event without data lines is not dispatched.
            (None, None) => return true,
        };
        on_event(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> Vec<(Option<String>, String)> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(Bytes::copy_from_slice(c), |e| {
                out.push((
                    e.event.map(|b| String::from_utf8(b.to_vec()).unwrap()),
                    String::from_utf8(e.data.to_vec()).unwrap(),
                ));
                true
            });
        }
        out
    }

    const RESPONSES: &[u8] = b"event: response.created\ndata: {\"type\":\"response.created\"}\n\n\
: keep-alive\n\n\
event: response.output_text.delta\r\ndata: {\"delta\":\"fn\"}\r\n\r\n\
data: line one\ndata:line two\ndata: \n\n\
event: response.completed\rdata: {\"type\":\"response.completed\"}\r\r";

    fn expected() -> Vec<(Option<String>, String)> {
        vec![
            (
                Some("response.created".into()),
                "{\"type\":\"response.created\"}".into(),
            ),
            (
                Some("response.output_text.delta".into()),
                "{\"delta\":\"fn\"}".into(),
            ),
            (None, "line one\nline two\n".into()),
            (
                Some("response.completed".into()),
                "{\"type\":\"response.completed\"}".into(),
            ),
        ]
    }

    #[test]
    fn parses_events_comments_crlf_cr_and_multiline_data() {
        assert_eq!(parse_chunks(&[RESPONSES]), expected());
    }

    #[test]
    fn byte_by_byte_feeding_gives_the_same_events() {
        let chunks: Vec<&[u8]> = RESPONSES.chunks(1).collect();
        assert_eq!(parse_chunks(&chunks), expected());
    }

    #[test]
    fn every_two_way_and_many_pseudo_random_splits_agree() {
        for cut in 0..=RESPONSES.len() {
            let (a, b) = RESPONSES.split_at(cut);
            assert_eq!(parse_chunks(&[a, b]), expected(), "cut at {cut}");
        }
        let mut rng = crate::rng::Rng::new(7);
        for _ in 0..500 {
            let mut chunks = Vec::new();
            let mut rest = RESPONSES;
            while !rest.is_empty() {
                let n = (rng.below(9) as usize + 1).min(rest.len());
                let (a, b) = rest.split_at(n);
                chunks.push(a);
                rest = b;
            }
            assert_eq!(parse_chunks(&chunks), expected());
        }
    }

    #[test]
    fn chat_done_and_events_without_data() {
        let got = parse_chunks(&[b"data: {\"a\":1}\n\nevent: ping\n\ndata: [DONE]\n\n"]);
        assert_eq!(
            got,
            vec![(None, "{\"a\":1}".into()), (None, "[DONE]".into())]
        );
    }

    #[test]
    fn unterminated_event_is_not_dispatched_and_stop_is_honoured() {
        assert!(parse_chunks(&[b"data: half"]).is_empty());
        let mut p = SseParser::new();
        let mut n = 0;
        let cont = p.feed(Bytes::from_static(b"data: 1\n\ndata: 2\n\n"), |_| {
            n += 1;
            false
        });
        assert!(!cont);
        assert_eq!(n, 1);
    }

    #[test]
    fn single_line_data_is_zero_copy() {
        let chunk = Bytes::from_static(b"data: abc\n\n");
        let mut p = SseParser::new();
        let mut ptr = None;
        p.feed(chunk.clone(), |e| {
            ptr = Some(e.data.as_ptr());
            true
        });
        assert_eq!(ptr, Some(chunk[6..].as_ptr()));
    }

    #[test]
    fn a_long_line_costs_linear_time_and_the_line_limit_holds() {
        // 64 MiB in 4 KiB reads, no line ending until the end: re-copying the partial line
        // on every read (the old behaviour) moves ~0.5 TB and takes minutes; appending
        // takes milliseconds. The bound is generous for a loaded machine.
        let limits = SseLimits {
            max_line: 128 << 20,
            max_event: 128 << 20,
        };
        let mut p = SseParser::with_limits(limits);
        let piece = Bytes::from(vec![b'x'; 4096]);
        let t = crate::clock::now();
        assert!(p.feed(Bytes::from_static(b"data: "), |_| true));
        for _ in 0..(64 << 20) / 4096 {
            assert!(p.feed(piece.clone(), |_| true));
        }
        let mut got = 0;
        assert!(p.feed(Bytes::from_static(b"\n\n"), |e| {
            got = e.data.len();
            true
        }));
        assert_eq!(got, 64 << 20);
        let took = crate::clock::since(t);
        assert!(took < std::time::Duration::from_secs(10), "{took:?}");

        // Over the line limit: stop, say which limit, accept nothing more.
        let mut p = SseParser::with_limits(SseLimits {
            max_line: 1000,
            max_event: 10_000,
        });
        assert!(p.feed(Bytes::from_static(b"data: 1\n\n"), |_| true));
        let mut stopped = false;
        for _ in 0..10 {
            if !p.feed(Bytes::from(vec![b'y'; 300]), |_| true) {
                stopped = true;
                break;
            }
        }
        assert!(stopped);
        assert_eq!(p.overflow(), Some(SseOverflow::Line(1000)));
        assert!(p.partial.capacity() < 2000);
        assert!(!p.feed(Bytes::from_static(b"\n\ndata: 2\n\n"), |_| panic!(
            "no more events"
        )));
        // A line over the limit inside one read, too.
        let mut p = SseParser::with_limits(SseLimits {
            max_line: 1000,
            max_event: 10_000,
        });
        let mut long = vec![b'z'; 1500];
        long.extend_from_slice(b"\n\n");
        assert!(!p.feed(Bytes::from(long), |_| true));
        assert_eq!(p.overflow(), Some(SseOverflow::Line(1000)));
    }

    #[test]
    fn the_event_limit_counts_joined_data_lines() {
        let mut p = SseParser::with_limits(SseLimits {
            max_line: 100,
            max_event: 250,
        });
        let line = format!("data: {}\n", "a".repeat(90));
        let mut fed = true;
        for _ in 0..5 {
            fed = p.feed(Bytes::from(line.clone()), |_| true);
            if !fed {
                break;
            }
        }
        assert!(!fed);
        assert_eq!(p.overflow(), Some(SseOverflow::Event(250)));
        assert!(p.overflow().unwrap().to_string().contains("250 bytes"));
    }

    #[test]
    fn a_leading_bom_is_dropped_at_every_split_and_only_at_the_start() {
        let mut with_bom = b"\xEF\xBB\xBF".to_vec();
        with_bom.extend_from_slice(RESPONSES);
        for cut in 0..6 {
            let (a, b) = with_bom.split_at(cut);
            assert_eq!(parse_chunks(&[a, b]), expected(), "cut at {cut}");
        }
        assert_eq!(
            parse_chunks(&[&with_bom[..1], &with_bom[1..2], &with_bom[2..]]),
            expected()
        );
        // Not a BOM after all: the held bytes are given back (here: a field name).
        assert_eq!(
            parse_chunks(&[b"\xEF", b"\xBBx\ndata: a\n\n"]),
            vec![(None, "a".to_string())]
        );
        // A BOM later in the stream is data, not stripped.
        let got = parse_chunks(&[b"data: a\n\n", b"\xEF\xBB\xBFdata: b\n\n"]);
        assert_eq!(got, vec![(None, "a".to_string())]);
    }
}
