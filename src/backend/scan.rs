//! A strict pull scanner over a subset of JSON, for the decoders' fast path.
//!
//! Owns: reading the common shape of a streamed event (an object of plain strings, numbers,
//! literals and nested containers) without serde's visitor machinery, a `Vec` per array or
//! a copy per key: about a third of the harness's CPU per chunk went to serde_json on the
//! 200-byte chunks of a stream (docs/measurements.md, "Where a chunk's CPU goes").
//! Does not own: what the fields mean (the decoders), nor any error message: every `None`
//! here means "not handled by the fast path", and the caller hands the same bytes to
//! serde_json, which decides and words the error.
//!
//! The rule that makes the fast path safe: it accepts only text that serde_json accepts too,
//! never more. The subset is JSON with
//! - the whole text valid UTF-8,
//! - no escape in a key, and only JSON's escapes in a value, with `\\uXXXX` outside the
//!   surrogates (a pair sends the event to serde_json),
//! - no raw control character in a string,
//! - numbers of JSON's own grammar,
//! - nesting at most [`MAX_DEPTH`] deep (serde_json's limit is 128).
//!
//! Anything else, including a well-formed text outside the subset, is `None`.

use std::borrow::Cow;

/// Deepest nesting the scanner follows before it gives the text to serde_json.
pub const MAX_DEPTH: u32 = 64;

