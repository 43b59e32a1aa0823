//! `report`: snapshots of the Markdown and HTML of a deterministic synthetic run, comparison
//! and interrupted runs, escaping, self-containment, PNG text, and the CLI command.
//!
//! Snapshots live in `tests/integration/snapshots/`; after an intended change, regenerate them
//! with `UPDATE_SNAPSHOTS=1 cargo test --test integration report::` and review the diff.

use std::path::{Path, PathBuf};

use clap::Parser;
use spark_bench::report::fixture::{synthetic_run, synthetic_run_with, SyntheticOptions};
use spark_bench::report::{render, render_run, Formats};
use spark_bench::store::{LoadedRun, RunStatus};

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Replaces what differs between two runs of the same seed (ids, clocks, host, version) and
/// the inline chart bodies (checked by their own tests) with placeholders.
fn normalise(text: &str, dirs: &[PathBuf]) -> String {
    let mut out = text.to_string();
    for (i, d) in dirs.iter().enumerate() {
        let m = LoadedRun::open(d).unwrap().manifest;
        let h = &m.host;
        out = out
            .replace(&m.run_id, &format!("[RUN_ID_{i}]"))
            .replace(&m.started_at, "[TIME]")
            .replace(&m.ended_at.clone().unwrap_or_default(), "[TIME]")
            .replace(
                &format!("{} ({}/{}, {} CPUs)", h.hostname, h.os, h.arch, h.cpus),
                "[HOST]",
            )
            .replace(
                &format!("spark-bench {}", m.tool.version),
                "spark-bench [VERSION]",
            );
    }
    // Inline SVG bodies → a marker (their drawing is covered by the chart tests).
    let mut res = String::new();
    let mut rest = out.as_str();
    while let Some(a) = rest.find("<svg") {
        res.push_str(&rest[..a]);
        let Some(b) = rest[a..].find("</svg>") else {
            break;
        };
        res.push_str("<svg>[CHART]</svg>");
        rest = &rest[a + b + "</svg>".len()..];
    }
    res.push_str(rest);
    res
}

fn snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/integration/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}; create it with UPDATE_SNAPSHOTS=1 cargo test --test integration report::",
            path.display()
        )
    });
    if expected != actual {
        let actual_path = path.with_extension("actual");
        std::fs::write(&actual_path, actual).unwrap();
        panic!(
            "{name} differs from its snapshot; see `diff {} {}`, and if the change is intended run UPDATE_SNAPSHOTS=1 cargo test --test integration report::",
            path.display(),
            actual_path.display()
        );
    }
}

#[test]
fn markdown_and_html_snapshots() {
    let tmp = testkit::tempdir().unwrap();
    let dir = synthetic_run(tmp.path(), 96, 7).unwrap();
    let written = render_run(&dir).unwrap();
    assert_eq!(written[0], dir.join("report.md"));
    assert_eq!(written[1], dir.join("report.html"));
    let dirs = [dir.clone()];
    let md = normalise(&read(&dir.join("report.md")), &dirs);
    let html = normalise(&read(&dir.join("report.html")), &dirs);
    // What the snapshot must show, asserted so a careless snapshot update cannot drop it.
    assert!(md.contains("| sim-wafer | ws |"), "{md}");
    assert!(md.contains("(\u{2212}"), "changes against http: {md}");
    assert!(md.contains("![Time to first token (CDF)](charts/ttft_cdf.svg)"));
    assert!(md.contains("| overhead source | first-event-estimate 75% (http, http-pooled, http2); server-timing 25% (ws) |"), "{md}");
    assert!(md.contains("| status | complete |"));
    assert!(html.contains("<svg>[CHART]</svg>"));
    snapshot("report.md", &md);
    snapshot("report.html", &html);
}

#[test]
fn same_seed_same_report() {
    let (a, b) = (testkit::tempdir().unwrap(), testkit::tempdir().unwrap());
    let da = synthetic_run(a.path(), 64, 3).unwrap();
    let db = synthetic_run(b.path(), 64, 3).unwrap();
    render_run(&da).unwrap();
    render_run(&db).unwrap();
    for f in ["report.md", "report.html", "charts/overhead.svg"] {
        let (x, y) = (read(&da.join(f)), read(&db.join(f)));
        let x = normalise(&x, std::slice::from_ref(&da));
        let y = normalise(&y, std::slice::from_ref(&db));
        assert_eq!(x, y, "{f} is not deterministic");
    }
}

