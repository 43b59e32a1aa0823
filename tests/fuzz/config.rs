//! Fuzz targets for what users type: scenario files (the shipped scenarios, mutated key by
//! key and value by value, through the loader and the plan builder), `--link` specs and
//! durations.

use std::time::Duration;

use spark_bench::link::Link;
use spark_bench::rng::Rng;
use spark_bench::scenario::{self, ScenarioError};

use super::engine::{pick, Target};

const SCENARIOS: &[&str] = &[
    include_str!("../../scenarios/ci-gate.toml"),
    include_str!("../../scenarios/agent-loop.toml"),
    include_str!("../../scenarios/rate.toml"),
    include_str!("../../scenarios/synthetic.toml"),
    include_str!("../../scenarios/smoke.toml"),
    include_str!("../../scenarios/snake.toml"),
];

const VALUES: &[&str] = &[
    "\"banana\"",
    "-1",
    "0",
    "1",
    "1e999",
    "nan",
    "inf",
    "\"rtt=40ms,bandwidth=0bit\"",
    "\"1h\"",
    "\"+10%\"",
    "\"-5ms\"",
    "[]",
    "{}",
    "18446744073709551615",
    "18446744073709551616",
    "\"\"",
    "\"p90<=20ms\"",
    "\"p100<=1ms\"",
    "\"99999999999999999999s\"",
    "true",
    "\"0s\"",
    "\"5000000000000000000ms\"",
    "[\"ws\", \"ws\"]",
    "[\"no-such\"]",
    "\"\\u0000\"",
    "4294967296",
    "\"p0<=0ms\"",
    "\"x=1\"",
    "\"rtt=1ms,jitter=2h\"",
    "\"lognormal(0, 1e308)\"",
    "{ x = 1 }",
];

const KEYS: &[&str] = &[
    "name",
    "seed",
    "link",
    "max_output_tokens",
    "context_bytes",
    "sessions",
    "concurrency",
    "rate",
    "duration",
    "warmup_sessions",
    "targets",
    "transports",
    "think_time",
    "prompt",
    "ttft",
    "tpot",
    "e2e",
    "overhead",
    "connection_setup",
    "dispatch_lag",
    "banana",
    "input",
    "output",
    "dataset",
    "arrival",
    "stall_timeout",
    "request_timeout",
    "mean",
    "p50",
];

const SECTIONS: &[&str] = &[
    "[load]",
    "[matrix]",
    "[[turns]]",
    "[gate]",
    "[slo]",
    "[workload]",
    "[targets.sim-wafer]",
    "[workload.input]",
    "[[turns.tool_calls]]",
    "[load]\n[load]",
];

pub const SCENARIO: Target = Target {
    name: "scenario",
    dict: &[
        b"\n[gate]\n",
        b" = ",
        b"\"",
        b"[[turns]]\n",
        b"#",
        b"'''",
        b"\n",
    ],
    generate: |r| gen_scenario(r).into_bytes(),
    run: run_scenario,
};

fn gen_scenario(r: &mut Rng) -> String {
    let mut lines: Vec<String> = pick(r, SCENARIOS).lines().map(str::to_string).collect();
    for _ in 0..r.below(6) + 1 {
        let i = r.below(lines.len() as u64) as usize;
        match r.below(6) {
            0 | 1 => {
                if let Some((k, _)) = lines[i].clone().split_once(" = ") {
                    lines[i] = format!("{k} = {}", pick(r, VALUES));
                }
            }
            2 => {
                lines.insert(i, format!("{} = {}", pick(r, KEYS), pick(r, VALUES)));
            }
            3 => lines.insert(i, pick(r, SECTIONS).to_string()),
            4 => {
                lines.remove(i);
            }
            _ => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
        }
        if lines.is_empty() {
            lines.push("name = \"x\"".into());
        }
    }
    lines.join("\n")
}

