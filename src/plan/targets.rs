//! Targets: the built-in simulator targets, and resolving `[targets.NAME]` tables (from the
//! scenario and `--targets FILE`) field by field on top of them; the one target `run --url
//! URL --model M` defines ([`UrlTarget`]: its name, its checks in the flags' terms).
//!
//! Owns: target defaults and per-target validation (names, URLs, API flavour vs transports,
//! none of the known credential headers in files), which header names count as credentials
//! ([`is_credential_header`]: their values are secrets, withheld from the manifest by
//! [`without_secrets`]), and the warning for a key sent over plain http to a host that is
//! not loopback. Pure: no I/O; API keys are referred to by variable name only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::check::PlanError;
use crate::plan::Target;
use crate::scenario::TargetSpec;
use crate::vocab::{ApiFlavour, TransportKind};

/// Names of the built-in targets (embedded simulator profiles).
pub const BUILTIN_TARGETS: [&str; 3] = ["sim-gpu", "sim-wafer", "sim-cpu"];

/// Simulator profiles a target's `sim_profile` may name.
pub const SIM_PROFILES: [&str; 4] = ["gpu", "wafer", "cpu", "fast"];

/// Default per-request deadline.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// Default stall limit.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether an `api_key_env` value looks like a key pasted in place of a variable name: one
/// of its `_`/`-`-separated parts is a long run mixing letters and digits, as key material
/// is (variable names are made of words: `TOGETHER_API_KEY_PROD_V2`, `hf_token`).
pub fn looks_like_a_key(s: &str) -> bool {
    s.split(['_', '-']).any(|part| {
        part.len() >= 16
            && part.chars().all(|c| c.is_ascii_alphanumeric())
            && part.chars().any(|c| c.is_ascii_alphabetic())
            && part.chars().filter(|c| c.is_ascii_digit()).count() >= 3
    })
}

/// Header names that carry credentials; they must come from `api_key_env`, never a file.
const SECRET_HEADERS: [&str; 5] = [
    "authorization",
    "x-api-key",
    "api-key",
    "proxy-authorization",
    "cookie",
];

/// Parts of a header name that make it a credential (`x-goog-api-key`, `x-auth-token`,
/// `openai-api-key`, `x-amz-signature`, …): its value is a secret, never written to results.
const CREDENTIAL_PARTS: [&str; 8] = [
    "key",
    "token",
    "secret",
    "auth",
    "password",
    "cookie",
    "signature",
    "credential",
];

/// What a withheld header value shows in the manifest.
pub const WITHHELD: &str = "<redacted>";

/// Whether header `name` carries a credential (its name contains `key`, `token`, `secret`,
/// `auth`, `password`, `cookie`, `signature` or `credential`, in any case).
pub fn is_credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    CREDENTIAL_PARTS.iter().any(|p| n.contains(p))
}

/// `plan` as it may be written: every credential-like header value replaced by
/// `<redacted>` (the manifest and the plan hash see this form, so shards still merge).
pub fn without_secrets(plan: &super::Plan) -> super::Plan {
    let mut p = plan.clone();
    for c in &mut p.cells {
        for (k, v) in &mut c.target.headers {
            if is_credential_header(k) {
                *v = WITHHELD.to_string();
            }
        }
    }
    p
}

/// The warning for a target that would send a credential (its `api_key_env` key or a
/// credential-like header) over plain `http://` to a host that is not loopback.
pub fn plain_http_warning(t: &Target) -> Option<String> {
    let url = t.base_url.as_deref()?;
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let sends_credential =
        t.api_key_env.is_some() || t.headers.keys().any(|h| is_credential_header(h));
    (sends_credential && !loopback).then(|| {
        format!(
            "target {}: its API key or credential header goes over plain http to {host}, readable by anyone on the path; use https:// unless the network is trusted",
            t.name
        )
    })
}

/// The transports an API flavour can use.
pub fn transports_for(api: ApiFlavour) -> Vec<TransportKind> {
    TransportKind::ALL
        .into_iter()
        .filter(|&k| api.speaks(k))
        .collect()
}

/// A built-in target by name.
pub fn builtin(name: &str) -> Option<Target> {
    let (profile, hardware) = match name {
        "sim-gpu" => ("gpu", "GPU (simulated)"),
        "sim-wafer" => ("wafer", "Wafer-scale (simulated)"),
        "sim-cpu" => ("cpu", "CPU (simulated)"),
        _ => return None,
    };
    Some(sim_target(name, profile, hardware))
}

