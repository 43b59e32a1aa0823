//! Duration and byte formatting, and serde helpers for durations in config files.
//!
//! Owns: how spark-bench prints and parses times ("40ms", "1.25 s", "830 µs").

use std::time::Duration;

/// Formats a duration the way a `--link`/TOML value is written: "40ms", "1500us", "2s".
pub fn fmt_duration_spec(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0ms".into()
    } else if ns % 1_000_000_000 == 0 {
        format!("{}s", ns / 1_000_000_000)
    } else if ns > u128::from(u64::MAX) {
        // humantime reads at most u64 of one unit: "3239y 650ns" must not print as one
        // unreadable nanosecond (or millisecond) count (found by the fuzzer).
        format!("{}s {}ns", d.as_secs(), d.subsec_nanos())
    } else if ns % 1_000_000 == 0 {
        format!("{}ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// Formats nanoseconds for people: "830 µs", "41.2 ms", "9.10 s".
pub fn fmt_ns(ns: f64) -> String {
    let abs = ns.abs();
    if abs < 1_000.0 {
        format!("{ns:.0} ns")
    } else if abs < 1_000_000.0 {
        format!("{:.0} µs", ns / 1_000.0)
    } else if abs < 10_000_000.0 {
        format!("{:.2} ms", ns / 1_000_000.0)
    } else if abs < 1_000_000_000.0 {
        format!("{:.1} ms", ns / 1_000_000.0)
    } else {
        format!("{:.2} s", ns / 1_000_000_000.0)
    }
}

/// Formats a byte count: "512 B", "12.3 KiB", "4.0 MiB".
pub fn fmt_bytes(b: u64) -> String {
    let f = b as f64;
    if b < 1024 {
        format!("{b} B")
    } else if f < 1024.0 * 1024.0 {
        format!("{:.1} KiB", f / 1024.0)
    } else {
        format!("{:.1} MiB", f / (1024.0 * 1024.0))
    }
}

/// Serde for `Duration` as a humantime string ("40ms", "2s") in TOML/JSON.
pub mod serde_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// Writes "40ms".
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::fmt_duration_spec(*d))
    }

    /// Reads "40ms", "1.5s", "250 us".
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(s.trim()).map_err(|e| {
            serde::de::Error::custom(format!(
                "bad duration {s:?} ({e}); write it like \"40ms\", \"1.5s\" or \"250us\""
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_duration_spec(Duration::from_millis(40)), "40ms");
        assert_eq!(fmt_duration_spec(Duration::from_micros(1500)), "1500us");
        assert_eq!(fmt_duration_spec(Duration::from_secs(2)), "2s");
        assert_eq!(fmt_ns(830_000.0), "830 µs");
        assert_eq!(fmt_ns(41_230_000.0), "41.2 ms");
        assert_eq!(fmt_ns(9_100_000_000.0), "9.10 s");
        assert_eq!(fmt_bytes(2048), "2.0 KiB");
    }
}
