//! The `[workload]` table: synthetic token-length distributions or a JSONL dataset of
//! conversations, instead of hand-written `[[turns]]`.
//!
//! Owns: the shape of `[workload]` and its `{ dist = … }` inline tables, and the dataset
//! file's text once `scenario::load` has read it (the plan builder does no I/O).
//! Does not own: drawing, text generation or dataset parsing (see `plan::workload`).

use serde::Deserialize;

/// `[workload]`: where the sessions' prompts and output lengths come from.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Token length of each synthetic user message.
    pub input_tokens: Option<DistSpec>,
    /// `max_output_tokens` of each request (with a dataset: instead of the replies' lengths).
    pub output_tokens: Option<DistSpec>,
    /// Synthetic turns per session. Default 1.
    pub turns: Option<u32>,
    /// Dataset file (JSONL, or vLLM's ShareGPT JSON array), relative to the scenario's folder.
    pub dataset: Option<String>,
    /// The file's layout (`openai`, `sharegpt`, `sharegpt-json`, `aiperf-single-turn`,
    /// `aiperf-multi-turn`, `mooncake`); detected from the content when absent.
    pub format: Option<DatasetFormat>,
    /// Conversations drawn from the dataset with the seed. Default: every line.
    pub sample: Option<u32>,
    /// Skip unusable dataset lines (counted in a warning) instead of stopping. Default false.
    pub skip_bad_lines: Option<bool>,
    /// The dataset file as read by `scenario::load` (not a TOML key).
    #[serde(skip)]
    pub dataset_source: Option<DatasetSource>,
}

/// A dataset file's path (as resolved against the scenario's folder) and text.
#[derive(Debug, Clone)]
pub struct DatasetSource {
    /// The path it was read from.
    pub path: String,
    /// Its text.
    pub text: String,
}

/// `{ dist = "lognormal", mean = 2000, sd = 600, min = 1, max = 8000 }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistSpec {
    /// `fixed`, `uniform`, `normal` or `lognormal`.
    pub dist: DistKind,
    /// `fixed`: the value.
    pub value: Option<f64>,
    /// `normal`, `lognormal`: the mean of the token count.
    pub mean: Option<f64>,
    /// `normal`, `lognormal`: the standard deviation of the token count (not of its log).
    pub sd: Option<f64>,
    /// `uniform`: the lower bound; otherwise a clamp.
    pub min: Option<f64>,
    /// `uniform`: the upper bound; otherwise a clamp.
    pub max: Option<f64>,
}

/// A token-length distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DistKind {
    /// Always `value`.
    Fixed,
    /// Whole numbers from `min` to `max`, equally likely.
    Uniform,
    /// Gaussian with `mean` and `sd`.
    Normal,
    /// Log-normal whose own mean and sd are `mean` and `sd`.
    Lognormal,
}

/// The layout of a dataset file (of each line, for the JSONL ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum DatasetFormat {
    /// `{"messages": [{"role": "user", "content": "…"}, …]}`.
    #[serde(rename = "openai")]
    Openai,
    /// `{"conversations": [{"from": "human", "value": "…"}, …]}`.
    #[serde(rename = "sharegpt")]
    Sharegpt,
    /// vLLM's ShareGPT file: one JSON array of `{"id", "conversations": […]}` objects.
    #[serde(rename = "sharegpt-json")]
    SharegptJson,
    /// AIPerf `single_turn`: `{"text": "…", "output_length": N, "timestamp": ms}`.
    #[serde(rename = "aiperf-single-turn")]
    AiperfSingleTurn,
    /// AIPerf `multi_turn`: `{"session_id": "…", "turns": [{"text": "…", "delay": ms}, …]}`.
    #[serde(rename = "aiperf-multi-turn")]
    AiperfMultiTurn,
    /// AIPerf `mooncake_trace`: `{"timestamp": ms, "input_length": N, "output_length": M,
    /// "hash_ids": […]}`.
    #[serde(rename = "mooncake")]
    Mooncake,
}

impl DatasetFormat {
    /// The name used in the scenario file.
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetFormat::Openai => "openai",
            DatasetFormat::Sharegpt => "sharegpt",
            DatasetFormat::SharegptJson => "sharegpt-json",
            DatasetFormat::AiperfSingleTurn => "aiperf-single-turn",
            DatasetFormat::AiperfMultiTurn => "aiperf-multi-turn",
            DatasetFormat::Mooncake => "mooncake",
        }
    }
}