fn sim_target(name: &str, profile: &str, hardware: &str) -> Target {
    Target {
        name: name.to_string(),
        base_url: None,
        sim_profile: Some(profile.to_string()),
        api: ApiFlavour::Responses,
        model: format!("sim-{profile}"),
        api_key_env: None,
        hardware: hardware.to_string(),
        headers: BTreeMap::new(),
        store: false,
        ws_warmup: true,
        request_timing: true,
        request_timeout: DEFAULT_REQUEST_TIMEOUT,
        stall_timeout: DEFAULT_STALL_TIMEOUT,
        transports: TransportKind::ALL.to_vec(),
        net: Default::default(),
        ignore_eos: false,
        sim_profile_file: None,
    }
}

/// A Responses-API target at a simulator that is already running at `base_url` (so not
/// the embedded one a run starts): no WebSocket warm-up, no server timing, a 120 s request
/// and 30 s stall limit, every transport. `calibrate` and the ingest benchmark measure
/// spark-bench's own cost against such a simulator.
pub fn running_sim(name: &str, model: &str, base_url: &str) -> Target {
    Target {
        name: name.to_string(),
        base_url: Some(base_url.to_string()),
        sim_profile: None,
        api: ApiFlavour::Responses,
        model: model.to_string(),
        api_key_env: None,
        hardware: "simulated".into(),
        headers: Default::default(),
        store: false,
        ws_warmup: false,
        request_timing: false,
        request_timeout: Duration::from_secs(120),
        stall_timeout: Duration::from_secs(30),
        transports: TransportKind::ALL.to_vec(),
        net: Default::default(),
        ignore_eos: false,
        sim_profile_file: None,
    }
}

/// One target given on the command line (`run --url URL --model M [--api …]
/// [--api-key-env VAR]`), in place of a `[targets.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlTarget {
    /// `--url`: the base URL, `…/v1`, as typed (URL credentials are stripped where it
    /// enters the plan, and withheld from everything written).
    pub url: String,
    /// `--model`.
    pub model: String,
    /// `--api` (default chat completions).
    pub api: ApiFlavour,
    /// `--api-key-env`: the name of the variable holding the key, never the key.
    pub api_key_env: Option<String>,
}

/// Where a [`UrlTarget`]'s settings come from, in messages.
pub const URL_ORIGIN: &str = "--url";

impl UrlTarget {
    /// The target's name: `url-` and the URL's host and port with every character other
    /// than `[A-Za-z0-9_]` made one `-` (`http://127.0.0.1:8080/v1` → `url-127-0-0-1-8080`),
    /// so it is a bare TOML key and a file name alike.
    pub fn name(&self) -> String {
        let (url, _) = crate::vocab::redact::strip_userinfo(self.url.trim());
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let mut label = String::new();
        for c in authority.chars() {
            let c = if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            };
            if !(c == '-' && label.ends_with('-')) {
                label.push(c);
            }
        }
        let mut label = label.trim_matches('-');
        // `url-` and the label within the name bound (a 253-character host would not fit).
        label = &label[..label.len().min(MAX_NAME_BYTES - 4)];
        if label.is_empty() {
            "url".to_string()
        } else {
            format!("url-{label}")
        }
    }

    /// Checks the flags, with messages in their terms (never echoing what may be a key).
    pub fn check(&self) -> Result<(), PlanError> {
        let url = self.url.trim();
        let (shown, _) = crate::vocab::redact::strip_userinfo(url);
        if !(url.starts_with("http://") || url.starts_with("https://")) || self.name() == "url" {
            return Err(PlanError::new(format!(
                "--url {shown:?} is not an http:// or https:// base URL; give the server's API root, e.g. --url http://127.0.0.1:8000/v1"
            )));
        }
        if self.model.trim().is_empty() {
            return Err(PlanError::new(
                "--model is empty; give the model name the server serves (GET <url>/models lists them)",
            ));
        }
        if let Some(env) = &self.api_key_env {
            let not_a_name =
                env.is_empty() || !env.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if not_a_name || looks_like_a_key(env) {
                return Err(PlanError::new(format!(
                    "--api-key-env takes the name of an environment variable that holds the key ({} characters given, not shown), never the key itself: export OPENAI_API_KEY=… and pass --api-key-env OPENAI_API_KEY",
                    env.chars().count()
                )));
            }
        }
        Ok(())
    }

    /// The `[targets.NAME]` table these flags stand for.
    pub fn spec(&self) -> TargetSpec {
        TargetSpec {
            base_url: Some(self.url.trim().to_string()),
            model: Some(self.model.trim().to_string()),
            api: Some(self.api),
            api_key_env: self.api_key_env.clone(),
            ..Default::default()
        }
    }
}

