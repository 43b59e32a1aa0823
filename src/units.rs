//! Duration and byte formatting, and serde helpers for durations in config files.
//!
//! Owns: how spark-bench prints and parses times ("40ms", "1.25 s", "830 µs").

use std::time::Duration;

/// Formats a duration the way a `--link`/TOML value is written, one number and one unit,
/// exact to the nanosecond and read back by the same parser: "40ms", "1.5ms", "503.321ms",
/// "2s", "2.25s", "830us", "650ns". Every duration spark-bench writes for a person or a file
/// to read back (scenarios `record` writes, the plan, the manifest, messages) uses it.
pub fn fmt_duration_spec(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0ms".into();
    }
    if ns > u128::from(u64::MAX) {
        // humantime reads at most u64 of one unit: "3239y 650ns" must not print as one
        // unreadable nanosecond (or millisecond) count (found by the fuzzer).
        return format!("{}s {}ns", d.as_secs(), d.subsec_nanos());
    }
    // Whole hours and whole minutes read best as such ("2h", "5m").
    for (unit, per) in [("h", 3_600_000_000_000u128), ("m", 60_000_000_000)] {
        if ns % per == 0 {
            return format!("{}{unit}", ns / per);
        }
    }
    // The largest unit the duration reaches, with the rest as a decimal fraction (trailing
    // zeros dropped), so no digit below a nanosecond is ever written.
    let (unit, per) = if ns >= 1_000_000_000 {
        ("s", 1_000_000_000u128)
    } else if ns >= 1_000_000 {
        ("ms", 1_000_000)
    } else if ns >= 1_000 {
        ("us", 1_000)
    } else {
        ("ns", 1)
    };
    let (whole, rest) = (ns / per, ns % per);
    if rest == 0 {
        return format!("{whole}{unit}");
    }
    let digits = per.ilog10() as usize;
    let frac = format!("{rest:0digits$}");
    format!("{whole}.{}{unit}", frac.trim_end_matches('0'))
}

/// `x` rounded to `places` decimals, so a value computed in binary floating point is written
/// at the precision it has ("60.29004", not "60.290040000000005"); values too large for that
/// to matter, infinities and NaN pass through.
pub fn round_decimals(x: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    if !x.is_finite() || x.abs() * scale >= 9.0e15 {
        return x;
    }
    (x * scale).round() / scale
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
        assert_eq!(fmt_duration_spec(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(
            fmt_duration_spec(Duration::from_micros(503_321)),
            "503.321ms"
        );
        assert_eq!(
            fmt_duration_spec(Duration::from_nanos(2_250_000_001)),
            "2.250000001s"
        );
        assert_eq!(fmt_duration_spec(Duration::from_nanos(830_500)), "830.5us");
        assert_eq!(fmt_duration_spec(Duration::from_nanos(650)), "650ns");
        assert_eq!(fmt_duration_spec(Duration::from_secs(7200)), "2h");
        assert_eq!(fmt_duration_spec(Duration::from_secs(300)), "5m");
        assert_eq!(fmt_duration_spec(Duration::from_secs(90)), "90s");
        // Every form reads back exactly.
        for ns in [
            1,
            999,
            1_000,
            1_001,
            999_999,
            1_000_001,
            503_321_000,
            59_999_999_999,
        ] {
            let d = Duration::from_nanos(ns);
            assert_eq!(
                humantime::parse_duration(&fmt_duration_spec(d)).unwrap(),
                d,
                "{ns}"
            );
        }
        assert_eq!(fmt_duration_spec(Duration::from_secs(2)), "2s");
        assert_eq!(fmt_ns(830_000.0), "830 µs");
        assert_eq!(fmt_ns(41_230_000.0), "41.2 ms");
        assert_eq!(fmt_ns(9_100_000_000.0), "9.10 s");
        assert_eq!(fmt_bytes(2048), "2.0 KiB");
        assert_eq!(
            round_decimals(60.290040000000005, 6).to_string(),
            "60.29004"
        );
        assert_eq!(
            round_decimals(100.18068099999999, 6).to_string(),
            "100.180681"
        );
        assert_eq!(round_decimals(1e300, 6), 1e300);
        assert!(round_decimals(f64::NAN, 6).is_nan());
    }
}
