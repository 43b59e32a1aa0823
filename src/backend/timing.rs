//! Provider-reported server timing, normalised to milliseconds in [`ServerTiming`].
//!
//! Owns: reading Cerebras `time_info` (seconds), llama.cpp `timings` (ms), Groq
//! `usage.{queue,prompt,completion,total}_time` / `x_groq.usage` (seconds), the Responses
//! WebSocket `responsesapi.websocket_timing` event (ms), and the `openai-processing-ms` header.
//! Does not own: deciding what the numbers mean for overhead (the recorder does that).
//!
//! `ttft_ms` is always "server time from receiving the request to the first token" as far as
//! the provider reports it:
//! * Cerebras / Groq: `queue_time + prompt_time`.
//! * llama.cpp: `prompt_ms` (it reports no queue time).
//! * websocket-timing: `engine_service_ttft_total_ms`, the engine's own TTFT. The Responses
//!   API layer's time outside the engine (`responses_duration_excl_engine_and_client_tool_time_ms`)
//!   is reported separately as `api_overhead_ms` and is deliberately *not* added: that layer is
//!   part of the round trip spark-bench measures, so client TTFT − `ttft_ms` shows it as overhead.
//! * `openai-processing-ms` covers only the time until the response headers of a stream, so
//!   it is recorded as `total_ms` of source `openai-processing-ms` and never as a TTFT.

use serde::Deserialize;

use crate::vocab::ServerTiming;

/// Cerebras `time_info` (seconds).
#[derive(Debug, Deserialize)]
pub struct CerebrasTimeInfo {
    queue_time: Option<f64>,
    prompt_time: Option<f64>,
    total_time: Option<f64>,
}

impl CerebrasTimeInfo {
    /// As a server timing.
    pub fn timing(&self) -> ServerTiming {
        ServerTiming {
            source: "cerebras-time-info".into(),
            ttft_ms: sum_s(self.queue_time, self.prompt_time),
            total_ms: self.total_time.map(|s| s * 1e3),
            api_overhead_ms: None,
            queue_ms: self.queue_time.map(|s| s * 1e3),
        }
    }
}

/// llama.cpp `timings` (milliseconds).
#[derive(Debug, Deserialize)]
pub struct LlamaTimings {
    prompt_ms: Option<f64>,
    predicted_ms: Option<f64>,
}

impl LlamaTimings {
    /// As a server timing.
    pub fn timing(&self) -> ServerTiming {
        ServerTiming {
            source: "llamacpp-timings".into(),
            ttft_ms: self.prompt_ms,
            total_ms: match (self.prompt_ms, self.predicted_ms) {
                (Some(p), Some(d)) => Some(p + d),
                _ => None,
            },
            api_overhead_ms: None,
            queue_ms: None,
        }
    }
}

/// Groq timing fields inside `usage` (seconds).
#[derive(Debug, Deserialize, Default)]
pub struct GroqUsageTimes {
    queue_time: Option<f64>,
    prompt_time: Option<f64>,
    total_time: Option<f64>,
}

impl GroqUsageTimes {
    /// As a server timing, when any field is present.
    pub fn timing(&self) -> Option<ServerTiming> {
        if self.queue_time.is_none() && self.prompt_time.is_none() && self.total_time.is_none() {
            return None;
        }
        Some(ServerTiming {
            source: "groq-usage".into(),
            ttft_ms: sum_s(self.queue_time, self.prompt_time),
            total_ms: self.total_time.map(|s| s * 1e3),
            api_overhead_ms: None,
            queue_ms: self.queue_time.map(|s| s * 1e3),
        })
    }
}

/// `responsesapi.websocket_timing.timing_metrics` (milliseconds).
#[derive(Debug, Deserialize)]
pub struct WsTimingMetrics {
    responses_duration_excl_engine_and_client_tool_time_ms: Option<f64>,
    engine_service_total_ms: Option<f64>,
    engine_service_ttft_total_ms: Option<f64>,
    engine_queue_max_ms: Option<f64>,
}

impl WsTimingMetrics {
    /// The object as serde reads it, by the decoders' fast path (`None`: serde's to read).
    pub(super) fn scan(c: &mut super::scan::Cursor<'_>) -> Option<Self> {
        let mut m = WsTimingMetrics {
            responses_duration_excl_engine_and_client_tool_time_ms: None,
            engine_service_total_ms: None,
            engine_service_ttft_total_ms: None,
            engine_queue_max_ms: None,
        };
        let mut seen = [false; 4];
        c.object(|c, key| {
            let (i, field) = match key {
                "responses_duration_excl_engine_and_client_tool_time_ms" => (
                    0,
                    &mut m.responses_duration_excl_engine_and_client_tool_time_ms,
                ),
                "engine_service_total_ms" => (1, &mut m.engine_service_total_ms),
                "engine_service_ttft_total_ms" => (2, &mut m.engine_service_ttft_total_ms),
                "engine_queue_max_ms" => (3, &mut m.engine_queue_max_ms),
                _ => return c.skip(),
            };
            super::scan::once(&mut seen[i])?;
            *field = c.opt_f64()?;
            Some(())
        })?;
        Some(m)
    }

    /// As a server timing (see the module docs for the TTFT choice).
    pub fn timing(&self) -> ServerTiming {
        let api = self.responses_duration_excl_engine_and_client_tool_time_ms;
        ServerTiming {
            source: "websocket-timing".into(),
            ttft_ms: self.engine_service_ttft_total_ms,
            total_ms: match (self.engine_service_total_ms, api) {
                (Some(e), Some(a)) => Some(e + a),
                (e, _) => e,
            },
            api_overhead_ms: api,
            queue_ms: self.engine_queue_max_ms,
        }
    }
}

/// The `openai-processing-ms` header, when present and numeric.
pub fn from_headers(headers: &::http::HeaderMap) -> Option<ServerTiming> {
    let v = headers.get("openai-processing-ms")?.to_str().ok()?;
    let ms: f64 = v.trim().parse().ok()?;
    Some(ServerTiming {
        source: "openai-processing-ms".into(),
        total_ms: Some(ms),
        ..ServerTiming::default()
    })
}

fn sum_s(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some((a.unwrap_or(0.0) + b.unwrap_or(0.0)) * 1e3),
    }
}