/// Whether a `--target` value (or a `[matrix] targets` entry) is a URL typed where a
/// target's name belongs.
pub fn looks_like_url(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    n.contains("://") || n.starts_with("localhost:") || n.contains("/v1")
}

/// `[targets.NAME]` as TOML must write it: a bare key when `name` is one, else quoted.
pub fn table_header(name: &str) -> String {
    if !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        format!("[targets.{name}]")
    } else {
        format!("[targets.{name:?}]")
    }
}

/// The longest target name, in bytes: it is a directory name under `histograms/` (file
/// systems allow 255) and a cell label in every table.
pub const MAX_NAME_BYTES: usize = 64;

/// True for names usable as a directory name: `[A-Za-z0-9._-]+`, not starting with `.`, at
/// most [`MAX_NAME_BYTES`].
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Resolves target `name`: the built-in (if any), then each `(origin, spec)` layered on in
/// order (scenario first, `--targets FILE` last). `origin` names the file for messages.
pub fn resolve(name: &str, layers: &[(&str, &TargetSpec)]) -> Result<Target, PlanError> {
    if !is_valid_name(name) {
        return Err(PlanError::new(format!(
            "target name {name:?} is not usable: use letters, digits, '.', '_' and '-', at most {MAX_NAME_BYTES} characters, not starting with '.' (it becomes a directory under histograms/)"
        )));
    }
    let origin = layers.last().map_or("built-in targets", |(o, _)| *o);
    let mut t = base_target(name, layers, origin)?;
    let mut explicit = Explicit::default();
    for (layer_origin, spec) in layers {
        apply_layer(&mut t, &mut explicit, layer_origin, spec);
    }
    let Explicit {
        transports: explicit_transports,
        ws_warmup: explicit_ws_warmup,
        timing: explicit_timing,
    } = explicit;
    let is_chat = t.api == ApiFlavour::ChatCompletions;
    if t.ignore_eos && !is_chat {
        return Err(PlanError::new(format!(
            "[targets.{name}] in {origin}: `ignore_eos = true` needs api = \"chat-completions\" (the Responses API has no such parameter); set the api or remove ignore_eos"
        )));
    }
    // Responses-only features default off for chat completions.
    t.ws_warmup = explicit_ws_warmup.unwrap_or(!is_chat);
    t.request_timing = explicit_timing.unwrap_or(!is_chat);
    let supported = transports_for(t.api);
    t.transports = match explicit_transports {
        Some(list) => {
            if let Some(bad) = list.iter().find(|k| !supported.contains(k)) {
                return Err(PlanError::new(format!(
                    "[targets.{name}] lists transport `{bad}`, which the chat-completions API cannot use (the WebSocket mode is Responses-only); remove it or set `api = \"responses\"`"
                )));
            }
            dedup(list)
        }
        None => supported,
    };
    validate(&t, origin)?;
    Ok(t)
}

/// The target a name starts from: the built-in one, or for a new name a real endpoint
/// (`base_url`) or an embedded simulator (`sim_profile`) from the layers.
fn base_target(
    name: &str,
    layers: &[(&str, &TargetSpec)],
    origin: &str,
) -> Result<Target, PlanError> {
    Ok(match builtin(name) {
        Some(t) => t,
        None => {
            // A new target: it needs somewhere to go.
            let base_url = layers.iter().rev().find_map(|(_, s)| s.base_url.clone());
            let profile = layers.iter().rev().find_map(|(_, s)| {
                s.sim_profile
                    .clone()
                    .or_else(|| s.sim_profile_file.as_ref().map(|_| "gpu".to_string()))
            });
            match (base_url, profile) {
                (None, None) => {
                    return Err(PlanError::new(format!(
                        "[targets.{name}] in {origin} has neither `base_url` nor `sim_profile`; add `base_url = \"https://host/v1\"` for a real endpoint, or `sim_profile = \"gpu\"` (or `sim_profile_file = \"profiles/cap8.toml\"`) for the embedded simulator"
                    )))
                }
                (Some(_), _) => Target {
                    hardware: "unspecified".to_string(),
                    model: String::new(),
                    sim_profile: None,
                    ..sim_target(name, "gpu", "")
                },
                (None, Some(p)) => sim_target(name, &p, &format!("{} (simulated)", capitalise(&p))),
            }
        }
    })
}

