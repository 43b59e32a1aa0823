//! Whose is a difference? Each cell's TTFT and per-token time split into the part the server
//! reported in-band (`server_ttft`, `server_tpot`) and the transport/client part (`overhead`,
//! `tpot_overhead`), and, for each non-`http` cell, a sentence per quantity saying whether
//! its change against the same target's `http` cell is the server's or the transport's.
//!
//! Owns: `summary.json`'s `attribution` object and the sentence rules. Pure; imports only
//! the metric names (`summary` calls it with each cell's p50s and printed changes).
//! Does not own: the per-request definitions (see `vocab::record`), the p50s and the lines
//! under the terminal table (see `summary`), or how a report lays the sentences out (see
//! `report`).
//!
//! Each part is the p50 of its own metric, so the two parts of a split need not add up to
//! the p50 of the whole (a median is not additive); with one request per cell they do.

use serde::{Deserialize, Serialize};

use super::metrics::Metric;

/// One quantity split into the server's part and the transport's, ms (p50s, or their changes
/// against the `http` cell).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// The server's part, as it reported it.
    pub server_ms: f64,
    /// The transport/client part (the round trip, framing, parsing).
    pub transport_ms: f64,
}

/// A cell's split and what it says about the change against `http`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// TTFT: `server_ttft` p50 and `overhead` p50; absent without server-reported TTFTs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<Split>,
    /// Per output token: `server_tpot` p50 and `tpot_overhead` p50; absent without
    /// server-reported totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<Split>,
    /// This cell's `ttft` split minus the `http` cell's, ms; absent on the `http` cell or
    /// when either lacks the split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_vs_http: Option<Split>,
    /// The same for `tpot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_vs_http: Option<Split>,
    /// One sentence per end-to-end change against `http` (TTFT, TPOT): whose it is, or that
    /// it cannot be attributed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A cell's (TTFT, TPOT) splits.
pub type Splits = (Option<Split>, Option<Split>);

/// A cell's TTFT and TPOT splits from its p50s (`p50` of a metric, when it has samples):
/// TTFT's only when some of its overheads came from server timing (`timed`), TPOT's when
/// the server reported totals.
pub fn splits(p50: impl Fn(Metric) -> Option<f64>, timed: bool) -> Splits {
    let pair = |s: Metric, t: Metric| match (p50(s), p50(t)) {
        (Some(server_ms), Some(transport_ms)) => Some(Split {
            server_ms,
            transport_ms,
        }),
        _ => None,
    };
    let ttft = pair(Metric::ServerTtft, Metric::Overhead).filter(|_| timed);
    (ttft, pair(Metric::ServerTpot, Metric::TpotOverhead))
}

/// `−31.2 ms`, `+0.23 ms`, `±0 ms` (a real minus sign, about three significant figures).
pub fn signed_ms(v: f64) -> String {
    let a = v.abs();
    let digits = if a < 10.0 {
        format!("{a:.2}")
    } else if a < 100.0 {
        format!("{a:.1}")
    } else {
        format!("{a:.0}")
    };
    if a < 0.005 {
        "±0 ms".to_string()
    } else if v < 0.0 {
        format!("\u{2212}{digits} ms")
    } else {
        format!("+{digits} ms")
    }
}

/// The sentence for one quantity (`TTFT`, `TPOT`) of a non-`http` cell: `change` is the
/// end-to-end p50 change as printed (`−72%`), `cell` and `http` the two cells' splits.
///
/// Both split: the change of the server part and of the transport part in ms, and whose the
/// difference is (the part that moved more; a tie is the transport's). Otherwise: it cannot
/// be attributed, and which side's server reported no timing.
pub fn sentence(label: &str, change: &str, cell: Option<Split>, http: Option<Split>) -> String {
    let head = format!("{label} {change} vs http");
    match (cell, http) {
        (Some(c), Some(h)) => {
            let (ds, dt) = (c.server_ms - h.server_ms, c.transport_ms - h.transport_ms);
            let whose = if ds.abs() > dt.abs() {
                "the difference is the server's, not the transport's"
            } else {
                "the difference is the transport's, not the server's"
            };
            format!(
                "{head}: server part {}, transport part {}: {whose}",
                signed_ms(ds),
                signed_ms(dt)
            )
        }
        (c, h) => {
            let side = match (c.is_some(), h.is_some()) {
                (true, false) => " on the http cell",
                (false, true) => " on this cell",
                _ => "",
            };
            format!("{head}: the delta cannot be attributed (the server reported no timing{side})")
        }
    }
}

