//! Fuzz targets for the wire framers: the SSE parser (against a reference model, under every
//! split) and the WebSocket frame reader (`transport::wsframe`, against tungstenite's reader
//! as the reference, under every split) feeding the Responses event decoder.

use std::io::{Read, Write};

use bytes::Bytes;
use spark_bench::backend::{Decoder, StreamEvent};
use spark_bench::rng::Rng;
use spark_bench::transport::sse::SseParser;
use spark_bench::transport::WireEvent;
use spark_bench::vocab::ApiFlavour;
use tokio_tungstenite::tungstenite::protocol::{Message, Role, WebSocket};

use super::decode::{check_stream, responses_event};
use super::engine::{pick, splits, Target};

pub const SSE: Target = Target {
    name: "sse",
    dict: &[
        b"data:",
        b"data: ",
        b"event: ",
        b"id: 1",
        b"retry: 10",
        b": keep-alive",
        b"\n",
        b"\r\n",
        b"\r",
        b"\n\n",
        b"\r\n\r\n",
        b"\r\r",
        b"[DONE]",
        b"data",
        b":",
        b"\xef\xbb\xbf",
    ],
    generate: gen_sse,
    run: run_sse,
};

type Ev = (Option<Vec<u8>>, Vec<u8>);

fn gen_sse(r: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    let eol: &[&[u8]] = &[b"\n", b"\r\n", b"\r"];
    for _ in 0..r.below(12) {
        for _ in 0..r.below(4) + 1 {
            match r.below(8) {
                0 => out.extend_from_slice(b"event: response.output_text.delta"),
                1 => out.extend_from_slice(b": comment"),
                2 => out.extend_from_slice(pick(
                    r,
                    &[b"id: 7" as &[u8], b"retry: 3000", b"x-unknown: 1"],
                )),
                3 => out.extend_from_slice(b"data"),
                _ => {
                    out.extend_from_slice(pick(r, &[b"data: " as &[u8], b"data:", b"data:  "]));
                    out.extend_from_slice(&responses_event(r));
                }
            }
            out.extend_from_slice(pick(r, eol));
        }
        out.extend_from_slice(pick(r, eol));
    }
    out
}

/// The reference model: the WHATWG event-stream rules the parser implements, written
/// independently and without incremental state (whole input, one pass). One U+FEFF byte
/// order mark at the very start of the stream is dropped, as the spec's decoder does.
fn reference(b: &[u8]) -> Vec<Ev> {
    let b = b.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(b);
    let mut out = Vec::new();
    let (mut event, mut data): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
    let mut i = 0;
    let mut start = 0;
    while i < b.len() {
        if b[i] != b'\n' && b[i] != b'\r' {
            i += 1;
            continue;
        }
        let line = &b[start..i];
        i += if b[i] == b'\r' && b.get(i + 1) == Some(&b'\n') {
            2
        } else {
            1
        };
        start = i;
        if line.is_empty() {
            match data.take() {
                Some(d) => out.push((event.take(), d)),
                None => event = None,
            }
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (name, value) = match line.iter().position(|&c| c == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => match data.as_mut() {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(value);
                }
                None => data = Some(value.to_vec()),
            },
            b"event" => event = Some(value.to_vec()),
            _ => {}
        }
    }
    out
}

