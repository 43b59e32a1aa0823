//! Fuzz targets for the HTTP byte log (`transport::bytelog`): HTTP/1.1 response sequences
//! (sized, chunked with extensions and trailers, interim 1xx, bodiless, close-delimited) and
//! HTTP/2 frame streams (padded DATA, HEADERS, other frames), split into reads at random.
//!
//! Invariants: no panic; every time it answers is the stamp of a read it was fed, later body
//! offsets never map to earlier reads, a head never comes after its response's end; and where
//! an independent strict reference parser understands the bytes, the log is not broken and
//! knows each response's body length and end.

use spark_bench::rng::Rng;
use spark_bench::transport::bytelog::ByteClock;

use super::engine::{pick, splits, Target};

pub const H1: Target = Target {
    name: "bytelog_h1",
    dict: &[
        b"HTTP/1.1 200 OK\r\n",
        b"\r\n",
        b"\r\n\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Length: 5\r\n",
        b"0\r\n\r\n",
        b"ffffffffffffffff\r\n",
        b";ext=1",
        b"\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
    ],
    generate: gen_h1,
    run: |b, r| run(b, r, false),
};

pub const H2: Target = Target {
    name: "bytelog_h2",
    dict: &[
        b"\x00\x00\x00\x00\x01\x00\x00\x00\x01",
        b"\x00\x00\x05\x00\x08\x00\x00\x00\x03",
        b"\xff\xff\xff",
    ],
    generate: gen_h2,
    run: |b, r| run(b, r, true),
};