fn run_scenario(b: &[u8], _: &mut Rng) -> Result<(), String> {
    let text = String::from_utf8_lossy(b);
    let path = "fuzz.toml";
    match scenario::parse(path, &text) {
        Err(ScenarioError::Invalid { line, message, .. }) => {
            let lines = text.lines().count() + 1;
            if line == 0 || line > lines || message.trim().is_empty() {
                return Err(format!("error at line {line} of {lines}: {message:?}"));
            }
        }
        Err(e) => return Err(format!("parse gave a read error: {e}")),
        Ok(s) => {
            let overrides = spark_bench::plan::Overrides::default();
            if let Err(e) = spark_bench::plan::build(&s, path, b, &overrides) {
                if e.to_string().trim().is_empty() {
                    return Err("a plan error without a message".into());
                }
            }
        }
    }
    Ok(())
}

fn dur(r: &mut Rng) -> String {
    let n = match r.below(5) {
        0 => format!("{}", r.next_u64()),
        1 => format!("{}.{}", r.below(100), r.below(1000)),
        2 => "-1".into(),
        _ => format!("{}", r.below(5000)),
    };
    let unit = pick(
        r,
        &[
            "ms", "s", "us", "µs", "ns", "m", "h", "d", "y", "", " ms", "msec", "weeks",
        ],
    );
    let mut s = format!("{n}{unit}");
    if r.below(4) == 0 {
        s = format!("{s} {}", dur(r));
    }
    s
}

pub const LINK: Target = Target {
    name: "link",
    dict: &[
        b",",
        b"=",
        b"rtt",
        b"jitter",
        b"bandwidth",
        b"bw",
        b"none",
        b"mbit",
        b"1e308",
        b"  ",
    ],
    generate: |r| {
        let mut parts = Vec::new();
        for _ in 0..r.below(4) {
            let key = pick(r, &["rtt", "jitter", "bandwidth", "bw", "loss", " rtt "]);
            let value = match key {
                "bandwidth" | "bw" => {
                    let n = pick(
                        r,
                        &[
                            "1",
                            "999",
                            "1500",
                            "0.5",
                            "1e3",
                            "0",
                            "-3",
                            "1e400",
                            "123456789",
                        ],
                    );
                    let u = pick(
                        r,
                        &[
                            "bit", "kbit", "mbit", "gbit", "bps", "kbps", "Mbps", "", "mb",
                        ],
                    );
                    format!("{n}{u}")
                }
                _ => dur(r),
            };
            parts.push(format!("{key}={value}"));
        }
        parts.join(",").into_bytes()
    },
    run: run_link,
};

fn run_link(b: &[u8], _: &mut Rng) -> Result<(), String> {
    let s = String::from_utf8_lossy(b);
    let Ok(link) = s.parse::<Link>() else {
        return Ok(());
    };
    // What we print (manifest, reports, --help examples) reads back as the same link.
    let shown = link.to_string();
    match shown.parse::<Link>() {
        Ok(back) if back == link => Ok(()),
        Ok(back) => Err(format!(
            "{s:?} prints as {shown:?}, which reads back as {back:?}, not {link:?}"
        )),
        Err(e) => Err(format!(
            "{s:?} prints as {shown:?}, which does not parse: {e}"
        )),
    }
}

pub const DURATION: Target = Target {
    name: "duration",
    dict: &[b"ms", b"s", b" ", b"1", b"0", b"18446744073709551615", b"."],
    generate: |r| dur(r).into_bytes(),
    run: run_duration,
};

fn run_duration(b: &[u8], _: &mut Rng) -> Result<(), String> {
    let s = String::from_utf8_lossy(b);
    // The scenario's duration fields (think_time and friends) and humantime.
    let toml = format!(
        "name = \"d\"\n[[turns]]\nprompt = \"p\"\nthink_time = {:?}\n",
        s.as_ref()
    );
    let _ = scenario::parse("d.toml", &toml);
    let Ok(d) = humantime::parse_duration(&s) else {
        return Ok(());
    };
    let shown = spark_bench::units::fmt_duration_spec(d);
    match humantime::parse_duration(&shown) {
        Ok(back) if back == d => Ok(()),
        Ok(back) => Err(format!("{s:?} = {d:?} prints as {shown:?} = {back:?}")),
        Err(e) if d > Duration::from_secs(u64::MAX / 2) => {
            let _ = e;
            Ok(())
        }
        Err(e) => Err(format!(
            "{s:?} = {d:?} prints as {shown:?}, which does not parse: {e}"
        )),
    }
}