#[test]
fn comparison_of_two_load_levels() {
    let tmp = testkit::tempdir().unwrap();
    let one = synthetic_run_with(
        tmp.path(),
        &SyntheticOptions {
            requests: 48,
            concurrency: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let eight = synthetic_run_with(
        tmp.path(),
        &SyntheticOptions {
            requests: 48,
            seed: 8,
            concurrency: 8,
            status: RunStatus::Interrupted,
            ..Default::default()
        },
    )
    .unwrap();
    let out = tmp.path().join("cmp");
    let written = render(&[one.clone(), eight.clone()], &Formats::all(), &out).unwrap();
    assert!(written.contains(&out.join("charts/concurrency.svg")));
    assert!(written.contains(&out.join("charts/concurrency.png")));
    let md = read(&out.join("report.md"));
    assert!(md.contains("Comparison of 2 runs: A = "), "{md}");
    assert!(md.contains("| run | target | transport |"));
    assert!(md.contains("| A | sim-gpu | http |"));
    assert!(md.contains("| B | sim-wafer | ws |"));
    assert!(md.contains("### Change against the first run (p50)"));
    assert!(md.contains("TTFT p50 vs A"));
    assert!(
        md.contains("INTERRUPTED"),
        "an interrupted run must be flagged: {md}"
    );
    assert!(md.contains("| concurrency | 1 | 8 |"), "{md}");
    let svg = read(&out.join("charts/ttft_cdf.svg"));
    assert!(svg.contains("A · sim-gpu") && svg.contains("B · sim-wafer"));
}

#[test]
fn text_from_files_is_escaped_and_the_page_is_self_contained() {
    let tmp = testkit::tempdir().unwrap();
    let dir = synthetic_run_with(
        tmp.path(),
        &SyntheticOptions {
            requests: 16,
            scenario: "<script>alert(1)</script> | `x` <img src=x onerror=alert(2)>".into(),
            ..Default::default()
        },
    )
    .unwrap();
    render_run(&dir).unwrap();
    let html = read(&dir.join("report.html"));
    assert!(!html.contains("<script"), "HTML injection");
    assert!(!html.contains("<img"), "HTML injection / external image");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // Outside the (escaped) scenario name, nothing may load anything.
    let escaped = spark_bench::report::style::html_escape(
        "<script>alert(1)</script> | `x` <img src=x onerror=alert(2)>",
    );
    assert!(html.contains(&escaped));
    let rest = html.replace(&escaped, "");
    for forbidden in ["<link", "src=", "@import", "url(", "<iframe", "<object"] {
        assert!(!rest.contains(forbidden), "{forbidden} in report.html");
    }
    // The only URL is the SVG namespace.
    let urls = html.matches("http://").count() + html.matches("https://").count();
    let ns = html.matches("http://www.w3.org/2000/svg").count();
    assert_eq!(urls, ns, "report.html refers to the network");
    assert!(html.contains("@media print"));
    let vb = format!("viewBox=\"0 0 {} ", spark_bench::report::charts::WIDTH);
    assert!(html.contains(&vb));
    let md = read(&dir.join("report.md"));
    assert!(!md.contains("<script"), "{md}");
    assert!(md.contains("&lt;script&gt;"));
    assert!(md.contains("\\| \\`x\\`"));
}

#[test]
fn png_charts_have_rasterised_text() {
    let tmp = testkit::tempdir().unwrap();
    let dir = synthetic_run(tmp.path(), 32, 1).unwrap();
    let out = tmp.path().join("png-only");
    let written = render(&[dir], &Formats::parse_arg("png").unwrap(), &out).unwrap();
    assert!(
        written.iter().all(|p| p.extension().unwrap() == "png"),
        "{written:?}"
    );
    let decoder = png::Decoder::new(std::fs::File::open(out.join("charts/overhead.png")).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.width, spark_bench::report::charts::WIDTH);
    // The title sits in the top 40 rows and the row labels in the left 200 columns: with the
    // bundled font they are dark pixels; without it they would be blank.
    let stride = info.width as usize * 3;
    let dark = |x0: usize, x1: usize, y0: usize, y1: usize| {
        (y0..y1)
            .flat_map(|y| (x0..x1).map(move |x| (x, y)))
            .filter(|(x, y)| buf[y * stride + x * 3] < 100)
            .count()
    };
    assert!(dark(200, 760, 0, 40) > 300, "no title text in the PNG");
    assert!(dark(0, 200, 40, 300) > 300, "no row labels in the PNG");
}

#[test]
fn unfinished_run_is_reported_as_such() {
    let tmp = testkit::tempdir().unwrap();
    let dir = synthetic_run(tmp.path(), 16, 2).unwrap();
    // Simulate a process that died before `finish`: no summary, no timeline, status running.
    std::fs::remove_file(dir.join("summary.json")).unwrap();
    std::fs::remove_file(dir.join("timeline.json")).unwrap();
    std::fs::remove_dir_all(dir.join("histograms")).unwrap();
    let manifest = read(&dir.join("manifest.json")).replace("\"complete\"", "\"running\"");
    std::fs::write(dir.join("manifest.json"), manifest).unwrap();
    render_run(&dir).unwrap();
    let md = read(&dir.join("report.md"));
    assert!(md.contains("did not finish"), "{md}");
    assert!(md.contains("statistics rebuilt from rows"));
    assert!(
        dir.join("charts/timeline.svg").is_file(),
        "timeline rebuilt from rows"
    );
}

#[test]
fn report_command_writes_and_lists_files() {
    let tmp = testkit::tempdir().unwrap();
    let dir = synthetic_run(tmp.path(), 16, 4).unwrap();
    let out = tmp.path().join("out");
    let cli = spark_bench::cli::Cli::try_parse_from([
        "spark-bench".as_ref(),
        "report".as_ref(),
        dir.as_os_str(),
        "--format".as_ref(),
        "md,svg".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ])
    .unwrap();
    let spark_bench::cli::Command::Report(args) = cli.command else {
        panic!("not a report command")
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    assert_eq!(
        rt.block_on(spark_bench::commands::report::execute(args))
            .unwrap(),
        0
    );
    assert!(out.join("report.md").is_file());
    assert!(out.join("charts/waterfall.svg").is_file());
    assert!(!out.join("report.html").exists());
    assert!(!out.join("charts/waterfall.png").exists());

    let err = Formats::parse_arg("md,pdf").unwrap_err();
    assert!(
        err.contains("\"pdf\"") && err.contains("md, html, svg, png"),
        "{err}"
    );
    let err = render(&[tmp.path().join("nope")], &Formats::all(), &out)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a spark-bench results directory"), "{err}");
}

/// A run whose scenario has an `[slo]`: the report's headline shows each cell's goodput and
/// the SLOs, and names a percentile SLO that did not hold, as `summary.json` has them.
#[tokio::test]
async fn goodput_is_in_the_report_when_the_scenario_has_slos() {
    let tmp = testkit::tempdir().unwrap();
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/smoke.toml"),
    )
    .unwrap()
    .replace(
        "[load]",
        "[slo]\nttft = \"10s\"\ntpot = \"p90<=1us\"\n\n[load]",
    );
    let scenario = tmp.path().join("slo.toml");
    std::fs::write(&scenario, text).unwrap();
    let out = tmp.path().join("out");
    let o = crate::binary::run_bin(
        &[
            "run",
            scenario.to_str().unwrap(),
            "--transport",
            "http2",
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--no-report",
        ],
        &[],
    )
    .await;
    assert!(o.status.success(), "{:?}", crate::binary::texts(&o));
    let dir = crate::binary::only_run(&out);
    render_run(&dir).unwrap();
    let run = LoadedRun::open(&dir).unwrap();
    let g = run.summary.cells[0].goodput.clone().expect("goodput");
    assert!(!g.slo_met && g.good_requests > 0, "{g:?}");
    // Both pages escape `<` and `>` as entities (Markdown escapes `_` and `*` too).
    let escaped = |s: &str| s.replace('<', "&lt;").replace('>', "&gt;");
    for name in ["report.md", "report.html"] {
        let page = read(&dir.join(name));
        assert!(page.contains("good req/s (tok/s)"), "{name}");
        assert!(
            page.contains(&escaped(&g.slo)),
            "{name}: the SLOs {}",
            g.slo
        );
        assert!(page.contains("SLO missed"), "{name}");
        assert!(
            page.contains(&escaped(&g.misses[0])),
            "{name}: {}",
            g.misses[0]
        );
    }
}