fn run_sse(input: &[u8], r: &mut Rng) -> Result<(), String> {
    let want = reference(input);
    for round in 0..3 {
        let mut parts: Vec<&[u8]> = splits(input, r);
        // Empty reads happen (an empty HTTP/2 DATA frame): they must change nothing.
        for _ in 0..r.below(3) {
            let at = r.below(parts.len() as u64 + 1) as usize;
            parts.insert(at, b"");
        }
        let mut p = SseParser::new();
        let mut got: Vec<Ev> = Vec::new();
        for part in &parts {
            p.feed(Bytes::copy_from_slice(part), |e| {
                got.push((e.event.map(|b| b.to_vec()), e.data.to_vec()));
                true
            });
        }
        if got != want {
            return Err(format!(
                "round {round}: {} events from {} reads, the reference model has {}; first difference at event {}",
                got.len(),
                parts.len(),
                want.len(),
                got.iter().zip(&want).take_while(|(a, b)| a == b).count()
            ));
        }
    }
    // A consumer that says stop after k events gets exactly k and `false`.
    let k = r.below(want.len() as u64 + 2) as usize + 1;
    let mut p = SseParser::new();
    let mut n = 0;
    let mut cont = true;
    for part in splits(input, r) {
        cont = p.feed(Bytes::copy_from_slice(part), |_| {
            n += 1;
            n < k
        });
        if !cont {
            break;
        }
    }
    if n != k.min(want.len()) || cont != (k > want.len()) {
        return Err(format!(
            "stop after {k}: {n} events delivered, feed said {cont}"
        ));
    }
    Ok(())
}

pub const WS: Target = Target {
    name: "ws",
    dict: &[
        b"\x81",
        b"\x01",
        b"\x80",
        b"\x82",
        b"\x88\x00",
        b"\x88\x02\x03\xf3",
        b"\x89\x00",
        b"\x8a\x00",
        b"\x7e\xff\xff",
        b"\x7f\x00\x00\x00\x00\x00\x00\xff\xff",
        b"\x8f",
        b"\xc1",
        b"{\"type\":\"response.completed\"}",
        b"\xff\xfe",
    ],
    generate: gen_ws,
    run: run_ws,
};

