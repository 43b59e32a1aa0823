//! `run --url URL` without `--model`: the model is the one `GET {URL}/models` (OpenAI's
//! `/v1/models`, which vLLM, llama-server, SGLang and the simulator serve) lists first,
//! said so on stderr; an error that says how to give `--model` when the list cannot be had.
//!
//! Owns: asking for the list (before any plan exists, on a thread of its own, so it works
//! from inside the command's runtime or outside one), reading `{"data": [{"id": …}, …]}`,
//! and the messages. Does not own: the GET itself (`transport::fetch`), the target
//! (`plan::targets::UrlTarget`).

use std::time::Duration;

use crate::transport::{fetch, proxy, Trust};
use crate::vocab::BaseUrl;

/// How long the lookup may take, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The model `GET {url}/models` lists first, with a line on stderr naming it (and how many
/// there were); `api_key_env` names the variable whose key is sent as a bearer token.
pub fn first_model(url: &str, api_key_env: Option<&str>) -> anyhow::Result<String> {
    let (url, _) = crate::vocab::redact::strip_userinfo(url.trim());
    let shown = url.trim_end_matches('/').to_string();
    let fail = |why: String| {
        anyhow::anyhow!(
            "--url without --model: could not read the model list at {shown}/models ({why}); give the model name with --model M (e.g. --url {shown} --model my-model)"
        )
    };
    let key = match api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            fail(format!(
                "the variable {var} named by --api-key-env is not set"
            ))
        })?),
        None => None,
    };
    let endpoint = BaseUrl::parse(&url).map_err(|e| fail(e.to_string()))?;
    let proxy = proxy::choose(None, &endpoint, |name| std::env::var(name).ok()).map_err(&fail)?;
    let trust = crate::tls::EndpointTrust::load(None, None)
        .map(|t| Trust::Endpoint(std::sync::Arc::new(t)))
        .map_err(|e| fail(format!("{e:#}")))?;
    let mut headers = Vec::new();
    if let Some(k) = key {
        let v = http::HeaderValue::from_str(&format!("Bearer {k}"))
            .map_err(|_| fail("the API key is not a valid header value".into()))?;
        headers.push((http::header::AUTHORIZATION, v));
    }
    let got = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(fetch::get(
            &endpoint,
            "/models",
            &trust,
            proxy.as_ref(),
            &headers,
            TIMEOUT,
        ))
    })
    .join()
    .map_err(|_| fail("the lookup's thread panicked".into()))?;
    let (status, body) = got.map_err(&fail)?;
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        return Err(fail(format!("HTTP {status}: {}", text.trim())));
    }
    let ids = model_ids(&body).map_err(&fail)?;
    let first = ids[0].clone();
    errln!(
        "--url without --model: using model {first:?}, the {} of the {} model(s) GET {shown}/models lists (give --model M to choose)",
        if ids.len() == 1 { "only one" } else { "first" },
        ids.len()
    );
    Ok(first)
}

/// The `id`s of an OpenAI model list (`{"object": "list", "data": [{"id": …}, …]}`), in
/// order; at least one.
pub fn model_ids(body: &[u8]) -> Result<Vec<String>, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the answer is not JSON: {e}"))?;
    let ids: Vec<String> = v
        .get("data")
        .and_then(serde_json::Value::as_array)
        .ok_or("the answer has no `data` array of models")?
        .iter()
        .filter_map(|m| m.get("id").and_then(serde_json::Value::as_str))
        .filter(|id| !id.trim().is_empty())
        .map(str::to_string)
        .collect();
    if ids.is_empty() {
        return Err("the server lists no model".into());
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_openai_model_lists() {
        let body =
            br#"{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model"},{"id":"b"}]}"#;
        assert_eq!(model_ids(body).unwrap(), ["Qwen/Qwen3-0.6B", "b"]);
        assert!(model_ids(br#"{"data":[]}"#)
            .unwrap_err()
            .contains("lists no model"));
        assert!(model_ids(b"<html>").unwrap_err().contains("not JSON"));
        assert!(model_ids(br#"{"models":[]}"#)
            .unwrap_err()
            .contains("no `data` array"));
    }
}
