//! WebSocket framing for the client side of an open socket (RFC 6455 §5): the server's
//! frames read out of a byte buffer into messages, and the client's masked frames.
//!
//! Owns: the read buffer, frame headers (parsed by tungstenite's [`FrameHeader::parse`]),
//! joining fragments, the rules a client applies to what it reads, and the bytes of a
//! masked text, pong frame. The rules and their errors are tungstenite's own
//! (`WebSocketContext::read_message_frame` in tungstenite 0.30), given as
//! `tungstenite::Error` values, so that a server gets the same verdicts (and the same
//! messages) as when tungstenite read the socket: reserved bits, a masked server frame, a
//! fragmented or oversized control frame, an unknown opcode, a continuation out of place,
//! the frame and message limits (before a payload is buffered), invalid UTF-8, a close
//! code a client may not receive (read as 1002, "Protocol violation"), and the end of the
//! stream without a Close frame.
//! Does not own: the socket (`ws` reads into [`Reader::spare`] and calls [`Reader::message`])
//! or the upgrade (tungstenite's handshake).
//!
//! Why not tungstenite's reader: it zero-fills its read buffer before every read, splits
//! each payload out of a shared `BytesMut` and routes every wake-up through a waker proxy;
//! with one chunk per read that cost ~0.3 µs a chunk (`examples/read_floor.rs`,
//! `ws-tungstenite` against `ws`; docs/measurements.md).

use std::io::Cursor;
use std::mem::MaybeUninit;

use bytes::{Buf, Bytes, BytesMut};
use tokio_tungstenite::tungstenite::error::{CapacityError, ProtocolError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Control, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{Frame, FrameHeader};
use tokio_tungstenite::tungstenite::{Error, Utf8Bytes};

use super::limits::{WS_FRAME, WS_MESSAGE};

/// The read buffer's usual size: streaming events are a few hundred bytes; a larger frame
/// grows it as far as it needs.
const READ_SIZE: usize = 8 * 1024;

/// One message from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A text message (its frames joined), UTF-8.
    Text(Utf8Bytes),
    /// A binary message, its length.
    Binary(usize),
    /// A Close frame: its code (1005 when it has none) and reason.
    Close(u16, String),
    /// A Ping: its payload is to be sent back in a Pong.
    Ping(Bytes),
    /// A Pong.
    Pong,
}

/// A message whose first frames came.
struct Partial {
    text: bool,
    data: Vec<u8>,
    /// Text: how much of `data` is known to be UTF-8. Each fragment is checked as it comes
    /// (from here on, so many small fragments cost no more than one), so an invalid one
    /// fails the stream at once, as tungstenite fails it.
    checked: usize,
}

impl Partial {
    fn extend(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.data.extend_from_slice(payload);
        if self.text {
            match std::str::from_utf8(&self.data[self.checked..]) {
                Ok(_) => self.checked = self.data.len(),
                // A character cut at the end of a fragment: the next one completes it.
                Err(e) if e.error_len().is_none() => self.checked += e.valid_up_to(),
                Err(e) => return Err(Error::Utf8(e.to_string())),
            }
        }
        Ok(())
    }
}

/// The server's side of one socket: bytes read and not yet taken, and a message in
/// fragments.
pub struct Reader {
    /// A frame's payload is split off it and handed on as it is, without a copy; once the
    /// messages are dropped, the next read reuses the same allocation.
    buf: BytesMut,
    partial: Option<Partial>,
    /// Bytes the frame being read needs in all (its header and payload), when more than
    /// are buffered: a read hint.
    short: usize,
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new(Vec::new())
    }
}

impl Reader {
    /// A reader that starts with `tail`: bytes that came after the upgrade's response head.
    pub fn new(tail: Vec<u8>) -> Self {
        Reader {
            buf: BytesMut::from(&tail[..]),
            partial: None,
            short: 0,
        }
    }

    /// Room for the next read, at least `READ_SIZE` (8 KiB) or what the frame being read still
    /// needs. Fill it, then call [`Reader::filled`].
    pub fn spare(&mut self) -> &mut [MaybeUninit<u8>] {
        self.buf.reserve(READ_SIZE.max(self.short));
        self.buf.spare_capacity_mut()
    }

    /// Records that the first `n` bytes of [`Reader::spare`] were filled by a read.
    ///
    /// # Safety
    /// Those bytes must have been initialised.
    pub unsafe fn filled(&mut self, n: usize) {
        debug_assert!(n <= self.buf.capacity() - self.buf.len());
        self.buf.set_len(self.buf.len() + n);
    }

