//! Simulator profiles: the timing model's parameters, built in or overridden from TOML.
//!
//! Owns: the `Profile` data, the built-in profiles and loading `--profile-file`.
//! Does not own: applying the numbers (see `model`).

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which provider-specific timing fields a chat completion carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ChatTiming {
    /// Plain OpenAI format.
    #[default]
    None,
    /// Cerebras `time_info{queue_time,prompt_time,completion_time,total_time,created}` (seconds)
    /// on the usage chunk.
    Cerebras,
    /// llama.cpp `timings{prompt_n,prompt_ms,predicted_n,predicted_ms,…}` on the final chunk.
    Llamacpp,
}

impl ChatTiming {
    /// Parses the `x-sim-timing-flavour` header value.
    pub fn parse(s: &str) -> Option<ChatTiming> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "openai" => Some(ChatTiming::None),
            "cerebras" => Some(ChatTiming::Cerebras),
            "llamacpp" | "llama.cpp" | "llama-cpp" => Some(ChatTiming::Llamacpp),
            _ => None,
        }
    }
}

/// Per-request fault probabilities (each drawn independently, seeded by the request).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultRates {
    /// Probability of an HTTP 429 (`rate_limit_exceeded`, `Retry-After: 1`).
    pub status_429: f64,
    /// Probability of an HTTP 500.
    pub status_500: f64,
    /// Probability of resetting the connection halfway through the output.
    pub reset: f64,
    /// Probability of a 5 s stall before the first token.
    pub stall: f64,
}

/// The timing model of one simulated deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Profile name (`gpu`, `wafer`, `cpu`, `fast`, or a custom one).
    pub name: String,
    /// Model name reported in responses and `/v1/models`.
    pub model: String,
    /// Mean decode rate, tokens per second, between the first and the last content chunk.
    pub decode_tok_s: f64,
    /// Weights of "k tokens in one chunk" for k = 1, 2, …; `[1.0]` is one token per chunk.
    pub chunk_tokens: Vec<f64>,
    /// Probability that a decode step runs at `burst_tok_s` (speculative-decoding bursts).
    pub burst_prob: f64,
    /// Instantaneous rate of a burst step, tokens per second.
    pub burst_tok_s: f64,
    /// Log-normal sigma of each step's duration (per-chunk jitter; 0 = metronome).
    pub step_jitter: f64,
    /// Consecutive content chunks written together, in one write (each still its own event),
    /// as a server that flushes its output every few events does. A group goes out when its
    /// last chunk is due. 1 (the default) writes every chunk when it is due.
    #[serde(default = "one")]
    pub chunks_per_write: u32,
    /// API overhead paid by every request before the model starts.
    #[serde(with = "crate::units::serde_duration")]
    pub api_base: Duration,
    /// API overhead per input token the API has to (re)process.
    #[serde(with = "crate::units::serde_duration")]
    pub api_per_input_token: Duration,
    /// Prefill rate for input tokens not already held in cached state, tokens per second.
    pub prefill_tok_s: f64,
    /// Session initialisation, paid when a request does not continue cached connection state.
    #[serde(with = "crate::units::serde_duration")]
    pub session_init: Duration,
    /// Concurrent generations per server; beyond it requests wait FIFO.
    pub capacity: u32,
    /// Provider timing fields on chat completions.
    #[serde(default)]
    pub chat_timing: ChatTiming,
    /// Random faults (all zero in the built-ins).
    #[serde(default)]
    pub faults: FaultRates,
    /// Refuse requests without an `Authorization` header (401).
    #[serde(default)]
    pub require_api_key: bool,
}

fn one() -> u32 {
    1
}

const NAMES: &[&str] = &["gpu", "wafer", "cpu", "fast"];

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

