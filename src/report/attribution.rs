//! The report's attribution section: each cell's TTFT and per-token time split into the
//! server's part (as the server reported it in-band) and the transport's, with the change of
//! each part against the same target's `http` row, and the sentences that say whose each
//! end-to-end change is (`recorder::attribution` wrote them into `summary.json`).
//!
//! Owns: the section's table rows and sentence list as plain text (`model` wraps them). Pure.
//! Does not own: the splits or the sentence rules (see `recorder::attribution`).

use super::data::ReportInput;
use super::style::ms;
use crate::recorder::{signed_ms, Split};

/// `12.0 ms (−31.2 ms)`: a part and its change against `http`.
fn part(v: Option<Split>, d: Option<Split>, pick: fn(&Split) -> f64) -> String {
    match (v, d) {
        (Some(v), Some(d)) => format!("{} ({})", ms(pick(&v)), signed_ms(pick(&d))),
        (Some(v), None) => ms(pick(&v)),
        _ => "–".into(),
    }
}

/// The split table's header and rows; `None` when no cell of any run had server timing.
pub fn table(input: &ReportInput) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let several = input.is_comparison();
    let mut header: Vec<String> = Vec::new();
    if several {
        header.push("run".into());
    }
    header.extend(
        [
            "target",
            "transport",
            "TTFT: server",
            "TTFT: transport",
            "TPOT: server",
            "TPOT: transport",
        ]
        .map(String::from),
    );
    let mut rows = Vec::new();
    for run in &input.runs {
        for target in run.targets() {
            for c in run.cells_of(&target) {
                let Some(a) = c
                    .attribution
                    .as_ref()
                    .filter(|a| a.ttft.is_some() || a.tpot.is_some())
                else {
                    continue;
                };
                let mut row = Vec::new();
                if several {
                    row.push(run.label.clone());
                }
                row.extend([
                    target.clone(),
                    c.transport.clone(),
                    part(a.ttft, a.ttft_vs_http, |s| s.server_ms),
                    part(a.ttft, a.ttft_vs_http, |s| s.transport_ms),
                    part(a.tpot, a.tpot_vs_http, |s| s.server_ms),
                    part(a.tpot, a.tpot_vs_http, |s| s.transport_ms),
                ]);
                rows.push(row);
            }
        }
    }
    (!rows.is_empty()).then_some((header, rows))
}

/// Every cell's attribution sentences: `target · transport: <sentence>` (run label first
/// when several runs are compared).
pub fn notes(input: &ReportInput) -> Vec<String> {
    let several = input.is_comparison();
    let mut out = Vec::new();
    for run in &input.runs {
        for target in run.targets() {
            for c in run.cells_of(&target) {
                for n in c.attribution.iter().flat_map(|a| a.notes.iter()) {
                    let who = if several {
                        format!("Run {} · {target} · {}", run.label, c.transport)
                    } else {
                        format!("{target} · {}", c.transport)
                    };
                    out.push(format!("{who}: {n}"));
                }
            }
        }
    }
    out
}