    /// Copies into the buffer as much of `bytes` as one read would take (what
    /// [`Reader::spare`] has room for); returns how many. For bytes that did not come from
    /// the socket (tests, the fuzz target).
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        let spare = self.spare();
        let n = spare.len().min(bytes.len());
        for (d, s) in spare.iter_mut().zip(&bytes[..n]) {
            d.write(*s);
        }
        // SAFETY: the loop above initialised the first `n` bytes of the spare room.
        unsafe { self.filled(n) };
        n
    }

    /// The next message in what has been read, or `None` when more bytes are needed. An
    /// error leaves the reader in no state to go on: the socket is to be dropped.
    pub fn message(&mut self) -> Result<Option<Incoming>, Error> {
        loop {
            let mut cursor = Cursor::new(&self.buf[..]);
            let Some((header, len)) = FrameHeader::parse(&mut cursor)? else {
                self.short = 0;
                return Ok(None);
            };
            if len > WS_FRAME as u64 {
                return Err(too_long(len as usize));
            }
            let head = cursor.position() as usize;
            let len = len as usize;
            if self.buf.len() - head < len {
                self.short = head + len;
                return Ok(None);
            }
            self.buf.advance(head);
            let payload = self.buf.split_to(len);
            if let Some(m) = frame(&mut self.partial, &header, payload)? {
                return Ok(Some(m));
            }
        }
    }
}

/// One whole frame: a message, or `None` when it was a fragment (kept in `partial`).
fn frame(
    partial: &mut Option<Partial>,
    header: &FrameHeader,
    payload: BytesMut,
) -> Result<Option<Incoming>, Error> {
    if header.rsv1 || header.rsv2 || header.rsv3 {
        return Err(Error::Protocol(ProtocolError::NonZeroReservedBits));
    }
    if header.mask.is_some() {
        return Err(Error::Protocol(ProtocolError::MaskedFrameFromServer));
    }
    let data = match header.opcode {
        OpCode::Control(ctl) => {
            if !header.is_final {
                return Err(Error::Protocol(ProtocolError::FragmentedControlFrame));
            }
            if payload.len() > 125 {
                return Err(Error::Protocol(ProtocolError::ControlFrameTooBig));
            }
            return match ctl {
                Control::Close => close(&payload).map(Some),
                Control::Ping => Ok(Some(Incoming::Ping(payload.freeze()))),
                Control::Pong => Ok(Some(Incoming::Pong)),
                Control::Reserved(i) => {
                    Err(Error::Protocol(ProtocolError::UnknownControlFrameType(i)))
                }
            };
        }
        OpCode::Data(data) => data,
    };
    match (data, partial.as_mut()) {
        (Data::Continue, None) => Err(Error::Protocol(ProtocolError::UnexpectedContinueFrame)),
        (Data::Continue, Some(p)) => {
            if p.data.len() + payload.len() > WS_MESSAGE {
                return Err(too_long(p.data.len() + payload.len()));
            }
            p.extend(&payload)?;
            if !header.is_final {
                return Ok(None);
            }
            let p = partial.take().expect("matched above");
            message(p.text, Bytes::from(p.data)).map(Some)
        }
        (_, Some(_)) => Err(Error::Protocol(ProtocolError::ExpectedFragment(data))),
        (Data::Reserved(i), None) => Err(Error::Protocol(ProtocolError::UnknownDataFrameType(i))),
        (Data::Text | Data::Binary, None) => {
            let text = data == Data::Text;
            if header.is_final {
                if payload.len() > WS_MESSAGE {
                    return Err(too_long(payload.len()));
                }
                message(text, payload.freeze()).map(Some)
            } else {
                let mut p = Partial {
                    text,
                    data: Vec::new(),
                    checked: 0,
                };
                p.extend(&payload)?;
                *partial = Some(p);
                Ok(None)
            }
        }
    }
}

fn too_long(size: usize) -> Error {
    Error::Capacity(CapacityError::MessageTooLong {
        size,
        max_size: WS_MESSAGE,
    })
}

fn message(text: bool, data: Bytes) -> Result<Incoming, Error> {
    if text {
        Ok(Incoming::Text(Utf8Bytes::try_from(data)?))
    } else {
        Ok(Incoming::Binary(data.len()))
    }
}

