use super::*;
use crate::report::openmetrics_parse::{parse, value};
use crate::vocab::{Chunk, RequestRecord, TransportKind};

fn req(ttft_ms: u64, outcome: OutcomeKind, warmup: bool) -> RequestRecord {
    let ms = 1_000_000;
    RequestRecord {
        target: "sim \"a\"".into(),
        transport: TransportKind::Http,
        warmup,
        intended_ns: 0,
        dispatch_ns: 0,
        first_event_ns: Some(ttft_ms * ms / 2),
        first_token_ns: Some(ttft_ms * ms),
        last_token_ns: Some((ttft_ms + 20) * ms),
        output_tokens: 3,
        chunks: [ttft_ms, ttft_ms + 10, ttft_ms + 20]
            .map(|t| Chunk {
                at_ns: t * ms,
                tokens: 1,
                text_bytes: 1,
            })
            .to_vec(),
        outcome,
        ..Default::default()
    }
}

fn run_info(complete: bool) -> RunInfo {
    RunInfo {
        run_id: "r1".into(),
        scenario: "s".into(),
        complete,
    }
}

fn recorder() -> Recorder {
    let mut r = Recorder::new();
    for ttft in [100, 200, 300] {
        r.add_request(&req(ttft, OutcomeKind::Ok, false));
    }
    r.add_request(&req(50, OutcomeKind::Timeout, false));
    r.add_request(&req(50, OutcomeKind::Ok, true));
    r
}

#[test]
fn both_formats_parse_back_with_the_recorders_quantiles_in_seconds() {
    let rec = recorder();
    let e = Exposition::of(&rec, &run_info(true));
    let cell = "sim \"a\"/http";
    for format in [Format::OpenMetrics, Format::Prometheus] {
        let text = e.render(format);
        let samples = parse(&text, format).unwrap_or_else(|err| panic!("{err}\n{text}"));
        let l = [("cell", cell), ("quantile", "0.5")];
        let p50 = value(&samples, "spark_bench_ttft_seconds", &l).unwrap();
        let h = rec
            .cells()
            .values()
            .next()
            .unwrap()
            .histogram(Metric::Ttft)
            .unwrap();
        assert_eq!(p50, h.value_at_quantile(0.5) as f64 / 1e9);
        assert!((p50 - 0.2).abs() < 0.2 * 1e-3, "{p50}");
        let count = value(
            &samples,
            "spark_bench_ttft_seconds_count",
            &[("cell", cell)],
        );
        assert_eq!(count, Some(3.0));
        let sum = value(&samples, "spark_bench_ttft_seconds_sum", &[("cell", cell)]).unwrap();
        assert!((sum - 0.6).abs() < 0.6e-3, "{sum}");
        let req = |kind: &str, status: &str| {
            value(
                &samples,
                "spark_bench_requests_total",
                &[("cell", cell), ("kind", kind), ("status", status)],
            )
        };
        assert_eq!(req("measured", "ok"), Some(3.0));
        assert_eq!(req("measured", "timeout"), Some(1.0));
        assert_eq!(req("measured", "server-error"), Some(0.0));
        assert_eq!(req("warmup", "any"), Some(1.0));
        let out = value(
            &samples,
            "spark_bench_output_tokens_total",
            &[("cell", cell)],
        );
        assert_eq!(out, Some(9.0));
        let info = value(&samples, "spark_bench_run_info", &[("complete", "true")]);
        assert_eq!(info, Some(1.0));
    }
}

#[test]
fn the_formats_differ_where_the_specs_do() {
    let e = Exposition::of(&recorder(), &run_info(false));
    let om = e.render(Format::OpenMetrics);
    let prom = e.render(Format::Prometheus);
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE spark_bench_requests counter\n"));
    assert!(om.contains("# UNIT spark_bench_ttft_seconds seconds\n"));
    assert!(om.contains("# TYPE spark_bench_run info\n"));
    assert!(!prom.contains("# EOF") && !prom.contains("# UNIT"));
    assert!(prom.contains("# TYPE spark_bench_requests_total counter\n"));
    assert!(prom.contains("# TYPE spark_bench_run_info gauge\n"));
    // The label value's quote is escaped in both.
    assert!(prom.contains("target=\"sim \\\"a\\\"\""));
}

#[test]
fn an_empty_run_still_says_which_run_it_is() {
    let text = Exposition::empty(&run_info(false)).render(Format::OpenMetrics);
    let samples = parse(&text, Format::OpenMetrics).unwrap();
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].labels["complete"], "false");
}

#[test]
fn the_checker_rejects_what_the_formats_forbid() {
    let ok = "# TYPE a_seconds summary\n# UNIT a_seconds seconds\na_seconds_count 1\n# EOF\n";
    assert!(parse(ok, Format::OpenMetrics).is_ok());
    for bad in [
        "# TYPE a_seconds summary\na_seconds_count 1\n",
        "# TYPE a_seconds summary\n# UNIT a_seconds bytes\na_seconds_count 1\n# EOF\n",
        "# TYPE a counter\na 1\n# EOF\n",
        "# TYPE a gauge\n# TYPE a gauge\n# EOF\n",
        "b 1\n# EOF\n",
        "# TYPE a gauge\na{x=\"1} 1\n# EOF\n",
        "# TYPE a gauge\na{x=\"1\"} one\n# EOF\n",
        "# TYPE a summary\na 1\n# EOF\n",
        "# TYPE a gauge\na 1\n# EOF\na 2\n",
    ] {
        assert!(parse(bad, Format::OpenMetrics).is_err(), "{bad}");
    }
    assert!(parse("# TYPE a gauge\na 1\n# EOF\n", Format::Prometheus).is_err());
}

#[test]
fn negotiation_follows_the_accept_header() {
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
    assert_eq!(Format::negotiate(Some("*/*")), Format::Prometheus);
    assert_eq!(Format::negotiate(None), Format::Prometheus);
}
