//! Reports: charts (SVG, PNG), `report.md` and a self-contained `report.html`, from one run
//! or several runs side by side.
//!
//! Owns: what a report shows and how (`model`, `markdown`, `html`, `charts`), and writing the
//! report files. Renderers are pure (`fn … -> String` / `Vec<u8>` from loaded data); only
//! [`render`] and [`render_run`] touch the file system.
//! Does not own: reading results (it goes through `store::LoadedRun`) or statistics
//! (`recorder::Summary` and the stored histograms are used as they are).
//!
//! [`openmetrics`] renders the run's measurements as an OpenMetrics / Prometheus exposition
//! (`metrics.om`, `run --metrics-listen`); [`openmetrics_parse`] reads one back, strictly.
//!
//! [`vllm`] exports a run as `vllm bench serve --save-result` JSON, one file per cell (the
//! one writer here that reads the rows, on request: `spark-bench export vllm`).
//!
//! A report never reads `requests.csv` or `chunks.csv`: it uses `summary.json`, the
//! histograms (including the `phase_*` waterfall histograms) and `timeline.json` (one sampled
//! session per cell), so its cost does not grow with the number of requests.
//!
//! # Output
//!
//! ```text
//! <out>/report.md            GitHub-flavoured Markdown (step summary, PR comment)
//! <out>/report.html          one file: inline CSS + SVG, no network, phone/laptop/print
//! <out>/charts/<chart>.svg   ttft_cdf, overhead, waterfall, timeline, itl, throughput
//! <out>/charts/<chart>.png   (+ concurrency when the runs have several load levels)
//! ```
//!
//! A sweep (`run --sweep`) gets its own report at the sweep level ([`sweep`]): the sweep
//! table with the knees, and `charts/sweep_*.svg|png` (latency, throughput and goodput
//! against load, one line per target × transport).
//!
//! # Performance check (1,000,000 requests)
//!
//! ```text
//! cargo run --release --example synthetic_report -- --requests 1000000 --tokens 4 --out target/report-1m
//! /usr/bin/time -v target/release/spark-bench report target/report-1m/<run-id>
//! ```
//! The first command writes a synthetic run of a million requests (and renders it once);
//! the second times rendering alone (elapsed and "Maximum resident set size"). Measured on
//! 2026-11-22 (2 shared cores): 1,000,040 requests (426 MB of CSV) render every format in
//! 0.08–0.14 s with a peak RSS of 31 MB.

pub mod attribution;
pub mod charts;
pub mod data;
pub mod fixture;
pub mod html;
pub mod markdown;
pub mod model;
pub mod openmetrics;
pub mod openmetrics_parse;
pub mod style;
pub mod sweep;
pub mod vllm;

use std::path::{Path, PathBuf};

use anyhow::Context;

pub use charts::ChartKind;
pub use data::{ReportInput, RunView};
pub use model::Model;

/// `report.md`.
pub const MARKDOWN_FILE: &str = "report.md";
/// `report.html`.
pub const HTML_FILE: &str = "report.html";
/// `charts/`.
pub const CHARTS_DIR: &str = "charts";

/// Which files to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Formats {
    /// `report.md`.
    pub md: bool,
    /// `report.html`.
    pub html: bool,
    /// `charts/*.svg`.
    pub svg: bool,
    /// `charts/*.png`.
    pub png: bool,
}

impl Formats {
    /// Every format.
    pub fn all() -> Formats {
        Formats {
            md: true,
            html: true,
            svg: true,
            png: true,
        }
    }

    /// Parses one `--format` value (clap's value parser): a comma-separated list of `md`
    /// (or `markdown`), `html`, `svg`, `png`, case-insensitive; empty items are skipped.
    pub fn parse_arg(value: &str) -> Result<Formats, String> {
        let mut f = Formats {
            md: false,
            html: false,
            svg: false,
            png: false,
        };
        for item in value.split(',') {
            match item.trim().to_ascii_lowercase().as_str() {
                "md" | "markdown" => f.md = true,
                "html" => f.html = true,
                "svg" => f.svg = true,
                "png" => f.png = true,
                "" => {}
                other => {
                    return Err(format!(
                        "unknown report format {other:?}; use a comma-separated list of md, html, svg, png"
                    ))
                }
            }
        }
        Ok(f)
    }

    /// Every format any of the `--format` values names; an error when they name none.
    pub fn union(values: &[Formats]) -> anyhow::Result<Formats> {
        let f = values
            .iter()
            .fold(Formats::parse_arg("").unwrap(), |a, b| Formats {
                md: a.md || b.md,
                html: a.html || b.html,
                svg: a.svg || b.svg,
                png: a.png || b.png,
            });
        anyhow::ensure!(
            f.md || f.html || f.svg || f.png,
            "--format is empty; use a comma-separated list of md, html, svg, png"
        );
        Ok(f)
    }
}

/// Renders the report of ONE run into its own directory (every format) and returns the
/// written paths. `spark-bench run` calls this at its end.
pub fn render_run(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    render(&[dir.to_path_buf()], &Formats::all(), dir)
}

/// Renders a report of one run, or a side-by-side comparison of several, into `out`, and
/// returns the written paths (Markdown, HTML, then charts).
pub fn render(dirs: &[PathBuf], formats: &Formats, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let input = ReportInput::load(dirs)?;
    let files = render_files(&input, formats)?;
    let mut written = Vec::with_capacity(files.len());
    for (rel, bytes) in files {
        let path = out.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| {
                format!(
                    "cannot create {}; pass --out with a writable directory",
                    parent.display()
                )
            })?;
        }
        std::fs::write(&path, bytes).with_context(|| {
            format!(
                "cannot write {}; pass --out with a writable directory",
                path.display()
            )
        })?;
        written.push(path);
    }
    Ok(written)
}

/// Every report file as (path relative to the output directory, bytes). Pure.
pub fn render_files(
    input: &ReportInput,
    formats: &Formats,
) -> anyhow::Result<Vec<(PathBuf, Vec<u8>)>> {
    let kinds = charts::available(input);
    let model = model::build(input);
    let mut files = Vec::new();
    let mut svgs = Vec::new();
    if formats.svg || formats.html {
        for k in &kinds {
            svgs.push((*k, charts::svg(*k, input)?));
        }
    }
    let mut pngs = Vec::new();
    if formats.png {
        for k in &kinds {
            pngs.push((*k, charts::png(*k, input)?));
        }
    }
    if formats.md {
        let links: Vec<(ChartKind, Option<String>)> = kinds
            .iter()
            .map(|k| {
                let ext = if formats.svg {
                    Some("svg")
                } else if formats.png {
                    Some("png")
                } else {
                    None
                };
                (
                    *k,
                    ext.map(|e| format!("{CHARTS_DIR}/{}.{e}", k.file_stem())),
                )
            })
            .collect();
        files.push((
            PathBuf::from(MARKDOWN_FILE),
            markdown::render(&model, &links).into_bytes(),
        ));
    }
    if formats.html {
        files.push((
            PathBuf::from(HTML_FILE),
            html::render(&model, &svgs).into_bytes(),
        ));
    }
    if formats.svg {
        for (k, s) in svgs {
            files.push((
                Path::new(CHARTS_DIR).join(format!("{}.svg", k.file_stem())),
                s.into_bytes(),
            ));
        }
    }
    for (k, p) in pngs {
        files.push((
            Path::new(CHARTS_DIR).join(format!("{}.png", k.file_stem())),
            p,
        ));
    }
    Ok(files)
}

#[cfg(test)]
mod tests;