/// What the layers set explicitly, whose defaults depend on the final `api`.
#[derive(Default)]
struct Explicit {
    transports: Option<Vec<TransportKind>>,
    ws_warmup: Option<bool>,
    timing: Option<bool>,
}

/// Layers one `[targets.NAME]` table from the file `layer_origin` onto `t`.
fn apply_layer(t: &mut Target, explicit: &mut Explicit, layer_origin: &str, s: &TargetSpec) {
    if let Some(v) = &s.base_url {
        // URL credentials are never sent (keys go in `api_key_env`) and must not reach
        // the manifest: dropped here, where the URL enters the plan.
        // Kept aside (never serialized) for the redaction set.
        let (url, had_credentials) = crate::vocab::redact::strip_userinfo(v);
        t.base_url = Some(url.trim_end_matches('/').to_string());
        t.net.url_userinfo = had_credentials
            .then(|| crate::vocab::redact::userinfos(v).into_iter().next())
            .flatten()
            .map(crate::vocab::redact::Withheld);
        t.sim_profile = None;
        t.sim_profile_file = None;
    }
    if let Some(v) = &s.sim_profile {
        t.sim_profile = Some(v.clone());
        t.base_url = None;
    }
    if let Some(v) = &s.sim_profile_file {
        // The file's `base` (or `sim_profile`, or `gpu`) is the profile it layers on.
        t.sim_profile_file = Some(relative_to(layer_origin, v));
        t.sim_profile.get_or_insert_with(|| "gpu".to_string());
        t.base_url = None;
    }
    if let Some(v) = s.api {
        t.api = v;
    }
    if let Some(v) = &s.model {
        t.model = v.clone();
    }
    if let Some(v) = &s.api_key_env {
        t.api_key_env = Some(v.clone());
    }
    if let Some(v) = &s.hardware {
        t.hardware = v.clone();
    }
    if let Some(v) = &s.headers {
        t.headers
            .extend(v.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if let Some(v) = s.store {
        t.store = v;
    }
    if let Some(v) = s.ws_warmup {
        explicit.ws_warmup = Some(v);
    }
    if let Some(v) = s.request_timing {
        explicit.timing = Some(v);
    }
    if let Some(v) = s.request_timeout {
        t.request_timeout = v.0;
    }
    if let Some(v) = s.stall_timeout {
        t.stall_timeout = v.0;
    }
    if let Some(v) = &s.transports {
        explicit.transports = Some(v.clone());
    }
    // Paths are relative to the file that named them, not to the working directory.
    let near = |p: &String| relative_to(layer_origin, p);
    if let Some(v) = &s.ca_file {
        t.net.ca_file = Some(near(v));
    }
    if let Some(v) = &s.client_cert {
        t.net.client_cert = Some(near(v));
    }
    if let Some(v) = &s.client_key {
        t.net.client_key = Some(near(v));
    }
    if let Some(v) = &s.proxy {
        t.net.proxy = Some(v.trim().to_string());
    }
    if let Some(v) = s.ignore_eos {
        t.ignore_eos = v;
    }
}

/// `path` as written in the file `origin`: absolute paths stay, relative ones are taken
/// from `origin`'s folder.
fn relative_to(origin: &str, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    Path::new(origin)
        .parent()
        .map_or_else(|| p.to_path_buf(), |dir| dir.join(p))
}

fn validate_net(t: &Target, origin: &str) -> Result<(), PlanError> {
    let name = &t.name;
    let net = &t.net;
    if t.base_url.is_none()
        && (net.ca_file.is_some()
            || net.client_cert.is_some()
            || net.client_key.is_some()
            || net.proxy.is_some())
    {
        return Err(PlanError::new(format!(
            "[targets.{name}] in {origin} sets ca_file, client_cert, client_key or proxy, which apply to real endpoints only; the embedded simulator is reached directly with its own certificate. Set `base_url` or remove them"
        )));
    }
    match (&net.client_cert, &net.client_key) {
        (Some(_), None) => {
            return Err(PlanError::new(format!(
                "[targets.{name}] in {origin} sets `client_cert` without `client_key`; mutual TLS needs both (PEM files)"
            )))
        }
        (None, Some(_)) => {
            return Err(PlanError::new(format!(
                "[targets.{name}] in {origin} sets `client_key` without `client_cert`; mutual TLS needs both (PEM files)"
            )))
        }
        _ => {}
    }
    if let Some(p) = &net.proxy {
        crate::vocab::Proxy::from_target_setting(p)
            .map_err(|why| PlanError::new(format!("[targets.{name}] proxy in {origin}: {why}")))?;
    }
    Ok(())
}

fn validate(t: &Target, origin: &str) -> Result<(), PlanError> {
    let name = &t.name;
    validate_net(t, origin)?;
    if let Some(url) = &t.base_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(PlanError::new(format!(
                "[targets.{name}] base_url {url:?} in {origin} must start with http:// or https://, e.g. \"https://api.openai.com/v1\""
            )));
        }
        if t.model.trim().is_empty() {
            return Err(PlanError::new(format!(
                "[targets.{name}] in {origin} has no `model`; add e.g. `model = \"gpt-4.1-mini\"`"
            )));
        }
    }
    if let Some(p) = &t.sim_profile {
        if !SIM_PROFILES.contains(&p.as_str()) {
            return Err(PlanError::new(format!(
                "[targets.{name}] sim_profile {p:?} is not a simulator profile; use one of: {}",
                SIM_PROFILES.join(", ")
            )));
        }
    }
    if t.store && t.api == ApiFlavour::ChatCompletions {
        return Err(PlanError::new(format!(
            "[targets.{name}] sets `store = true`, which only the Responses API supports; remove it or set `api = \"responses\"`"
        )));
    }
    if let Some(h) = t
        .headers
        .keys()
        .find(|h| SECRET_HEADERS.contains(&h.to_ascii_lowercase().as_str()))
    {
        return Err(PlanError::new(format!(
            "[targets.{name}] sets header `{h}` in {origin}: credentials must not be written in files (they would end up in results). Set `api_key_env = \"VAR\"` and export VAR instead"
        )));
    }
    if let Some(env) = &t.api_key_env {
        // Never echo the value: if it is a pasted key, the message would carry it into logs.
        if env.is_empty() || !env.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(PlanError::new(format!(
                "[targets.{name}] api_key_env (in {origin}) is not an environment variable name ({} characters, not shown); write the variable's name (e.g. \"OPENAI_API_KEY\"), never the key itself",
                env.chars().count()
            )));
        }
        if looks_like_a_key(env) {
            return Err(PlanError::new(format!(
                "[targets.{name}] api_key_env (in {origin}) looks like an API key, not a variable name ({} characters, not shown); export the key as a variable and write its name, e.g. api_key_env = \"GROQ_API_KEY\"",
                env.chars().count()
            )));
        }
    }
    if t.request_timeout < Duration::from_millis(100)
        || t.request_timeout > Duration::from_secs(3600)
    {
        return Err(PlanError::new(format!(
            "[targets.{name}] request_timeout must be between 100ms and 1h, e.g. \"300s\""
        )));
    }
    if t.stall_timeout.is_zero() || t.stall_timeout > t.request_timeout {
        return Err(PlanError::new(format!(
            "[targets.{name}] stall_timeout must be above 0 and at most request_timeout ({}), e.g. \"30s\"",
            crate::units::fmt_duration_spec(t.request_timeout)
        )));
    }
    Ok(())
}