/// A Close frame's code and reason. A code a client may not receive (1005, 1006, 1015, one
/// below 1000 or reserved) reads as 1002, "Protocol violation", as tungstenite reports it.
fn close(payload: &[u8]) -> Result<Incoming, Error> {
    match payload {
        [] => Ok(Incoming::Close(1005, String::new())),
        [_] => Err(Error::Protocol(ProtocolError::InvalidCloseSequence)),
        [a, b, reason @ ..] => {
            let reason = std::str::from_utf8(reason)
                .map_err(|e| Error::Utf8(e.to_string()))?
                .to_string();
            let code = u16::from_be_bytes([*a, *b]);
            if CloseCode::from(code).is_allowed() {
                Ok(Incoming::Close(code, reason))
            } else {
                Ok(Incoming::Close(1002, "Protocol violation".into()))
            }
        }
    }
}

/// A client frame (masked with a fresh key, RFC 6455 §5.3) of `payload`, appended to `out`.
fn masked(out: &mut Vec<u8>, opcode: OpCode, payload: Bytes) {
    let header = FrameHeader {
        opcode,
        mask: Some(mask_key()),
        ..FrameHeader::default()
    };
    Frame::from_payload(header, payload)
        .format(out)
        .expect("writing to a Vec");
}

/// A text message as one masked frame.
pub fn text_frame(text: String) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 14);
    masked(&mut out, OpCode::Data(Data::Text), Bytes::from(text));
    out
}

/// The Pong that answers a Ping's `payload`, appended to `out`.
pub fn pong_frame(out: &mut Vec<u8>, payload: Bytes) {
    masked(out, OpCode::Control(Control::Pong), payload);
}