fn gen_h1(r: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    let n = r.below(6) + 1;
    for i in 0..n {
        if r.below(6) == 0 {
            out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        let status = pick(
            r,
            &[
                "200 OK",
                "500 Internal Server Error",
                "204 No Content",
                "304 Not Modified",
                "429 Too Many",
            ],
        );
        out.extend_from_slice(
            format!("HTTP/1.1 {status}\r\ncontent-type: text/event-stream\r\n").as_bytes(),
        );
        let body: Vec<u8> = (0..r.below(300))
            .map(|j| b"data: {}\n\n"[j as usize % 10])
            .collect();
        match r.below(3) {
            0 => {
                out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
                out.extend_from_slice(&body);
            }
            1 if i + 1 == n => {
                out.extend_from_slice(b"connection: close\r\n\r\n");
                out.extend_from_slice(&body);
            }
            _ => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                let mut rest = &body[..];
                while !rest.is_empty() {
                    let k = (r.below(40) as usize + 1).min(rest.len());
                    let ext = if r.below(5) == 0 { ";x=y" } else { "" };
                    let size = if r.below(2) == 0 {
                        format!("{k:x}")
                    } else {
                        format!("{k:X}")
                    };
                    out.extend_from_slice(format!("{size}{ext}\r\n").as_bytes());
                    out.extend_from_slice(&rest[..k]);
                    out.extend_from_slice(b"\r\n");
                    rest = &rest[k..];
                }
                out.extend_from_slice(b"0\r\n");
                if r.below(4) == 0 {
                    out.extend_from_slice(b"x-trailer: 1\r\n");
                }
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out
}

fn gen_h2(r: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..r.below(12) + 1 {
        let stream = pick(r, &[&0u32, &1, &3, &5, &7]);
        let (kind, mut flags) = match r.below(6) {
            0 => (1u8, 0x4u8),
            1 => (4, 0),
            2 => (8, 0),
            _ => (0, 0),
        };
        if r.below(4) == 0 {
            flags |= 1;
        }
        let mut payload: Vec<u8> = (0..r.below(200))
            .map(|i| b"data: {\"id\":\"r\"}\n\n"[i as usize % 18])
            .collect();
        if kind == 0 && r.below(3) == 0 {
            flags |= 0x8;
            let pad = r.below(20) as u8;
            payload.insert(0, pad);
            payload.extend(std::iter::repeat_n(0, pad as usize));
        }
        let len = payload.len() as u32;
        out.extend_from_slice(&len.to_be_bytes()[1..]);
        out.push(kind);
        out.push(flags);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(&payload);
    }
    out
}

/// Per response: body bytes, and whether it completed.
type Expect = Vec<(u32, u64, bool)>;

/// A strict, independent HTTP/1.1 reading: `None` for anything outside the plain forms.
fn reference_h1(b: &[u8]) -> Option<Expect> {
    let mut out = Vec::new();
    let mut key = 0u32;
    let mut rest = b;
    let line = |rest: &mut &[u8]| -> Option<Option<Vec<u8>>> {
        match rest.windows(2).position(|w| w == b"\r\n") {
            Some(i) if rest[..i].iter().any(|&c| c == b'\r' || c == b'\n') => None,
            Some(i) => {
                let l = rest[..i].to_vec();
                *rest = &rest[i + 2..];
                Some(Some(l))
            }
            None if rest.contains(&b'\n') => None,
            None => Some(None),
        }
    };
    while !rest.is_empty() {
        let Some(status) = line(&mut rest)? else {
            return Some(out);
        };
        let s = std::str::from_utf8(&status).ok()?;
        let code: u16 = s.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
        if s.as_bytes().get(12) != Some(&b' ')
            || !(100..600).contains(&code)
            || code == 101
            || s.len() > 200
            || !s.bytes().all(|c| c.is_ascii_graphic() || c == b' ')
        {
            return None;
        }
        let (mut chunked, mut len) = (false, None);
        loop {
            let Some(h) = line(&mut rest)? else {
                return Some(out);
            };
            if h.is_empty() {
                break;
            }
            let h = std::str::from_utf8(&h).ok()?;
            let (k, v) = h.split_once(": ")?;
            if k.is_empty()
                || !k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
                || !v.bytes().all(|c| c.is_ascii_graphic() || c == b' ')
            {
                return None;
            }
            match k.to_ascii_lowercase().as_str() {
                "transfer-encoding" if v.trim() == "chunked" => chunked = true,
                "transfer-encoding" => return None,
                "content-length" => {
                    len = Some(v.trim().parse::<u64>().ok().filter(|&n| n < 1 << 20)?)
                }
                _ => {}
            }
        }
        if code < 200 {
            continue;
        }
        if code == 204 || code == 304 {
            out.push((key, 0, true));
        } else if chunked {
            let mut got = 0u64;
            let done = loop {
                let Some(size) = line(&mut rest)? else {
                    break false;
                };
                let hex = std::str::from_utf8(&size)
                    .ok()?
                    .split(';')
                    .next()?
                    .to_string();
                if hex.is_empty() || hex.len() > 8 {
                    return None;
                }
                let n = u64::from_str_radix(&hex, 16).ok()?;
                if n == 0 {
                    let trailers_done = loop {
                        match line(&mut rest)? {
                            None => break false,
                            Some(t) if t.is_empty() => break true,
                            Some(_) => {}
                        }
                    };
                    break trailers_done;
                }
                let take = (n as usize).min(rest.len());
                got += take as u64;
                rest = &rest[take..];
                if take < n as usize {
                    break false;
                }
                match rest {
                    [b'\r', b'\n', tail @ ..] => rest = tail,
                    [] | [b'\r'] => break false,
                    _ => return None,
                }
            };
            out.push((key, got, done));
        } else if let Some(n) = len {
            let take = (n as usize).min(rest.len());
            rest = &rest[take..];
            out.push((key, take as u64, take as u64 == n));
        } else {
            out.push((key, rest.len() as u64, false));
            rest = &[];
        }
        key += 1;
    }
    Some(out)
}

fn reference_h2(b: &[u8]) -> Option<Expect> {
    let mut streams: std::collections::BTreeMap<u32, (u64, bool)> = Default::default();
    let mut rest = b;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        let (kind, flags) = (rest[3], rest[4]);
        let id = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        rest = &rest[9..];
        let whole = rest.len() >= len;
        let payload = &rest[..len.min(rest.len())];
        rest = &rest[len.min(rest.len())..];
        if id == 0 || (kind != 0 && kind != 1) {
            continue;
        }
        let s = streams.entry(id).or_default();
        if kind == 0 {
            let (pad, data) = if flags & 0x8 != 0 {
                let Some((&p, d)) = payload.split_first() else {
                    continue;
                };
                if p as usize + 1 > len {
                    return None;
                }
                (p as usize, d)
            } else {
                (0, payload)
            };
            let data_len = len - pad - usize::from(flags & 0x8 != 0);
            s.0 += data.len().min(data_len) as u64;
        }
        if whole && flags & 1 != 0 {
            s.1 = true;
        }
    }
    if streams.len() > 200 {
        return None;
    }
    Some(
        streams
            .into_iter()
            .filter(|s| s.1 .0 > 0 || s.1 .1)
            .map(|(k, (n, e))| (k, n, e))
            .collect(),
    )
}

fn run(b: &[u8], r: &mut Rng, h2: bool) -> Result<(), String> {
    let parts = splits(b, r);
    let clock = if h2 { ByteClock::h2() } else { ByteClock::h1() };
    let t0 = 1000u64;
    for (i, p) in parts.iter().enumerate() {
        clock.feed(p, t0 + i as u64);
    }
    let fed = t0..t0 + parts.len() as u64;
    let expect = if h2 { reference_h2(b) } else { reference_h1(b) };
    if expect.is_some() && clock.is_broken() {
        return Err("the log gave up on framing the reference parser reads".into());
    }
    let keys: Vec<(u32, u64, bool)> = match &expect {
        Some(e) => e.clone(),
        None => (0..8).map(|k| (k, 1 + r.below(400), false)).collect(),
    };
    for (key, len, done) in keys {
        let head = clock.head(key);
        let end = clock.end(key);
        for t in [head, end].into_iter().flatten() {
            if !fed.contains(&t) {
                return Err(format!("response {key}: time {t} is no read's stamp"));
            }
        }
        // (HTTP/2 may send HEADERS — trailers, or garbage — after END_STREAM.)
        if let (Some(h), Some(e), false) = (head, end, h2) {
            if h > e {
                return Err(format!("response {key}: head at {h} after its end at {e}"));
            }
        }
        if expect.is_some() {
            if done && end.is_none() {
                return Err(format!("response {key} is complete but has no end"));
            }
            if clock.body(key, len + 1).is_some() {
                return Err(format!(
                    "response {key}: a time for byte {len} of a {len}-byte body"
                ));
            }
        }
        let mut last = 0;
        let mut offs: Vec<u64> = (0..4).map(|_| 1 + r.below(len.max(1))).collect();
        offs.sort();
        offs.push(len);
        for e in offs {
            if let Some(t) = clock.body(key, e) {
                if !fed.contains(&t) || t < last {
                    return Err(format!(
                        "response {key}: byte {e} at {t}, after one at {last}"
                    ));
                }
                last = t;
            } else if expect.is_some() && e == len && len > 0 && parts.len() < 4000 {
                return Err(format!(
                    "response {key}: no time for its last body byte {len}"
                ));
            }
        }
        clock.done(key);
    }
    Ok(())
}