/// A cell's attribution: its splits (`own`), and, for a non-`http` cell (`http`: its
/// target's `http` cell's splits), the change of each part and one sentence per end-to-end
/// change (`ttft_change`, `tpot_change`: the printed percent, when there is one; `summary`
/// passes none for a change that prints as ±0%). `None` when
/// there is nothing to say.
pub fn attribute(
    own: Splits,
    http: Option<Splits>,
    ttft_change: Option<String>,
    tpot_change: Option<String>,
) -> Option<Attribution> {
    let (ttft, tpot) = own;
    let mut a = Attribution {
        ttft,
        tpot,
        ..Attribution::default()
    };
    if let Some((h_ttft, h_tpot)) = http {
        let delta = |c: Option<Split>, h: Option<Split>| {
            let (c, h) = (c?, h?);
            Some(Split {
                server_ms: c.server_ms - h.server_ms,
                transport_ms: c.transport_ms - h.transport_ms,
            })
        };
        a.ttft_vs_http = delta(ttft, h_ttft);
        a.tpot_vs_http = delta(tpot, h_tpot);
        for (label, change, c, h) in [
            ("TTFT", ttft_change, ttft, h_ttft),
            ("TPOT", tpot_change, tpot, h_tpot),
        ] {
            if let Some(change) = change {
                a.notes.push(sentence(label, &change, c, h));
            }
        }
    }
    (a != Attribution::default()).then_some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(server_ms: f64, transport_ms: f64) -> Option<Split> {
        Some(Split {
            server_ms,
            transport_ms,
        })
    }

    #[test]
    fn whose_difference_it_is() {
        // The case: the server decoded faster on a reused connection.
        let s = sentence("TTFT", "\u{2212}72%", split(12.0, 0.32), split(43.2, 0.55));
        assert_eq!(
            s,
            "TTFT \u{2212}72% vs http: server part \u{2212}31.2 ms, transport part \u{2212}0.23 ms: the difference is the server's, not the transport's"
        );
        // The transport moved more than the server.
        let s = sentence("TPOT", "\u{2212}30%", split(10.0, 1.0), split(10.1, 4.0));
        assert!(
            s.ends_with("server part \u{2212}0.10 ms, transport part \u{2212}3.00 ms: the difference is the transport's, not the server's"),
            "{s}"
        );
        // Equal parts: not the server's.
        assert!(sentence("TTFT", "+1%", split(2.0, 2.0), split(1.0, 1.0)).contains("transport's"));
    }

    #[test]
    fn without_timing_it_cannot_be_attributed() {
        let none = "the delta cannot be attributed (the server reported no timing)";
        assert_eq!(
            sentence("TTFT", "+13%", None, None),
            format!("TTFT +13% vs http: {none}")
        );
        assert!(sentence("TPOT", "±0%", split(1.0, 1.0), None)
            .ends_with("(the server reported no timing on the http cell)"));
        assert!(sentence("TPOT", "±0%", None, split(1.0, 1.0))
            .ends_with("(the server reported no timing on this cell)"));
    }

    #[test]
    fn signed() {
        assert_eq!(signed_ms(-31.23), "\u{2212}31.2 ms");
        assert_eq!(signed_ms(0.231), "+0.23 ms");
        assert_eq!(signed_ms(0.001), "±0 ms");
    }
}