/// One server frame: FIN/RSV/opcode, the length in its shortest or a longer encoding, an
/// optional (forbidden) mask, the payload.
fn frame(out: &mut Vec<u8>, first: u8, payload: &[u8], r: &mut Rng) {
    out.push(first);
    let masked = r.below(40) == 0;
    let m = if masked { 0x80 } else { 0 };
    let n = payload.len();
    match (n, r.below(20)) {
        (0..=125, 1..) => out.push(m | n as u8),
        (0..=0xffff, 0..=18) => {
            out.push(m | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        _ => {
            out.push(m | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    if masked {
        out.extend_from_slice(&[1, 2, 3, 4]);
    }
    out.extend_from_slice(payload);
}

fn gen_ws(r: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..r.below(10) + 1 {
        match r.below(12) {
            0 => frame(&mut out, 0x89, b"ping", r),
            1 => frame(&mut out, 0x8a, b"", r),
            2 => frame(&mut out, 0x82, &[0, 159, 146, 150], r),
            3 => {
                let code = *pick(r, &[&1000u16, &1011, &1001, &999, &5000, &1005]);
                let mut p = code.to_be_bytes().to_vec();
                if r.below(2) == 0 {
                    p.extend_from_slice(b"server going away");
                }
                frame(&mut out, 0x88, if r.below(4) == 0 { &[] } else { &p }, r)
            }
            4 => {
                // A text message in fragments.
                let ev = responses_event(r);
                let cut = r.below(ev.len() as u64 + 1) as usize;
                frame(&mut out, 0x01, &ev[..cut], r);
                frame(&mut out, 0x80, &ev[cut..], r);
            }
            5 => frame(&mut out, 0x81, b"\xc3\x28 not utf-8", r),
            6 => frame(&mut out, 0x80 | (r.below(16) as u8), b"", r),
            _ => frame(&mut out, 0x81, &responses_event(r), r),
        }
    }
    out
}

/// The server's bytes, delivered in the given reads; what the client writes (pongs, the
/// close reply) is discarded.
struct Wire<'a> {
    parts: Vec<&'a [u8]>,
    next: usize,
}

impl Read for Wire<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Some(part) = self.parts.get_mut(self.next) else {
            return Ok(0);
        };
        let n = part.len().min(buf.len());
        buf[..n].copy_from_slice(&part[..n]);
        *part = &part[n..];
        if part.is_empty() {
            self.next += 1;
        }
        Ok(n)
    }
}

impl Write for Wire<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What a reader saw: the messages up to the first Close (texts, and what else came), and
/// whether the stream then failed.
type Seen = (Vec<Result<String, String>>, bool);

/// Reads every message the client would see with `transport::wsframe::Reader`, up to the
/// first Close (after which the client reads nothing).
fn ws_messages(parts: Vec<&[u8]>, limit: usize) -> Result<Seen, String> {
    use spark_bench::transport::wsframe::{Incoming, Reader};
    let mut r = Reader::default();
    let mut out = Vec::new();
    let mut parts = parts.into_iter();
    let mut part: &[u8] = &[];
    let mut taken = 0;
    // Every feed below takes at least one byte, so this ends.
    loop {
        let got = r.message();
        if matches!(got, Ok(Some(_))) {
            taken += 1;
            if taken > limit {
                return Err(format!("still reading after {limit} messages"));
            }
        }
        match got {
            Ok(Some(Incoming::Text(t))) => out.push(Ok(t.as_str().to_string())),
            Ok(Some(Incoming::Close(code, _))) => {
                out.push(Err(format!("close {code}")));
                return Ok((out, false));
            }
            Ok(Some(Incoming::Binary(n))) => out.push(Err(format!("binary {n}"))),
            Ok(Some(Incoming::Ping(_) | Incoming::Pong)) => {}
            Err(e) => {
                let _ = e.to_string();
                return Ok((out, true));
            }
            Ok(None) => {
                if part.is_empty() {
                    match parts.next() {
                        Some(p) => part = p,
                        // The end of the stream without a Close frame.
                        None => return Ok((out, true)),
                    }
                }
                let n = r.feed(part);
                part = &part[n..];
            }
        }
    }
}

/// The same with tungstenite's reader (with the client's limits), the reference.
fn ws_messages_tungstenite(parts: Vec<&[u8]>, limit: usize) -> Result<Seen, String> {
    let wire = Wire { parts, next: 0 };
    let config = spark_bench::transport::ws::ws_config();
    let mut ws = WebSocket::from_raw_socket(wire, Role::Client, Some(config));
    let mut out = Vec::new();
    for _ in 0..limit {
        match ws.read() {
            Ok(Message::Text(t)) => {
                std::str::from_utf8(t.as_bytes()).map_err(|e| format!("text not UTF-8: {e}"))?;
                out.push(Ok(t.as_str().to_string()));
            }
            Ok(Message::Close(c)) => {
                let code = c.map_or(1005, |c| u16::from(c.code));
                out.push(Err(format!("close {code}")));
                return Ok((out, false));
            }
            Ok(Message::Binary(b)) => out.push(Err(format!("binary {}", b.len()))),
            Ok(_) => {}
            Err(e) => {
                let _ = e.to_string();
                return Ok((out, true));
            }
        }
    }
    Err(format!("still reading after {limit} messages"))
}

fn run_ws(input: &[u8], r: &mut Rng) -> Result<(), String> {
    // Every message needs a frame of at least two bytes: the reader must end by then.
    let limit = input.len() / 2 + 8;
    let whole = ws_messages(vec![input], limit)?;
    let split = ws_messages(splits(input, r), limit)?;
    if whole != split {
        return Err(format!(
            "{} messages from one read, {} from split reads",
            whole.0.len(),
            split.0.len()
        ));
    }
    let reference = ws_messages_tungstenite(vec![input], limit)?;
    if whole != reference {
        return Err(format!(
            "wsframe read {:?}, tungstenite {:?}",
            whole, reference
        ));
    }
    let mut d = Decoder::new(ApiFlavour::Responses);
    let mut evs: Vec<StreamEvent> = Vec::new();
    for m in whole.0.iter() {
        let Ok(t) = m else { break };
        let ev = WireEvent::WsText {
            at_ns: 0,
            text: t.as_str().into(),
        };
        d.decode(&ev, &mut |e| evs.push(e));
    }
    d.decode(&WireEvent::End { at_ns: 0 }, &mut |e| evs.push(e));
    check_stream(&evs, &d)
}
