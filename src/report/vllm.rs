//! `spark-bench export vllm RUN_DIR`: one JSON file per cell with the keys
//! `vllm bench serve --save-result --save-detailed` writes, for tools and dashboards that read
//! vLLM's benchmark results.
//!
//! Owns: which key is filled from what (docs/metrics.md has the table), vLLM's statistics
//! (mean, median, population std, linear-interpolated percentiles over the raw per-request
//! values, as numpy computes them) and the file names. Unlike the reports, an export reads
//! the rows (`requests.csv`, `chunks.csv`): vLLM's detailed keys are per request.
//! Does not own: the measurements (records as the store reads them back).

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::plan::arrival::Arrival;
use crate::plan::Plan;
use crate::store::LoadedRun;
use crate::vocab::{ApiFlavour, RequestKind, RequestRecord};

/// The percentiles written as `p{N}_{metric}_ms` (vLLM's `--metric-percentiles`).
pub const PERCENTILES: [f64; 3] = [90.0, 95.0, 99.0];

/// Writes `<out>/vllm-<target>-<transport>.json` per cell of the run in `dir`; returns the
/// paths.
pub fn export(dir: &Path, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let run = LoadedRun::open(dir)?;
    let plan = run.plan()?;
    let records = run.records()?;
    std::fs::create_dir_all(out)?;
    let mut paths = Vec::new();
    for cell in &run.summary.cells {
        let rows: Vec<&RequestRecord> = records
            .iter()
            .filter(|r| {
                r.target == cell.target
                    && r.transport.as_str() == cell.transport
                    && !r.warmup
                    && r.kind != RequestKind::Warmup
            })
            .collect();
        let v = cell_json(&run, &plan, cell, &rows);
        let path = out.join(format!(
            "vllm-{}-{}.json",
            safe(&cell.target),
            cell.transport
        ));
        std::fs::write(&path, serde_json::to_string_pretty(&v)?)?;
        paths.push(path);
    }
    Ok(paths)
}

fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// vLLM's `date`: `%Y%m%d-%H%M%S` from the manifest's RFC 3339 start.
fn vllm_date(rfc3339: &str) -> String {
    let digits: String = rfc3339
        .chars()
        .filter(char::is_ascii_digit)
        .take(14)
        .collect();
    if digits.len() < 14 {
        return rfc3339.to_string();
    }
    format!("{}-{}", &digits[..8], &digits[8..])
}