impl Profile {
    /// A built-in profile by name.
    pub fn builtin(name: &str) -> Option<Profile> {
        let base = Profile {
            name: name.to_string(),
            model: "sim-model".to_string(),
            decode_tok_s: 1.0,
            chunk_tokens: vec![1.0],
            burst_prob: 0.0,
            burst_tok_s: 1.0,
            step_jitter: 0.0,
            chunks_per_write: 1,
            api_base: Duration::ZERO,
            api_per_input_token: Duration::ZERO,
            prefill_tok_s: 1e9,
            session_init: Duration::ZERO,
            capacity: 1,
            chat_timing: ChatTiming::None,
            faults: FaultRates::default(),
            require_api_key: false,
        };
        let p = match name {
            "gpu" => Profile {
                model: "sim-gpu-flagship".into(),
                decode_tok_s: 65.0,
                step_jitter: 0.25,
                api_base: ms(150),
                api_per_input_token: Duration::from_micros(5),
                prefill_tok_s: 8_000.0,
                session_init: ms(300),
                capacity: 64,
                ..base
            },
            "wafer" => Profile {
                model: "sim-wafer-spark".into(),
                decode_tok_s: 1000.0,
                chunk_tokens: vec![0.45, 0.25, 0.15, 0.15],
                burst_prob: 0.25,
                burst_tok_s: 4000.0,
                step_jitter: 0.2,
                api_base: ms(40),
                api_per_input_token: Duration::from_micros(2),
                prefill_tok_s: 100_000.0,
                session_init: ms(60),
                capacity: 32,
                chat_timing: ChatTiming::Cerebras,
                ..base
            },
            "cpu" => Profile {
                model: "sim-cpu-local".into(),
                decode_tok_s: 15.0,
                step_jitter: 0.1,
                api_base: ms(5),
                api_per_input_token: Duration::from_micros(1),
                prefill_tok_s: 150.0,
                session_init: ms(200),
                capacity: 1,
                chat_timing: ChatTiming::Llamacpp,
                ..base
            },
            "fast" => Profile {
                model: "sim-fast".into(),
                decode_tok_s: 20_000.0,
                chunk_tokens: vec![0.5, 0.3, 0.2],
                step_jitter: 0.1,
                api_base: Duration::from_micros(200),
                prefill_tok_s: 10_000_000.0,
                session_init: Duration::from_micros(500),
                capacity: 1024,
                ..base
            },
            _ => return None,
        };
        Some(p)
    }

    /// Names of the built-in profiles.
    pub fn builtin_names() -> &'static [&'static str] {
        NAMES
    }

    /// The profile's mean decode rate, tokens per second.
    pub fn decode_tok_s(&self) -> f64 {
        self.decode_tok_s
    }

    /// Loads a profile: the built-in `base` (or the file's `base = "…"` key) with the file's
    /// keys layered on top. Unknown keys are errors naming the file.
    pub fn from_toml_file(path: &Path, base: &str) -> anyhow::Result<Profile> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read profile file {}: {e}", path.display()))?;
        Profile::from_toml_str(&text, base)
            .map_err(|e| anyhow::anyhow!("profile file {}: {e:#}", path.display()))
    }

    /// Like [`Profile::from_toml_file`], from a string.
    pub fn from_toml_str(text: &str, base: &str) -> anyhow::Result<Profile> {
        let mut overrides: toml::Table = toml::from_str(text)?;
        let base_name = match overrides.remove("base") {
            Some(toml::Value::String(s)) => s,
            Some(_) => anyhow::bail!("`base` must be a profile name string"),
            None => base.to_string(),
        };
        let base = Profile::builtin(&base_name).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown base profile {base_name:?} (built-ins: {})",
                NAMES.join(", ")
            )
        })?;
        let mut table = toml::Table::try_from(&base)?;
        for (k, v) in overrides {
            table.insert(k, v);
        }
        let p: Profile = toml::Value::Table(table).try_into()?;
        p.validate()?;
        Ok(p)
    }

    /// Checks that the numbers make sense.
    pub fn validate(&self) -> anyhow::Result<()> {
        let pos = |v: f64| v.is_finite() && v > 0.0;
        anyhow::ensure!(pos(self.decode_tok_s), "decode_tok_s must be > 0");
        anyhow::ensure!(pos(self.prefill_tok_s), "prefill_tok_s must be > 0");
        anyhow::ensure!(pos(self.burst_tok_s), "burst_tok_s must be > 0");
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.burst_prob),
            "burst_prob must be in [0, 1]"
        );
        anyhow::ensure!(
            self.step_jitter.is_finite() && (0.0..=2.0).contains(&self.step_jitter),
            "step_jitter must be in [0, 2]"
        );
        anyhow::ensure!(
            !self.chunk_tokens.is_empty()
                && self.chunk_tokens.iter().all(|w| w.is_finite() && *w >= 0.0)
                && self.chunk_tokens.iter().sum::<f64>() > 0.0,
            "chunk_tokens must be non-negative weights with a positive sum, e.g. [0.5, 0.3, 0.2]"
        );
        anyhow::ensure!(self.capacity >= 1, "capacity must be at least 1");
        anyhow::ensure!(
            (1..=1024).contains(&self.chunks_per_write),
            "chunks_per_write must be in [1, 1024]"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_toml_overrides_layer_on_top() {
        for n in Profile::builtin_names() {
            Profile::builtin(n).unwrap().validate().unwrap();
        }
        let p = Profile::from_toml_str(
            "name = \"mine\"\nbase = \"gpu\"\ndecode_tok_s = 80.0\nsession_init = \"10ms\"",
            "wafer",
        )
        .unwrap();
        assert_eq!(p.decode_tok_s(), 80.0);
        assert_eq!(p.session_init, Duration::from_millis(10));
        assert_eq!(p.api_base, Duration::from_millis(150));
        let e = Profile::from_toml_str("decode_tok_sec = 3.0", "gpu").unwrap_err();
        assert!(format!("{e:#}").contains("decode_tok_sec"), "{e:#}");
    }
}