/// A cursor over one JSON text.
pub struct Cursor<'a> {
    text: &'a str,
    at: usize,
    depth: u32,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`; `None` when they are not UTF-8.
    pub fn new(bytes: &'a [u8]) -> Option<Self> {
        Some(Self::of_str(std::str::from_utf8(bytes).ok()?))
    }

    /// A cursor at the start of a text already known to be UTF-8 (a WebSocket text
    /// message, checked by the transport).
    pub fn of_str(text: &'a str) -> Self {
        Cursor {
            text,
            at: 0,
            depth: 0,
        }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_ws(&mut self) {
        let b = self.bytes();
        while self.at < b.len() && matches!(b[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes().get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.at += 1)
    }

    /// Only whitespace is left (what serde_json's `from_slice` requires after the value).
    pub fn end(&mut self) -> Option<()> {
        (self.peek().is_none()).then_some(())
    }

    /// An object: calls `member(cursor, key)` for each member, with the cursor before the
    /// member's value, which `member` must consume (with [`Cursor::skip`] where it has no use
    /// for it).
    pub fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.nest(|c| {
            if c.eat(b'}').is_some() {
                return Some(());
            }
            loop {
                let key = c.string()?;
                c.eat(b':')?;
                member(c, key)?;
                match c.peek()? {
                    b',' => c.at += 1,
                    b'}' => {
                        c.at += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        })
    }

    /// An array: calls `element(cursor)` before each element, which it must consume.
    pub fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.nest(|c| {
            if c.eat(b']').is_some() {
                return Some(());
            }
            loop {
                element(c)?;
                match c.peek()? {
                    b',' => c.at += 1,
                    b']' => {
                        c.at += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        })
    }

    fn nest(&mut self, inside: impl FnOnce(&mut Self) -> Option<()>) -> Option<()> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let r = inside(self);
        self.depth -= 1;
        r
    }

    /// A string, its escapes decoded: borrowed where it has none.
    pub fn text(&mut self) -> Option<Cow<'a, str>> {
        self.string_value(true)
    }

    /// A string, checked as [`Cursor::text`] checks it; with `keep`, decoded (borrowed where
    /// it has no escape), else passed over without a copy (`Cow::Borrowed("")`): a skipped
    /// field, such as the whole text a Responses stream repeats in its closing events, is
    /// never allocated.
    fn string_value(&mut self, keep: bool) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let b = self.bytes();
        let mut from = self.at;
        let mut owned: Option<String> = None;
        loop {
            // A control character is not allowed raw in a JSON string.
            let end = plain_end(b, from).filter(|&e| b[e] >= 0x20)?;
            let plain = self.text.get(from..end)?;
            if b[end] == b'"' {
                self.at = end + 1;
                return Some(match owned {
                    _ if !keep => Cow::Borrowed(""),
                    None => Cow::Borrowed(plain),
                    Some(mut s) => {
                        s.push_str(plain);
                        Cow::Owned(s)
                    }
                });
            }
            if keep {
                owned.get_or_insert_with(String::new).push_str(plain);
            }
            let (ch, used) = match *b.get(end + 1)? {
                b'"' => ('"', 2),
                b'\\' => ('\\', 2),
                b'/' => ('/', 2),
                b'b' => ('\u{8}', 2),
                b'f' => ('\u{c}', 2),
                b'n' => ('\n', 2),
                b'r' => ('\r', 2),
                b't' => ('\t', 2),
                b'u' => {
                    let hex = b.get(end + 2..end + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    let v = hex
                        .iter()
                        .fold(0u32, |v, &h| v * 16 + (h as char).to_digit(16).unwrap_or(0));
                    // A surrogate is half of a pair: serde_json's to join or refuse.
                    (char::from_u32(v)?, 6)
                }
                _ => return None,
            };
            if let Some(s) = owned.as_mut() {
                s.push(ch);
            }
            from = end + used;
        }
    }

    /// `null` or a string, its escapes decoded.
    pub fn opt_text(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null()? {
            return Some(None);
        }
        self.text().map(Some)
    }

    /// A string without escapes or control characters (a key).
    pub fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let b = self.bytes();
        let start = self.at;
        let end = plain_end(b, start)?;
        if b[end] != b'"' {
            return None;
        }
        self.at = end + 1;
        // Both ends sit next to an ASCII quote: char boundaries of the validated text.
        self.text.get(start..end)
    }

    /// A field's value read by `read`, or `None` for `null`; the field seen at most once in
    /// its object (see [`once`]).
    pub fn nullable<T>(
        &mut self,
        seen: &mut bool,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        once(seen)?;
        if self.null()? {
            return Some(None);
        }
        read(self).map(Some)
    }

    /// `null` (then `true`) or nothing consumed (then `false`).
    pub fn null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' {
            self.literal("null")?;
            return Some(true);
        }
        Some(false)
    }

    /// `null` or a non-negative integer that fits a `u32`, written as plain digits (a
    /// fraction, an exponent or a sign is serde_json's to judge).
    pub fn opt_u32(&mut self) -> Option<Option<u32>> {
        if self.null()? {
            return Some(None);
        }
        let b = self.bytes();
        let start = self.at;
        let mut end = start;
        while end < b.len() && b[end].is_ascii_digit() {
            end += 1;
        }
        let digits = self.text.get(start..end)?;
        if digits.is_empty()
            || (digits.len() > 1 && digits.starts_with('0'))
            || matches!(b.get(end), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        self.at = end;
        digits.parse().ok().map(Some)
    }

    /// `null` or a number, as serde_json reads it into an `f64` (its own parser, on the
    /// number's text alone, so the value is the same to the last bit); a number serde_json
    /// refuses (out of range) is serde_json's to word.
    pub fn opt_f64(&mut self) -> Option<Option<f64>> {
        if self.null()? {
            return Some(None);
        }
        let start = self.at;
        self.number()?;
        let digits = self.text.get(start..self.at)?;
        serde_json::from_str(digits).ok().map(Some)
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        let rest = self.bytes().get(self.at..)?;
        rest.starts_with(word.as_bytes())
            .then(|| self.at += word.len())
    }

    /// Any one value, checked and passed over.
    pub fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'{' => self.object(|c, _| c.skip()),
            b'[' => self.array(|c| c.skip()),
            b'"' => self.string_value(false).map(drop),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            _ => self.number(),
        }
    }

    /// A number of JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        let b = self.bytes();
        let mut i = self.at;
        let digits = |i: &mut usize| {
            let s = *i;
            while *i < b.len() && b[*i].is_ascii_digit() {
                *i += 1;
            }
            *i > s
        };
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i)? {
            b'0' => i += 1,
            b'1'..=b'9' => {
                digits(&mut i);
            }
            _ => return None,
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i).then_some(())?;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            digits(&mut i).then_some(())?;
        }
        self.at = i;
        Some(())
    }
}

/// The index of the first quote, backslash or control character (not allowed raw in JSON)
/// at or after `from`. Eight bytes at a time: keys, ids and a token's delta are short,
/// where this beats a SIMD search's set-up; a longer run (the whole text a closing event
/// repeats) goes to `memchr` after [`SHORT_RUN`] bytes.
fn plain_end(b: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `w` that is zero sets the high bit of its lane; a lane can be flagged
    // falsely only above a true one, which `trailing_zeros` never reaches.
    let zero = |w: u64| w.wrapping_sub(ONES) & !w & HIGH;
    let stop = |w: u64| {
        let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        control | zero(w ^ (ONES * u64::from(b'"'))) | zero(w ^ (ONES * u64::from(b'\\')))
    };
    let short = b.len().min(from.checked_add(SHORT_RUN)?);
    let mut i = from;
    while i + 8 <= short {
        let w = u64::from_le_bytes(b[i..i + 8].try_into().ok()?);
        let hit = stop(w);
        if hit != 0 {
            return Some(i + (hit.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    if let Some(k) = b.get(i..short)?.iter().position(|&c| is_stop(c)) {
        return Some(i + k);
    }
    let end = memchr::memchr2(b'"', b'\\', &b[short..]).map(|k| short + k);
    let control = b[short..end.unwrap_or(b.len())]
        .iter()
        .position(|&c| c < 0x20);
    control.map(|k| short + k).or(end)
}

/// A quote, a backslash or a control character.
fn is_stop(c: u8) -> bool {
    c < 0x20 || c == b'"' || c == b'\\'
}

/// How far [`plain_end`] looks eight bytes at a time before handing a long string to
/// `memchr`.
const SHORT_RUN: usize = 64;

/// Sets `seen`, or `None` when it was set: a key twice in one object is serde's to judge
/// (a derived struct rejects a duplicate field).
pub fn once(seen: &mut bool) -> Option<()> {
    (!std::mem::replace(seen, true)).then_some(())
}

/// A token-details object as both APIs send it (`prompt_tokens_details` in chat,
/// `input_tokens_details` in Responses): the cached part of the input.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(Debug))]
pub struct TokenDetails {
    /// Input tokens served from the server's prefix cache.
    pub cached_tokens: Option<u32>,
}

/// A usage object's counts, as [`usage_counts`] reads them.
pub struct Counts {
    /// The input (prompt) tokens.
    pub input: Option<u32>,
    /// The output (completion) tokens.
    pub output: Option<u32>,
    /// The token details, when present and not `null`.
    pub details: Option<TokenDetails>,
}

/// A usage object with its input count under `keys[0]`, its output count under `keys[1]` and
/// its token details under `keys[2]`; any other key is passed over, except those in `refuse`
/// (fields serde reads into something else), which leave the whole object to serde.
pub fn usage_counts(c: &mut Cursor<'_>, keys: [&str; 3], refuse: &[&str]) -> Option<Counts> {
    let mut n = Counts {
        input: None,
        output: None,
        details: None,
    };
    let mut seen = [false; 3];
    c.object(|c, key| {
        match keys.iter().position(|k| *k == key) {
            Some(0) => {
                once(&mut seen[0])?;
                n.input = c.opt_u32()?;
            }
            Some(1) => {
                once(&mut seen[1])?;
                n.output = c.opt_u32()?;
            }
            Some(_) => {
                n.details = c.nullable(&mut seen[2], |c| {
                    Some(TokenDetails {
                        cached_tokens: cached_tokens(c)?,
                    })
                })?;
            }
            None if refuse.contains(&key) => return None,
            None => c.skip()?,
        }
        Some(())
    })?;
    Some(n)
}

/// The `cached_tokens` of a token-details object, its other fields passed over.
fn cached_tokens(c: &mut Cursor<'_>) -> Option<Option<u32>> {
    let (mut cached, mut seen) = (None, false);
    c.object(|c, key| match key {
        "cached_tokens" => {
            once(&mut seen)?;
            cached = c.opt_u32()?;
            Some(())
        }
        _ => c.skip(),
    })?;
    Some(cached)
}

/// Test support: for each shape, the shape itself and then `ROUNDS - 1` mutants of it (one to
/// three bytes cut, added or changed, from `alphabet`), each given to `check`, which says
/// whether the fast path took it. Returns (taken, all).
#[cfg(test)]
pub(crate) fn mutants(
    shapes: &[&str],
    alphabet: &[u8],
    seed: u64,
    mut check: impl FnMut(&[u8]) -> bool,
) -> (usize, usize) {
    const ROUNDS: u64 = 3_000;
    let mut rng = crate::rng::Rng::new(seed);
    let (mut taken, mut all) = (0, 0);
    for shape in shapes {
        for round in 0..ROUNDS {
            let mut t = shape.as_bytes().to_vec();
            for _ in 0..u64::from(round > 0) * (1 + rng.below(3)) {
                let i = rng.below(t.len() as u64) as usize;
                let b = alphabet[rng.below(alphabet.len() as u64) as usize];
                match rng.below(3) {
                    0 => drop(t.remove(i)),
                    1 => t.insert(i, b),
                    _ => t[i] = b,
                }
            }
            all += 1;
            taken += usize::from(check(&t));
        }
    }
    (taken, all)
}

/// Test support: whether the fast path took `text` (`quick` is its answer); where it did,
/// serde_json must read `text` too, into the same value.
#[cfg(test)]
pub(crate) fn agrees<'a, T>(text: &'a [u8], quick: Option<T>) -> bool
where
    T: std::fmt::Debug + serde::Deserialize<'a>,
{
    let Some(quick) = quick else {
        return false;
    };
    let shown = String::from_utf8_lossy(text);
    let slow: T = serde_json::from_slice(text)
        .unwrap_or_else(|e| panic!("fast path took what serde refuses ({e}): {shown}"));
    assert_eq!(format!("{quick:?}"), format!("{slow:?}"), "{shown}");
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the scanner takes `text` whole (skipping its one value).
    fn takes(text: &str) -> bool {
        Cursor::new(text.as_bytes())
            .and_then(|mut c| {
                c.skip()?;
                c.end()
            })
            .is_some()
    }

    /// `plain_end` (eight bytes at a time, then `memchr`) finds what a byte loop finds: the
    /// first quote, backslash or control character, from every start, in strings long
    /// enough to reach the `memchr` part, with the stop byte in every lane and after bytes
    /// that sit just above or below the ones it looks for.
    #[test]
    fn plain_end_finds_the_first_stop_byte_as_a_byte_loop_does() {
        let naive =
            |b: &[u8], from: usize| b[from..].iter().position(|&c| is_stop(c)).map(|k| from + k);
        let fillers: &[u8] = &[b'a', 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xff, b'/'];
        let stops: &[u8] = &[b'"', b'\\', 0x00, 0x01, 0x1f, b'\n'];
        let mut checked = 0;
        for len in 0..(SHORT_RUN + 40) {
            for &fill in fillers {
                let base = vec![fill; len];
                assert_eq!(plain_end(&base, 0), naive(&base, 0), "no stop, len {len}");
                for at in 0..len {
                    for &stop in stops {
                        let mut b = base.clone();
                        b[at] = stop;
                        for from in [0, 1, 7, 8, 9].into_iter().filter(|&f| f <= len) {
                            assert_eq!(plain_end(&b, from), naive(&b, from), "{b:?} from {from}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000, "{checked}");
    }

    #[test]
    fn a_nullable_field_is_read_once_and_null_is_none() {
        let read = |text: &str| {
            let mut c = Cursor::new(text.as_bytes())?;
            let (mut seen, mut got) = (false, None);
            c.object(|c, key| match key {
                "a" => {
                    got = c.nullable(&mut seen, |c| c.opt_u32())?;
                    Some(())
                }
                _ => c.skip(),
            })?;
            c.end()?;
            Some(got)
        };
        assert_eq!(read(r#"{"a":7}"#), Some(Some(Some(7))));
        assert_eq!(read(r#"{"a":null}"#), Some(None));
        assert_eq!(read(r#"{"b":1}"#), Some(None));
        // A duplicate key is serde's to judge (a derived struct refuses it).
        assert_eq!(read(r#"{"a":1,"a":2}"#), None);
        assert_eq!(read(r#"{"a":null,"a":null}"#), None);
    }

    #[test]
    fn u32_fields_are_plain_digits() {
        let read = |t: &str| Cursor::new(t.as_bytes())?.opt_u32();
        assert_eq!(read("17"), Some(Some(17)));
        assert_eq!(read("0"), Some(Some(0)));
        assert_eq!(read("null"), Some(None));
        assert_eq!(read("4294967295"), Some(Some(u32::MAX)));
        for t in ["4294967296", "-1", "01", "1.0", "1e3", "\"1\"", "x"] {
            assert_eq!(read(t), None, "{t}");
        }
    }

    #[test]
    fn valid_json_of_the_subset_is_taken() {
        for t in [
            r#"{"a":1,"b":[true,false,null,-0.5e+3,"x"],"c":{}}"#,
            " [ ] ",
            r#"{"k":"ünïcödé ✓"}"#,
            r#"{"a":"x\ny \"q\" \u00e9\/\\"}"#,
            "0",
            "-12.25E-2",
        ] {
            assert!(takes(t), "{t}");
            assert!(serde_json::from_str::<serde_json::Value>(t).is_ok(), "{t}");
        }
    }

    #[test]
    fn invalid_json_and_text_outside_the_subset_are_refused() {
        for t in [
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            "[1,]",
            "01",
            "1.",
            "-",
            "1e",
            "tru",
            "{\"a\":\"x\ny\"}",        // a raw control character
            r#"{"a":"\x"}"#,           // no such escape
            r#"{"a":"\u12"}"#,         // a short one
            r#"{"a":"\ud83d\ude00"}"#, // a surrogate pair: serde_json's to join
            r#"{"a\u0062":1}"#,        // an escaped key
            r#"{"a":1} x"#,
            r#"{"a":1"#,
            "",
            "nul",
        ] {
            assert!(!takes(t), "{t}");
        }
        assert!(Cursor::new(b"\"\xff\"").is_none());
        let deep = "[".repeat(MAX_DEPTH as usize + 1) + &"]".repeat(MAX_DEPTH as usize + 1);
        assert!(!takes(&deep));
        let ok = "[".repeat(MAX_DEPTH as usize) + &"]".repeat(MAX_DEPTH as usize);
        assert!(takes(&ok));
    }

    #[test]
    fn a_skipped_string_is_checked_as_a_read_one_is() {
        for t in [
            r#""plain""#,
            r#""a\nb \"q\" \u00e9 \/""#,
            r#""\x""#,
            r#""\u12""#,
            "\"a\nb\"",
            r#""\ud83d""#,
            r#""open"#,
        ] {
            let read = Cursor::new(t.as_bytes()).and_then(|mut c| c.text().map(Cow::into_owned));
            let skipped = Cursor::new(t.as_bytes()).and_then(|mut c| c.skip());
            assert_eq!(read.is_some(), skipped.is_some(), "{t}");
        }
        let mut c = Cursor::new(br#"["a\nb \u00e9",1]"#).unwrap();
        c.array(|c| c.skip()).unwrap();
        let mut c = Cursor::new(br#""a\nb \u00e9""#).unwrap();
        assert_eq!(c.text().unwrap(), "a\nb \u{e9}");
    }

    #[test]
    fn whatever_the_scanner_takes_serde_json_takes_too() {
        // Whatever the scanner still takes of a mutated chunk must be JSON to serde_json as
        // well (the converse need not hold).
        let base = r#"{"id":"c-1","choices":[{"index":0,"delta":{"content":"a\nb"},"logprobs":null,"finish_reason":null}],"created":17,"x":[1.5e3,-0,true]}"#;
        let alphabet = b"{}[]\",:0123456789.-+eEtrufalsn \\xu\n";
        let (taken, all) = mutants(&[base], alphabet, 7, |t| {
            let text = String::from_utf8_lossy(t);
            let took = takes(&text);
            if took {
                let json = serde_json::from_str::<serde_json::Value>(&text);
                assert!(json.is_ok(), "taken but not JSON: {text}");
            }
            took
        });
        assert!(taken > all / 10, "only {taken} of {all} mutants taken");
    }
}