fn cell_json(
    run: &LoadedRun,
    plan: &Plan,
    cell: &crate::recorder::CellSummary,
    rows: &[&RequestRecord],
) -> Value {
    let target = plan
        .cells
        .iter()
        .map(|c| &c.target)
        .find(|t| t.name == cell.target);
    let ok: Vec<&&RequestRecord> = rows.iter().filter(|r| r.is_ok()).collect();
    let duration = cell.span_s;
    let per_s = |n: f64| if duration > 0.0 { n / duration } else { 0.0 };
    let input_total: u64 = ok
        .iter()
        .filter_map(|r| r.input_tokens)
        .map(u64::from)
        .sum();
    let (input, output) = (input_total as f64, cell.output_tokens as f64);
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("date", json!(vllm_date(&run.manifest.started_at)));
    put(
        "backend",
        json!(match target.map(|t| t.api) {
            Some(ApiFlavour::Responses) => "openai-responses",
            _ => "openai-chat",
        }),
    );
    put("model_id", json!(target.map(|t| t.model.clone())));
    put("tokenizer_id", Value::Null);
    put("num_prompts", json!(rows.len()));
    put(
        "request_rate",
        plan.load.rate.map_or(json!("inf"), |r| json!(r)),
    );
    put(
        "burstiness",
        json!(match plan.load.arrival {
            Arrival::Gamma { shape } => shape,
            _ => 1.0,
        }),
    );
    put("max_concurrency", json!(plan.load.concurrency));
    put("duration", json!(duration));
    put("completed", json!(ok.len()));
    put("failed", json!(rows.len() - ok.len()));
    put("total_input_tokens", json!(input_total));
    put("total_output_tokens", json!(cell.output_tokens));
    put("request_throughput", json!(per_s(ok.len() as f64)));
    put(
        "request_goodput",
        cell.goodput
            .as_ref()
            .map_or(Value::Null, |g| json!(g.good_req_s)),
    );
    put("output_throughput", json!(per_s(output)));
    put("total_token_throughput", json!(per_s(input + output)));
    for (k, v) in per_request(rows) {
        put(k, v);
    }
    put("max_output_tokens_per_s", Value::Null);
    put("max_concurrent_requests", Value::Null);
    let metrics: [(&str, Vec<f64>); 4] = [
        ("ttft", ok.iter().filter_map(|r| ttft(r)).collect()),
        ("tpot", ok.iter().filter_map(|r| tpot(r)).collect()),
        ("itl", ok.iter().flat_map(|r| itl(r)).collect()),
        ("e2el", ok.iter().filter_map(|r| e2el(r)).collect()),
    ];
    for (name, values) in metrics {
        for (k, v) in stats_ms(name, &values) {
            put(&k, v);
        }
    }
    Value::Object(m)
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Dispatch → first token, seconds (vLLM measures from the request's send).
fn ttft(r: &RequestRecord) -> Option<f64> {
    r.first_token_ns
        .map(|t| secs(t.saturating_sub(r.dispatch_ns)))
}

/// Dispatch → last token, seconds.
fn e2el(r: &RequestRecord) -> Option<f64> {
    r.last_token_ns
        .or(r.first_token_ns)
        .map(|t| secs(t.saturating_sub(r.dispatch_ns)))
}

/// (last − first token) / (output tokens − 1), seconds.
fn tpot(r: &RequestRecord) -> Option<f64> {
    match (r.first_token_ns, r.last_token_ns) {
        (Some(f), Some(l)) if r.output_tokens > 1 => {
            Some(secs(l.saturating_sub(f)) / f64::from(r.output_tokens - 1))
        }
        _ => None,
    }
}

/// The gaps between content chunks, seconds.
fn itl(r: &RequestRecord) -> Vec<f64> {
    r.chunks
        .windows(2)
        .map(|w| secs(w[1].at_ns.saturating_sub(w[0].at_ns)))
        .collect()
}

/// vLLM's per-request keys (`--save-detailed`).
fn per_request(rows: &[&RequestRecord]) -> Vec<(&'static str, Value)> {
    let errors: Vec<String> = rows
        .iter()
        .map(|r| {
            if r.is_ok() {
                String::new()
            } else {
                r.error
                    .clone()
                    .unwrap_or_else(|| r.outcome.as_str().to_string())
            }
        })
        .collect();
    let output_lens: Vec<u32> = rows
        .iter()
        .map(|r| if r.is_ok() { r.output_tokens } else { 0 })
        .collect();
    vec![
        (
            "input_lens",
            json!(rows.iter().map(|r| r.input_tokens).collect::<Vec<_>>()),
        ),
        ("output_lens", json!(output_lens)),
        (
            "ttfts",
            json!(rows
                .iter()
                .map(|r| ttft(r).unwrap_or(0.0))
                .collect::<Vec<_>>()),
        ),
        (
            "itls",
            json!(rows.iter().map(|r| itl(r)).collect::<Vec<_>>()),
        ),
        (
            "start_times",
            json!(rows.iter().map(|r| secs(r.dispatch_ns)).collect::<Vec<_>>()),
        ),
        ("generated_texts", Value::Null),
        ("errors", json!(errors)),
    ]
}

/// `mean_`, `median_`, `std_` and `p{N}_` `{name}_ms` of `values` (seconds), as vLLM computes
/// them with numpy (population std, linear interpolation); 0 when there are none, as vLLM.
pub fn stats_ms(name: &str, values: &[f64]) -> Vec<(String, Value)> {
    let mut v: Vec<f64> = values.iter().map(|s| s * 1e3).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mean = if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / n
    };
    let std = if v.is_empty() {
        0.0
    } else {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt()
    };
    let mut out = vec![
        (format!("mean_{name}_ms"), json!(mean)),
        (format!("median_{name}_ms"), json!(percentile(&v, 50.0))),
        (format!("std_{name}_ms"), json!(std)),
    ];
    for p in PERCENTILES {
        out.push((format!("p{p}_{name}_ms"), json!(percentile(&v, p))));
    }
    out
}

/// numpy's default (linear) percentile of sorted `v`; 0 when empty.
fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let rank = p / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_numpys() {
        let s: std::collections::BTreeMap<String, Value> =
            stats_ms("ttft", &[0.001, 0.002, 0.003, 0.004])
                .into_iter()
                .collect();
        let close = |k: &str, want: f64| (s[k].as_f64().unwrap() - want).abs() < 1e-12;
        assert!(
            close("mean_ttft_ms", 2.5) && close("median_ttft_ms", 2.5),
            "{s:?}"
        );
        // numpy.std([1, 2, 3, 4]) = sqrt(1.25); numpy.percentile(…, 99) = 3.97.
        assert!((s["std_ttft_ms"].as_f64().unwrap() - 1.25f64.sqrt()).abs() < 1e-12);
        assert!((s["p99_ttft_ms"].as_f64().unwrap() - 3.97).abs() < 1e-12);
        let empty: Vec<_> = stats_ms("itl", &[]).into_iter().map(|(_, v)| v).collect();
        assert!(empty.iter().all(|v| *v == json!(0.0)));
    }

    #[test]
    fn dates_are_vllms() {
        assert_eq!(vllm_date("2026-11-22T21:58:02.123Z"), "20261122-215802");
    }
}
