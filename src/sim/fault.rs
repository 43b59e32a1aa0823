//! Fault injection: the `x-sim-fault` spec and the profile's random faults.
//!
//! Owns: parsing specs such as `status=429`, `reset-after=3`, `stall=5s`,
//! `malformed-after=2`, `ws-close-1011-after=4`. Does not own: carrying them out (the HTTP,
//! runner and WebSocket code do that).

use std::time::Duration;

use super::profile::FaultRates;
use crate::rng::Rng;

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this HTTP status (429 with `Retry-After: 1`, or 500) instead of a response.
    Status(u16),
    /// Abort the connection (TCP RST when possible) after N content chunks.
    ResetAfter(u32),
    /// Stall this long before the first token.
    Stall(Duration),
    /// Emit an event that is not valid JSON after N content chunks, then end the stream.
    MalformedAfter(u32),
    /// WebSocket only: send a close frame with code 1011 after N content chunks.
    WsClose1011After(u32),
}

impl Fault {
    /// Parses a spec; the error says which forms exist.
    pub fn parse(spec: &str) -> Result<Fault, String> {
        let spec = spec.trim();
        let (k, v) = spec.split_once('=').ok_or_else(|| hint(spec))?;
        let n = || v.trim().parse::<u32>().map_err(|_| hint(spec));
        match k.trim() {
            "status" => match v.trim().parse::<u16>() {
                Ok(s @ (429 | 500 | 502 | 503)) => Ok(Fault::Status(s)),
                _ => Err(hint(spec)),
            },
            "reset-after" => Ok(Fault::ResetAfter(n()?)),
            "malformed-after" => Ok(Fault::MalformedAfter(n()?)),
            "ws-close-1011-after" => Ok(Fault::WsClose1011After(n()?)),
            "stall" => humantime::parse_duration(v.trim())
                .map(Fault::Stall)
                .map_err(|_| hint(spec)),
            _ => Err(hint(spec)),
        }
    }

    /// The spec string, for the trace.
    pub fn spec(&self) -> String {
        match self {
            Fault::Status(s) => format!("status={s}"),
            Fault::ResetAfter(n) => format!("reset-after={n}"),
            Fault::Stall(d) => format!("stall={}", crate::units::fmt_duration_spec(*d)),
            Fault::MalformedAfter(n) => format!("malformed-after={n}"),
            Fault::WsClose1011After(n) => format!("ws-close-1011-after={n}"),
        }
    }

    /// The content-chunk count after which a stream-breaking fault strikes.
    pub fn after_chunks(&self) -> Option<u32> {
        match self {
            Fault::ResetAfter(n) | Fault::MalformedAfter(n) | Fault::WsClose1011After(n) => {
                Some(*n)
            }
            _ => None,
        }
    }

    /// A random fault drawn from the profile's rates (None almost always).
    pub fn draw(rates: &FaultRates, rng: &mut Rng, expected_chunks: u32) -> Option<Fault> {
        let u = rng.f64();
        let mut acc = rates.status_429;
        if u < acc {
            return Some(Fault::Status(429));
        }
        acc += rates.status_500;
        if u < acc {
            return Some(Fault::Status(500));
        }
        acc += rates.reset;
        if u < acc {
            return Some(Fault::ResetAfter(expected_chunks / 2));
        }
        acc += rates.stall;
        if u < acc {
            return Some(Fault::Stall(Duration::from_secs(5)));
        }
        None
    }
}

fn hint(spec: &str) -> String {
    format!(
        "invalid x-sim-fault {spec:?}: use status=429|500, reset-after=N, stall=5s, \
         malformed-after=N or ws-close-1011-after=N"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_and_round_trips() {
        for s in [
            "status=429",
            "status=500",
            "reset-after=3",
            "stall=5s",
            "malformed-after=2",
            "ws-close-1011-after=4",
        ] {
            assert_eq!(Fault::parse(s).unwrap().spec(), s);
        }
        for bad in ["", "status=200", "reset-after=x", "boom=1"] {
            assert!(Fault::parse(bad).unwrap_err().contains("reset-after=N"));
        }
    }
}