/// A masking key no server can predict: from the process's hash keys (which the standard
/// library draws from the OS) and a counter, through SipHash.
fn mask_key() -> [u8; 4] {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static KEYS: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let mut h = KEYS.get_or_init(Default::default).build_hasher();
    h.write_u64(COUNT.fetch_add(1, Ordering::Relaxed));
    let bits = h.finish();
    (bits as u32).to_ne_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(first: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![first];
        match payload.len() {
            n @ 0..=125 => out.push(n as u8),
            n @ 126..=0xffff => {
                out.push(126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(payload);
        out
    }

    /// Feeds `wire` in reads of `step` bytes; every message and the error, if any.
    fn read_all(wire: &[u8], step: usize) -> (Vec<Incoming>, Option<String>) {
        let mut r = Reader::default();
        let mut got = Vec::new();
        for mut part in wire.chunks(step) {
            while !part.is_empty() {
                // A read fills what room there is; the rest comes in the next.
                let n = r.feed(part);
                part = &part[n..];
                loop {
                    match r.message() {
                        Ok(Some(m)) => got.push(m),
                        Ok(None) => break,
                        Err(e) => return (got, Some(e.to_string())),
                    }
                }
            }
        }
        (got, None)
    }

    fn text(s: &str) -> Incoming {
        Incoming::Text(Utf8Bytes::from(s.to_string()))
    }

    #[test]
    fn messages_come_whole_whatever_the_reads() {
        let mut wire = server(0x81, b"{\"type\":\"a\"}");
        wire.extend(server(0x89, b"hi"));
        wire.extend(server(0x01, b"frag"));
        wire.extend(server(0x8a, b""));
        wire.extend(server(0x80, "mented \u{e9}".as_bytes()));
        let big = "x".repeat(70_000);
        wire.extend(server(0x81, big.as_bytes()));
        wire.extend(server(0x82, &[1, 2, 3]));
        wire.extend(server(0x88, &[0x03, 0xe8, b'o', b'k']));
        let want = vec![
            text("{\"type\":\"a\"}"),
            Incoming::Ping(Bytes::from_static(b"hi")),
            Incoming::Pong,
            text("fragmented \u{e9}"),
            text(&big),
            Incoming::Binary(3),
            Incoming::Close(1000, "ok".into()),
        ];
        for step in [1, 2, 3, 7, 100, 9000, wire.len()] {
            assert_eq!(read_all(&wire, step), (want.clone(), None), "step {step}");
        }
    }

    /// Each violation gets tungstenite's own error (its message, as the record shows it).
    #[test]
    fn violations_are_tungstenites_errors() {
        let long_len = {
            let mut w = vec![0x81, 127];
            w.extend_from_slice(&((WS_FRAME as u64) + 1).to_be_bytes());
            w
        };
        let cases: Vec<(Vec<u8>, Error)> = vec![
            (
                server(0xc1, b"x"),
                Error::Protocol(ProtocolError::NonZeroReservedBits),
            ),
            (
                vec![0x81, 0x81, 1, 2, 3, 4, b'x'],
                Error::Protocol(ProtocolError::MaskedFrameFromServer),
            ),
            (
                server(0x09, b""),
                Error::Protocol(ProtocolError::FragmentedControlFrame),
            ),
            (
                server(0x89, &[0; 126]),
                Error::Protocol(ProtocolError::ControlFrameTooBig),
            ),
            (
                server(0x8b, b""),
                Error::Protocol(ProtocolError::InvalidOpcode(11)),
            ),
            (
                server(0x80, b"x"),
                Error::Protocol(ProtocolError::UnexpectedContinueFrame),
            ),
            (
                [server(0x01, b"a"), server(0x81, b"b")].concat(),
                Error::Protocol(ProtocolError::ExpectedFragment(Data::Text)),
            ),
            (
                server(0x88, &[3]),
                Error::Protocol(ProtocolError::InvalidCloseSequence),
            ),
            (long_len, too_long(WS_FRAME + 1)),
        ];
        for (wire, want) in cases {
            let (_, err) = read_all(&wire, wire.len());
            assert_eq!(err, Some(want.to_string()), "{wire:x?}");
        }
        // Invalid UTF-8, in one frame and across fragments.
        let (_, err) = read_all(&server(0x81, b"\xc3\x28"), 64);
        assert!(err.unwrap().contains("UTF-8"));
        let wire = [server(0x01, b"\xc3"), server(0x80, b"\x28")].concat();
        assert!(read_all(&wire, 64).1.unwrap().contains("UTF-8"));
        // An invalid fragment fails at once, before a Close that follows it, first or not.
        for wire in [
            [server(0x01, b"\xff"), server(0x88, b"")].concat(),
            [server(0x01, b"a"), server(0x00, b"\xff"), server(0x88, b"")].concat(),
        ] {
            let (got, err) = read_all(&wire, 64);
            assert_eq!((got, err.is_some()), (vec![], true), "{wire:x?}");
        }
        // A character cut between fragments is not an error.
        let e = "\u{e9}".as_bytes();
        let wire = [server(0x01, &e[..1]), server(0x80, &e[1..])].concat();
        assert_eq!(read_all(&wire, 64), (vec![text("\u{e9}")], None));
    }

    #[test]
    fn close_codes_a_client_may_not_receive_read_as_1002() {
        for (code, want) in [
            (1000, 1000),
            (1011, 1011),
            (4000, 4000),
            (1005, 1002),
            (999, 1002),
            (5000, 1002),
        ] {
            let mut payload = u16::to_be_bytes(code).to_vec();
            payload.extend_from_slice(b"bye");
            let (got, err) = read_all(&server(0x88, &payload), 64);
            assert_eq!(err, None);
            let reason = if want == 1002 {
                "Protocol violation"
            } else {
                "bye"
            };
            assert_eq!(got, vec![Incoming::Close(want, reason.into())], "{code}");
        }
        assert_eq!(
            read_all(&server(0x88, b""), 64).0,
            vec![Incoming::Close(1005, String::new())]
        );
    }

    #[test]
    fn a_frame_at_the_limit_is_waited_for_with_room_for_all_of_it() {
        let mut r = Reader::default();
        let head = [0x01, 127];
        let mut wire = head.to_vec();
        wire.extend_from_slice(&(WS_FRAME as u64).to_be_bytes());
        // The header alone says the frame is at the limit: allowed, and the reader waits.
        assert_eq!(r.feed(&wire), wire.len());
        assert_eq!(r.message().map_err(|e| e.to_string()), Ok(None));
        // It asks for room for the whole frame in one read, no more.
        assert!(r.spare().len() >= WS_FRAME);
    }

    /// The client's frames are masked, and unmask to what was sent (tungstenite, the server
    /// side, reads them back).
    #[test]
    fn client_frames_are_masked_and_read_back() {
        let wire = text_frame("héllo".to_string());
        assert_eq!(wire[0], 0x81);
        assert_eq!(wire[1], 0x80 | 6);
        assert_ne!(&wire[6..], "héllo".as_bytes());
        let mut cursor = Cursor::new(&wire[..]);
        let (header, len) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
        let mask = header.mask.expect("masked");
        let start = cursor.position() as usize;
        let plain: Vec<u8> = wire[start..start + len as usize]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4])
            .collect();
        assert_eq!(plain, "héllo".as_bytes());
        let mut pong = Vec::new();
        pong_frame(&mut pong, Bytes::from_static(b"hi"));
        assert_eq!(pong[0], 0x8a);
        assert_ne!(text_frame("a".into())[2..6], text_frame("a".into())[2..6]);
    }
}