/// "gpu" → "GPU" (short names are acronyms), "wafer" → "Wafer".
fn capitalise(s: &str) -> String {
    if s.len() <= 3 {
        return s.to_ascii_uppercase();
    }
    let mut c = s.chars();
    c.next().map_or(String::new(), |f| {
        f.to_ascii_uppercase().to_string() + c.as_str()
    })
}

pub(crate) fn dedup<T: PartialEq + Copy>(list: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(list.len());
    for x in list {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Dur;

    fn url(u: &str) -> UrlTarget {
        UrlTarget {
            url: u.into(),
            model: "m".into(),
            api: ApiFlavour::ChatCompletions,
            api_key_env: None,
        }
    }

    #[test]
    fn url_targets_are_named_after_host_and_port_and_checked_in_flag_terms() {
        for (u, name) in [
            ("http://127.0.0.1:8080/v1", "url-127-0-0-1-8080"),
            ("https://bob:pw@API.Example.com/v1/", "url-api-example-com"),
            ("http://[::1]:9000/v1", "url-1-9000"),
            ("http://localhost:8000", "url-localhost-8000"),
        ] {
            let t = url(u);
            assert_eq!(t.name(), name, "{u}");
            assert!(is_valid_name(name) && !table_header(name).contains('"'));
            t.check().unwrap();
            let r = resolve(&t.name(), &[(URL_ORIGIN, &t.spec())]).unwrap();
            assert!(!r.base_url.unwrap().contains("pw"));
            assert_eq!(r.transports, transports_for(ApiFlavour::ChatCompletions));
        }
        let e = url("127.0.0.1:8080/v1").check().unwrap_err().to_string();
        assert!(
            e.contains("--url") && e.contains("http://127.0.0.1:8000/v1"),
            "{e}"
        );
        let e = url("http://u:hunter2@/v1").check().unwrap_err().to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let e = UrlTarget {
            model: " ".into(),
            ..url("http://h/v1")
        };
        assert!(e.check().unwrap_err().to_string().contains("--model"));
        let pasted = "gsk_4fQx9ZkT2mVbL8rNw3YpHd7sJc1E";
        let e = UrlTarget {
            api_key_env: Some(pasted.into()),
            ..url("http://h/v1")
        };
        let e = e.check().unwrap_err().to_string();
        assert!(e.contains("--api-key-env") && !e.contains(pasted), "{e}");
        assert_eq!(table_header("a.b"), "[targets.\"a.b\"]");
        assert!(looks_like_url("http://127.0.0.1:35785/v1") && !looks_like_url("sim-gpu"));
    }

    #[test]
    fn builtins_are_simulator_targets_with_all_transports() {
        for name in BUILTIN_TARGETS {
            let t = resolve(name, &[]).unwrap();
            assert!(t.base_url.is_none());
            assert_eq!(t.transports, TransportKind::ALL.to_vec());
            assert!(t.ws_warmup && t.request_timing);
            assert_eq!(t.request_timeout, Duration::from_secs(300));
            assert_eq!(t.stall_timeout, Duration::from_secs(30));
        }
        assert_eq!(
            builtin("sim-wafer").unwrap().hardware,
            "Wafer-scale (simulated)"
        );
        assert_eq!(builtin("sim-gpu").unwrap().model, "sim-gpu");
        assert_eq!(
            builtin("sim-cpu").unwrap().sim_profile.as_deref(),
            Some("cpu")
        );
    }

    #[test]
    fn layers_override_field_by_field() {
        let a = TargetSpec {
            request_timeout: Some(Dur(Duration::from_secs(60))),
            ..Default::default()
        };
        let b = TargetSpec {
            hardware: Some("H100".into()),
            ..Default::default()
        };
        let t = resolve("sim-gpu", &[("a.toml", &a), ("b.toml", &b)]).unwrap();
        assert_eq!(t.request_timeout, Duration::from_secs(60));
        assert_eq!(t.hardware, "H100");
        assert_eq!(t.sim_profile.as_deref(), Some("gpu"));
    }

    #[test]
    fn chat_completions_targets_cannot_do_ws() {
        let spec = TargetSpec {
            base_url: Some("https://api.groq.com/openai/v1/".into()),
            api: Some(ApiFlavour::ChatCompletions),
            model: Some("llama-3.3-70b-versatile".into()),
            api_key_env: Some("GROQ_API_KEY".into()),
            ..Default::default()
        };
        let t = resolve("groq", &[("t.toml", &spec)]).unwrap();
        assert_eq!(
            t.base_url.as_deref(),
            Some("https://api.groq.com/openai/v1")
        );
        assert_eq!(t.transports.len(), 3);
        assert!(!t.ws_warmup && !t.request_timing);
        let bad = TargetSpec {
            transports: Some(vec![TransportKind::Ws]),
            ..spec.clone()
        };
        let e = resolve("groq", &[("t.toml", &bad)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("transport `ws`") && e.contains("api = \"responses\""),
            "{e}"
        );
    }

    #[test]
    fn network_keys_resolve_paths_against_the_file_that_named_them() {
        let scenario = TargetSpec {
            base_url: Some("https://vllm.corp.internal/v1".into()),
            model: Some("m".into()),
            ca_file: Some("certs/corp-ca.pem".into()),
            client_cert: Some("/etc/me.pem".into()),
            client_key: Some("/etc/me.key".into()),
            proxy: Some("none".into()),
            ..Default::default()
        };
        let file = TargetSpec {
            client_key: Some("keys/me.key".into()),
            proxy: Some(" http://proxy.corp:3128 ".into()),
            ..Default::default()
        };
        let t = resolve(
            "vllm",
            &[
                ("scenarios/corp.toml", &scenario),
                ("/home/u/targets.toml", &file),
            ],
        )
        .unwrap();
        assert_eq!(
            t.net.ca_file.as_deref(),
            Some(Path::new("scenarios/certs/corp-ca.pem"))
        );
        assert_eq!(t.net.client_cert.as_deref(), Some(Path::new("/etc/me.pem")));
        assert_eq!(
            t.net.client_key.as_deref(),
            Some(Path::new("/home/u/keys/me.key"))
        );
        assert_eq!(t.net.proxy.as_deref(), Some("http://proxy.corp:3128"));
        // A file next to the working directory keeps the relative path.
        let t = resolve("vllm", &[("corp.toml", &scenario)]).unwrap();
        assert_eq!(
            t.net.ca_file.as_deref(),
            Some(Path::new("certs/corp-ca.pem"))
        );
    }

    #[test]
    fn network_keys_are_checked() {
        let base = TargetSpec {
            base_url: Some("https://vllm.corp.internal/v1".into()),
            model: Some("m".into()),
            ..Default::default()
        };
        let half = TargetSpec {
            client_cert: Some("me.pem".into()),
            ..base.clone()
        };
        let e = resolve("v", &[("s.toml", &half)]).unwrap_err().to_string();
        assert!(e.contains("client_key") && e.contains("[targets.v]"), "{e}");
        let creds = TargetSpec {
            proxy: Some("http://bob:hunter2@proxy:3128".into()),
            ..base.clone()
        };
        let e = resolve("v", &[("s.toml", &creds)]).unwrap_err().to_string();
        assert!(
            e.contains("proxy") && e.contains("s.toml") && !e.contains("hunter2"),
            "{e}"
        );
        let socks = TargetSpec {
            proxy: Some("socks5://proxy:1080".into()),
            ..base.clone()
        };
        let e = resolve("v", &[("s.toml", &socks)]).unwrap_err().to_string();
        assert!(e.contains("only http://"), "{e}");
        let sim = TargetSpec {
            ca_file: Some("ca.pem".into()),
            ..Default::default()
        };
        let e = resolve("sim-gpu", &[("s.toml", &sim)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("real endpoints only"), "{e}");
    }

    #[test]
    fn credential_headers_are_withheld_and_plain_http_keys_warned_about() {
        for (name, secret) in [
            ("x-goog-api-key", true),
            ("OpenAI-Api-Key", true),
            ("X-Auth-Token", true),
            ("x-client-secret", true),
            ("Set-Cookie", true),
            ("anthropic-version", false),
            ("x-request-id", false),
        ] {
            assert_eq!(is_credential_header(name), secret, "{name}");
        }
        let mut headers = BTreeMap::new();
        headers.insert("x-goog-api-key".to_string(), "AIza-planted".to_string());
        headers.insert("anthropic-version".to_string(), "2023-06-01".to_string());
        let spec = |url: &str| TargetSpec {
            base_url: Some(url.into()),
            model: Some("m".into()),
            headers: Some(headers.clone()),
            ..Default::default()
        };
        let t = resolve(
            "x",
            &[("t.toml", &spec("http://bob:pw-1@api.corp:8000/v1"))],
        )
        .unwrap();
        assert_eq!(t.base_url.as_deref(), Some("http://api.corp:8000/v1"));
        assert_eq!(
            t.net.url_userinfo.as_ref().map(|u| u.0.as_str()),
            Some("bob:pw-1")
        );
        let json = serde_json::to_string(&t).unwrap();
        assert!(
            !json.contains("pw-1") && !format!("{t:?}").contains("pw-1"),
            "{json}"
        );
        let w = plain_http_warning(&t).expect("a credential header over plain http warns");
        assert!(w.contains("api.corp") && w.contains("plain http"), "{w}");
        for quiet in [
            "https://api.corp/v1",
            "http://127.0.0.1:8000/v1",
            "http://localhost/v1",
            "http://[::1]:9/v1",
        ] {
            let t = resolve("x", &[("t.toml", &spec(quiet))]).unwrap();
            assert_eq!(plain_http_warning(&t), None, "{quiet}");
        }
        // Without any credential there is nothing to warn about.
        let bare = TargetSpec {
            base_url: Some("http://api.corp/v1".into()),
            model: Some("m".into()),
            ..Default::default()
        };
        assert_eq!(
            plain_http_warning(&resolve("x", &[("t.toml", &bare)]).unwrap()),
            None
        );
        let keyed = TargetSpec {
            api_key_env: Some("CORP_KEY".into()),
            ..bare
        };
        assert!(plain_http_warning(&resolve("x", &[("t.toml", &keyed)]).unwrap()).is_some());
    }

    #[test]
    fn refuses_credentials_bad_urls_and_unusable_names() {
        let mut headers = BTreeMap::new();
        headers.insert("Authorization".to_string(), "Bearer sk-123".to_string());
        let spec = TargetSpec {
            base_url: Some("https://x/v1".into()),
            model: Some("m".into()),
            headers: Some(headers),
            ..Default::default()
        };
        let e = resolve("x", &[("t.toml", &spec)]).unwrap_err().to_string();
        assert!(e.contains("api_key_env") && !e.contains("sk-123"), "{e}");
        // A key pasted where the variable's name belongs is refused and never echoed.
        for pasted in [
            "sk-proj-Abc123.def",
            "gsk_4fQx9ZkT2mVbL8rNw3YpHd7sJc1E",
            "xai-0123456789abcdefABCDEF",
            "a1b2c3d4e5f6a7b8c9d0e1f2a3b4",
        ] {
            let spec = TargetSpec {
                base_url: Some("https://x/v1".into()),
                model: Some("m".into()),
                api_key_env: Some(pasted.into()),
                ..Default::default()
            };
            let e = resolve("x", &[("t.toml", &spec)]).unwrap_err().to_string();
            assert!(e.contains("api_key_env") && !e.contains(pasted), "{e}");
            let head: String = pasted.chars().take(8).collect();
            assert!(!e.contains(&head), "{e}");
        }
        for name in [
            "OPENAI_API_KEY",
            "GROQ_API_KEY",
            "MY_KEY_2",
            "xai_key",
            "hf_token",
            "sk_live_key_name",
            "together_api_key_prod_v2",
            "MyCompany_OpenAI_Key_v2",
            "CEREBRAS_API_KEY_us_east_1",
            "AZURE_OPENAI_API_KEY_2",
        ] {
            assert!(!looks_like_a_key(name), "{name}");
        }
        let spec = TargetSpec {
            base_url: Some("api.openai.com".into()),
            model: Some("m".into()),
            ..Default::default()
        };
        assert!(resolve("x", &[("t.toml", &spec)])
            .unwrap_err()
            .to_string()
            .contains("https://"));
        let e = resolve("../x", &[]).unwrap_err().to_string();
        assert!(e.contains("not usable"), "{e}");
        // A name too long for a directory is refused before anything is sent.
        let long = "t".repeat(300);
        let e = resolve(&long, &[("s", &spec)]).unwrap_err().to_string();
        assert!(e.contains("at most 64 characters"), "{e}");
        assert!(is_valid_name(&"t".repeat(MAX_NAME_BYTES)));
        let u = url(&format!("http://{}.example:8080/v1", "h".repeat(250)));
        assert!(is_valid_name(&u.name()), "{}", u.name());
        let e = resolve("mystery", &[("s.toml", &TargetSpec::default())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("base_url") && e.contains("sim_profile"), "{e}");
        let spec = TargetSpec {
            sim_profile: Some("tpu".into()),
            ..Default::default()
        };
        assert!(resolve("x", &[("s", &spec)])
            .unwrap_err()
            .to_string()
            .contains("gpu, wafer, cpu"));
        let spec = TargetSpec {
            sim_profile: Some("gpu".into()),
            ..Default::default()
        };
        assert_eq!(
            resolve("my-sim", &[("s", &spec)]).unwrap().hardware,
            "GPU (simulated)"
        );
    }
}
