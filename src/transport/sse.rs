//! A pure, incremental Server-Sent Events parser.
//!
//! Owns: turning arbitrary splits of a `text/event-stream` body into complete events
//! (`event:` name + joined `data:` lines), following the WHATWG rules that matter here:
//! LF, CRLF and CR line endings, comment lines (`:`), multi-line `data:`, one optional
//! space after the colon, events split across reads and several events in one read.
//! Does not own: clocks, I/O or JSON. The caller stamps the read that delivered the bytes
//! and every event completed by that read shares the stamp.
//!
//! Hot path: when an event's `data` is a single line (the usual case) it is a zero-copy
//! slice of the read buffer; only a partial line left at the end of a read is copied.

use bytes::{Bytes, BytesMut};

/// One complete SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when present.
    pub event: Option<Bytes>,
    /// The `data:` lines joined with `\n`.
    pub data: Bytes,
}

/// Incremental parser state. Feed it body chunks in order; it calls back once per event.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of an unfinished line carried over from the previous chunk.
    partial: BytesMut,
    /// The previous chunk ended in `\r`: a leading `\n` in the next chunk belongs to it.
    skip_lf: bool,
    event: Option<Bytes>,
    /// First data line (zero-copy) ...
    data: Option<Bytes>,
    /// ... and, only when there are several, the joined lines.
    data_multi: Option<BytesMut>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one chunk; calls `on_event` for every event the chunk completes.
    /// Returns `false` as soon as `on_event` returns `false` (the rest is dropped).
    pub fn feed(&mut self, chunk: Bytes, mut on_event: impl FnMut(SseEvent) -> bool) -> bool {
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
            if !self.line(&buf, pos, end, &mut on_event) {
                self.partial.clear();
                return false;
            }
            pos = next;
        }
        if pos < len {
            self.partial.extend_from_slice(&buf[pos..]);
        }
        true
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
        let (name, value_start) = match line.iter().position(|&b| b == b':') {
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

fn memchr2(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&x| x == a || x == b)
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
}
