//! Scenario + CLI overrides → a validated [`Plan`], in one fallible, pure function.
//!
//! Owns: precedence (CLI over scenario over defaults: the `[load]` knobs are merged here,
//! once, and turned into a `Load` by `plan::load`), the target × transport matrix (skipping
//! cells a target cannot do), session scripts (warm-up first, then measured; agent loops
//! expanded with a seeded tool order), the scenario hash, and [`PlanInput`] (a plan's inputs,
//! read once, for sweeps and repeats to edit). No I/O: the caller reads files and passes the
//! bytes. Does not own: the error type and single-value checks (`plan::check`).

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::check::{check_max_tokens, check_session_size, check_turn, PlanError, Src};
use super::schedule::{default_schedule, shared_servers};
use super::session_source::ScriptFn;
use super::targets::{self, dedup, BUILTIN_TARGETS};
use super::workload::Workload;
use super::{salt, Cell, Load, Plan, Sessions, Target, ToolCallPlan, TurnPlan};
use super::{STREAM_AGENT, STREAM_ARRIVALS, STREAM_CONTEXT};
use crate::link::Link;
use crate::rng::Rng;
use crate::scenario::{
    suggest, LoadKnobs, LoadedScenario, Scenario, TargetSpec, TargetsFile, TurnSpec,
};
use crate::vocab::TransportKind;
use crate::vocab::{CacheMode, Schedule};

/// Command-line overrides (`spark-bench run` flags). Empty lists / `None` mean "use the
/// scenario".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--target NAME` (repeatable).
    pub targets: Vec<String>,
    /// `--targets FILE`, already read and parsed (see `scenario::load_targets`).
    pub targets_file: Option<TargetsFile>,
    /// `--url URL --model M …`: one target from the command line, in place of the
    /// scenario's matrix targets (beside any `--target`).
    pub url: Option<targets::UrlTarget>,
    /// `--transport KIND` (repeatable).
    pub transports: Vec<TransportKind>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--link`.
    pub link: Option<Link>,
    /// The load flags (`--sessions`, `--rate`, …), merged over the scenario's `[load]`.
    pub load: LoadKnobs,
}

/// A plan's inputs, read once: the scenario file as loaded and the command line's overrides.
/// [`PlanInput::build`] makes the plan; a sweep point or a repeat edits a clone's
/// `overrides` (a load knob, the seed) and builds again, without reading any file again.
#[derive(Debug, Clone)]
pub struct PlanInput {
    /// The scenario file: parsed, its path and its bytes.
    pub scenario: Arc<LoadedScenario>,
    /// The command line's overrides.
    pub overrides: Overrides,
}

impl PlanInput {
    /// The plan of these inputs (see [`build`]).
    pub fn build(&self) -> Result<Plan, PlanError> {
        let l = &self.scenario;
        build(&l.scenario, &l.path, l.source.as_bytes(), &self.overrides)
    }
}

/// Default seed when neither the scenario nor `--seed` gives one.
pub const DEFAULT_SEED: u64 = 1;
/// Default `max_output_tokens`.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 1024;
/// Default tool output size, bytes.
pub const DEFAULT_TOOL_OUTPUT_BYTES: u32 = 1024;
/// Default link for simulator targets.
pub const DEFAULT_LINK: &str = "rtt=40ms";

/// Builds the plan. `source_path` and `source_bytes` are the scenario file's path and exact
/// bytes (hashed into `scenario_hash`, kept for the manifest).
pub fn build(
    scenario: &Scenario,
    source_path: &str,
    source_bytes: &[u8],
    overrides: &Overrides,
) -> Result<Plan, PlanError> {
    let s = scenario;
    let src = Src {
        path: source_path,
        text: String::from_utf8_lossy(source_bytes),
    };
    let mut warnings = Vec::new();
    if s.name.trim().is_empty() {
        return Err(PlanError::new(format!(
            "`name` at {} is empty; give the scenario a short name, e.g. name = \"snake\"",
            src.at(None, 1, "name")
        )));
    }
    let seed = overrides.seed.or(s.seed).unwrap_or(DEFAULT_SEED);

    // The one merge of the load knobs: the command line over the scenario's `[load]`.
    let knobs = overrides.load.or(&s.load);
    let mut load = Load::resolve(&knobs, &overrides.load, &src, &mut warnings)?;
    let default_max = s.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
    check_max_tokens(
        default_max,
        &format!(
            "`max_output_tokens` at {}",
            src.at(None, 1, "max_output_tokens")
        ),
    )?;
    let workload = resolve_workload(s, seed, &src)?;

    let (targets, target_from_cli) = resolve_targets(s, overrides, &src)?;
    warnings.extend(
        targets
            .iter()
            .filter_map(super::targets::plain_http_warning),
    );
    let transports = resolve_transports(s, overrides, &src)?;
    let mut cells = resolve_cells(
        &targets,
        &transports,
        target_from_cli && !overrides.transports.is_empty(),
        &mut warnings,
    )?;

    if let Some(n) = workload.as_ref().and_then(Workload::natural_sessions) {
        // A dataset replays each sampled conversation once unless the sessions are given.
        if knobs.sessions.is_none() && !load.sessions_from_duration {
            load.sessions = n;
        }
        warnings.extend(workload.iter().flat_map(|w| w.warnings().iter().cloned()));
    }
    if let Some(w) = &workload {
        w.check_size(load.sessions + load.warmup_sessions)?;
    }
    resolve_schedule_and_cache(s, overrides, &knobs, &mut load, &mut cells, &mut warnings)?;
    let link = resolve_link(s, overrides, &targets, &mut warnings)?;
    let system_prompt = system_prompt(s, seed, &src)?;
    let mut sessions = plan_sessions(s, workload.as_ref(), &mut load, seed, default_max)?;
    if let Some(w) = &workload {
        w.replay_trace(&mut load, knobs.concurrency.is_some(), &mut sessions)?;
    }

    check_salt_limits(&cells, &sessions)?;
    let workload_info = workload.as_ref().map(|w| w.info(&sessions));

    Ok(Plan {
        scenario_name: s.name.clone(),
        scenario_path: source_path.to_string(),
        scenario_hash: format!("sha256:{}", hex(&Sha256::digest(source_bytes))),
        seed,
        system_prompt,
        cells,
        sessions,
        load,
        link,
        link_for_real_targets: overrides.link.is_some(),
        description: s.description.clone(),
        gate: s.gate.clone(),
        warnings,
        scenario_source: String::from_utf8_lossy(source_bytes).into_owned(),
        workload: workload_info,
        slo: super::Slo::resolve(&s.slo, |key| src.at(Some("[slo]"), 1, key))?,
        shard: None,
    })
}

/// The `[workload]` (exclusive with `[[turns]]`), else the hand-written turns, checked: a
/// scenario needs one or the other.
fn resolve_workload(s: &Scenario, seed: u64, src: &Src) -> Result<Option<Workload>, PlanError> {
    let source_path = src.path;
    let workload = match &s.workload {
        Some(_) if !s.turns.is_empty() => {
            return Err(PlanError::new(format!(
                "{source_path} has both [[turns]] and [workload]; keep one: hand-written turns, or a synthetic/dataset workload"
            )));
        }
        Some(w) => Some(Workload::new(w, seed, &|k| {
            src.at(Some("[workload]"), 1, k)
        })?),
        None => None,
    };
    if s.turns.is_empty() && workload.is_none() {
        return Err(PlanError::new(format!(
            "{source_path} has no turns; add at least one (or a [workload], see scenarios/synthetic.toml):\n\n[[turns]]\nprompt = \"Write a snake game in Python.\"\n"
        )));
    }
    for (i, t) in s.turns.iter().enumerate() {
        check_turn(t, i + 1, src)?;
    }
    for (k, session) in s.sessions.iter().enumerate() {
        if session.turns.is_empty() || workload.is_some() || s.turns.is_empty() {
            return Err(PlanError::new(format!(
                "{source_path}: [[sessions]] entry {} needs [[turns]] of its own (and [[turns]] for session 1; not with [workload])",
                k + 1
            )));
        }
        for (i, t) in session.turns.iter().enumerate() {
            check_turn(t, i + 1, src)?;
        }
        check_session_size(&session.turns, source_path)?;
    }
    check_session_size(&s.turns, source_path)?;
    Ok(workload)
}

/// The transports: `--transport`, else `[matrix] transports`, else all four.
fn resolve_transports(
    s: &Scenario,
    o: &Overrides,
    src: &Src,
) -> Result<Vec<TransportKind>, PlanError> {
    let transports: Vec<TransportKind> = if !o.transports.is_empty() {
        dedup(o.transports.clone())
    } else if let Some(u) = &o.url {
        // A server named on the command line: what its API can use, not the scenario's.
        targets::transports_for(u.api)
    } else {
        dedup(
            s.matrix
                .transports
                .clone()
                .unwrap_or_else(|| TransportKind::ALL.to_vec()),
        )
    };
    if transports.is_empty() {
        return Err(PlanError::new(format!(
            "[matrix] transports at {} is empty; list at least one of: http, http-pooled, http2, ws",
            src.at(Some("[matrix]"), 1, "transports")
        )));
    }
    Ok(transports)
}

/// The target × transport matrix, skipping (with a warning) the cells a target cannot do;
/// `strict` (targets and transports both from the command line) makes a skip an error.
fn resolve_cells(
    targets: &[Target],
    transports: &[TransportKind],
    strict: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Cell>, PlanError> {
    let mut cells = Vec::new();
    for t in targets {
        for k in transports {
            if t.transports.contains(k) {
                cells.push(Cell {
                    target: t.clone(),
                    transport: *k,
                    cache: CacheMode::AsIs,
                });
                continue;
            }
            let why = if !t.api.speaks(*k) {
                "it speaks chat-completions, which has no WebSocket mode".to_string()
            } else {
                format!("its `transports` are {}", names(&t.transports))
            };
            if strict {
                return Err(PlanError::new(format!(
                    "--target {} --transport {k}: {} cannot use {k} because {why}; drop `--transport {k}` or pick a Responses API target",
                    t.name, t.name
                )));
            }
            warnings.push(format!("skipping {} × {k}: {why}", t.name));
        }
    }
    if cells.is_empty() {
        return Err(PlanError::new(format!(
            "no target supports any requested transport ({}); add http, http-pooled or http2",
            names(transports)
        )));
    }
    Ok(cells)
}

/// The link (`--link`, else the scenario's `link`, else [`DEFAULT_LINK`]), with warnings on
/// what real endpoints do not get (emulation, faults).
fn resolve_link(
    s: &Scenario,
    o: &Overrides,
    targets: &[Target],
    warnings: &mut Vec<String>,
) -> Result<Link, PlanError> {
    let scenario_link = s.link.map(|l| l.0);
    let link = match (o.link, scenario_link) {
        (Some(l), _) | (None, Some(l)) => l,
        (None, None) => DEFAULT_LINK
            .parse()
            .map_err(|e| PlanError::new(format!("{e}")))?,
    };
    let has_real = targets.iter().any(|t| t.base_url.is_some());
    if has_real && o.link.is_none() && !link.is_none() {
        warnings.push(format!(
            "link {link} is emulated for simulator targets only; real endpoints are measured over the real network (pass --link to add emulation to them too)"
        ));
    }
    if has_real && s.turns.iter().any(|t| t.fault.is_some()) {
        warnings.push(
            "turn `fault`s are injected by the simulator only; real endpoints ignore them"
                .to_string(),
        );
    }
    Ok(link)
}

/// The system prompt, with `context_bytes` of seeded repository context appended.
fn system_prompt(s: &Scenario, seed: u64, src: &Src) -> Result<String, PlanError> {
    let mut system_prompt = s.system_prompt.clone();
    if let Some(n) = s.context_bytes {
        if n > 8 * 1024 * 1024 {
            return Err(PlanError::new(format!(
                "`context_bytes` at {} is {n}; keep it at most 8388608 (8 MiB)",
                src.at(None, 1, "context_bytes")
            )));
        }
        system_prompt.push_str(&context_filler(
            Rng::derive(seed, STREAM_CONTEXT),
            n as usize,
        ));
    }
    Ok(system_prompt)
}

/// Every session of a cell: the count-based warm-up sessions first, then the measured ones
/// (and, in open loop, the warm-up-by-time ones before them), as a source that builds each
/// one when it is reached. Under a `duration` in open loop the sessions generated set
/// `load.sessions`.
fn plan_sessions(
    s: &Scenario,
    workload: Option<&Workload>,
    load: &mut Load,
    seed: u64,
    default_max: u32,
) -> Result<Sessions, PlanError> {
    // Each scenario turn's text once, shared by every session that sends it; a script that
    // does not depend on the session (no agent loop, no workload) is built once and shared.
    let prompts: Vec<Arc<str>> = s.turns.iter().map(|t| t.prompt.trim_end().into()).collect();
    let script: ScriptFn = match workload {
        Some(w) => {
            let w = Arc::new(w.clone());
            Arc::new(move |i| w.turns(seed, i, default_max).into())
        }
        // One conversation per session (a recording of several): session i sends script
        // i mod n, each built once.
        None if !s.sessions.is_empty() => {
            let scripts: Vec<Arc<[TurnPlan]>> = std::iter::once(&s.turns)
                .chain(s.sessions.iter().map(|x| &x.turns))
                .enumerate()
                .map(|(k, turns)| {
                    let prompts: Vec<Arc<str>> =
                        turns.iter().map(|t| t.prompt.trim_end().into()).collect();
                    expand_turns(turns, &prompts, default_max, seed, k as u32).into()
                })
                .collect();
            Arc::new(move |i| scripts[i as usize % scripts.len()].clone())
        }
        None if s.turns.iter().all(|t| t.agent.is_none()) => {
            let fixed: Arc<[TurnPlan]> =
                expand_turns(&s.turns, &prompts, default_max, seed, 0).into();
            Arc::new(move |_| fixed.clone())
        }
        None => {
            let turns = Arc::new(s.turns.clone());
            Arc::new(move |i| expand_turns(&turns, &prompts, default_max, seed, i).into())
        }
    };
    let (sessions, measured) =
        sessions::sessions(load, Rng::derive(seed, STREAM_ARRIVALS).next_u64(), script)?;
    if load.sessions_from_duration && load.open_loop() {
        // The duration decided how many measured sessions there are.
        load.sessions = measured;
    }
    Ok(sessions)
}

/// The schedule (`--schedule`, else `[load] schedule`, else parallel for simulator-only runs
/// and interleaved otherwise) and each cell's cache mode (`--cache`, else the target's
/// `cache`, else `[load] cache`, else cold for real endpoints and as-is for the simulator),
/// with the warnings a reader needs.
fn resolve_schedule_and_cache(
    s: &Scenario,
    o: &Overrides,
    knobs: &LoadKnobs,
    load: &mut Load,
    cells: &mut [Cell],
    warnings: &mut Vec<String>,
) -> Result<(), PlanError> {
    let explicit = knobs.schedule;
    load.schedule = explicit.unwrap_or_else(|| default_schedule(cells));
    let shared = shared_servers(cells);
    if load.schedule == Schedule::Parallel {
        for sh in &shared {
            warnings.push(format!(
                "schedule parallel: {} share the server {} and run at the same time, so it sees up to {} requests in flight (the cells measure each other's load); use schedule \"interleaved\" or \"sequential\" for one load of {}",
                sh.cells.join(", "),
                sh.server,
                sh.cells.len() as u64 * u64::from(load.concurrency),
                load.concurrency
            ));
        }
    } else if explicit.is_some() && shared.is_empty() {
        warnings.push(format!(
            "schedule {}: no two cells share a server (every embedded-simulator cell has its own), so every cell runs side by side as under parallel",
            load.schedule
        ));
    }

    let file = o.targets_file.as_ref();
    for cell in cells.iter_mut() {
        let name = &cell.target.name;
        let from_target = file
            .and_then(|f| f.targets.get(name))
            .and_then(|t| t.cache)
            .or_else(|| s.targets.get(name).and_then(|t| t.cache));
        let real = cell.target.base_url.is_some();
        cell.cache = o
            .load
            .cache
            .or(from_target)
            .or(knobs.cache)
            .unwrap_or(if real {
                CacheMode::Cold
            } else {
                CacheMode::AsIs
            });
    }
    let mut seen: Vec<&str> = Vec::new();
    for cell in cells.iter() {
        let name = cell.target.name.as_str();
        if cell.target.base_url.is_some() || seen.contains(&name) {
            continue;
        }
        seen.push(name);
        match cell.cache {
            CacheMode::Cold => warnings.push(format!(
                "cache cold on {name}: the embedded simulator's answers follow the prompt, so with a salt its transports no longer get identical answers (lengths and tool calls stay scripted)"
            )),
            CacheMode::Warm => warnings.push(format!(
                "cache warm on {name}: the embedded simulator keeps no prefix cache across requests; the untimed cache-warming sessions change nothing there"
            )),
            CacheMode::AsIs => {}
        }
    }
    Ok(())
}

/// `cold` salts are distinct only while the request coordinates fit their bit fields.
fn check_salt_limits(cells: &[Cell], sessions: &Sessions) -> Result<(), PlanError> {
    if !cells.iter().any(|c| c.cache == CacheMode::Cold) {
        return Ok(());
    }
    let (max_cells, max_sessions, max_turns, max_steps) = salt::LIMITS;
    // Cache-warming sessions are numbered after the measured ones.
    let session_ids = 2 * sessions.len() as u64;
    let (mut turns, mut steps) = (0u64, 0u64);
    if session_ids <= max_sessions {
        for s in sessions.iter() {
            turns = turns.max(s.turns.len() as u64);
            let most = s.turns.iter().map(|t| u64::from(t.requests())).max();
            steps = steps.max(most.unwrap_or(0));
        }
    }
    // Cache-warming sessions are numbered after the measured ones.
    let session_ids = 2 * sessions.len() as u64;
    let problem = if cells.len() as u64 > max_cells {
        Some(format!("{} cells (at most {max_cells})", cells.len()))
    } else if session_ids > max_sessions {
        Some(format!(
            "{} sessions (at most {})",
            sessions.len(),
            max_sessions / 2
        ))
    } else if turns > max_turns {
        Some(format!("{turns} turns per session (at most {max_turns})"))
    } else if steps > max_steps {
        Some(format!(
            "{steps} requests in one turn (at most {max_steps})"
        ))
    } else {
        None
    };
    match problem {
        Some(p) => Err(PlanError::new(format!(
            "cache cold: this plan has {p}, more than the cold-cache salt can keep apart; make the run smaller or use cache = \"as-is\""
        ))),
        None => Ok(()),
    }
}

/// The target list (CLI, else matrix, else the two headline simulator targets), resolved.
/// Returns whether the names came from the command line.
fn resolve_targets(
    s: &Scenario,
    o: &Overrides,
    src: &Src,
) -> Result<(Vec<Target>, bool), PlanError> {
    let path = src.path;
    let url = match &o.url {
        Some(u) => {
            u.check()?;
            Some((u.name(), u.spec()))
        }
        None => None,
    };
    let from_cli = !o.targets.is_empty() || url.is_some();
    let names: Vec<String> = if from_cli {
        o.targets
            .iter()
            .cloned()
            .chain(url.iter().map(|(n, _)| n.clone()))
            .collect()
    } else {
        s.matrix
            .targets
            .clone()
            .unwrap_or_else(|| vec!["sim-gpu".into(), "sim-wafer".into()])
    };
    let mut unique: Vec<String> = Vec::new();
    for n in names {
        if !unique.contains(&n) {
            unique.push(n);
        }
    }
    if unique.is_empty() {
        return Err(PlanError::new(format!(
            "[matrix] targets at {} is empty; list at least one, e.g. targets = [\"sim-wafer\"]",
            src.at(Some("[matrix]"), 1, "targets")
        )));
    }
    let file = o.targets_file.as_ref();
    let mut known: Vec<&str> = BUILTIN_TARGETS.to_vec();
    known.extend(s.targets.keys().map(String::as_str));
    if let Some(f) = file {
        known.extend(f.targets.keys().map(String::as_str));
    }
    known.sort_unstable();
    known.dedup();
    let mut out = Vec::new();
    for name in &unique {
        let mut layers: Vec<(&str, &TargetSpec)> = Vec::new();
        if let Some((_, spec)) = url.as_ref().filter(|(n, _)| n == name) {
            out.push(targets::resolve(name, &[(targets::URL_ORIGIN, spec)])?);
            continue;
        }
        if let Some(spec) = s.targets.get(name) {
            layers.push((path, spec));
        }
        if let Some(spec) = file.and_then(|f| f.targets.get(name)) {
            layers.push((file.map_or("", |f| f.path.as_str()), spec));
        }
        if layers.is_empty() && !BUILTIN_TARGETS.contains(&name.as_str()) {
            return Err(unknown_target(name, &known, from_cli, src));
        }
        out.push(targets::resolve(name, &layers)?);
    }
    Ok((out, from_cli))
}

/// The error for a target name nothing defines, with a fix that works: `--url URL --model M`
/// for a URL given as `--target`, a `[targets.NAME]` table TOML can read otherwise.
fn unknown_target(name: &str, known: &[&str], from_cli: bool, src: &Src) -> PlanError {
    let shown = crate::vocab::redact::strip_userinfo(name.trim()).0;
    if from_cli && targets::looks_like_url(name) {
        return PlanError::new(format!(
            "--target takes a target's name, not a URL; to run against the server at {shown}, use --url {shown} --model M (M: a model it serves; add --api responses for the Responses API, --api-key-env VAR for a key)"
        ));
    }
    let origin = if from_cli {
        "--target".to_string()
    } else {
        format!(
            "[matrix] targets at {}",
            src.at(Some("[matrix]"), 1, "targets")
        )
    };
    let hint = suggest(name, known)
        .map(|k| format!("did you mean `{k}`? "))
        .unwrap_or_default();
    let known = known.join(", ");
    if targets::looks_like_url(name) || !targets::is_valid_name(name) {
        return PlanError::new(format!(
            "`{shown}` ({origin}) is not a target name; list names (known targets: {known}) and define a real server in a table such as [targets.my-server] with base_url = \"http://127.0.0.1:8000/v1\" and model = \"M\", or run it with --url URL --model M"
        ));
    }
    PlanError::new(format!(
        "unknown target `{name}` ({origin}); {hint}known targets: {known}. Define it in a {} table (base_url and model, see targets/*.toml) in the scenario or a --targets FILE, or run a server in one line with --url URL --model M",
        targets::table_header(name)
    ))
}

/// The session's turns: `repeat` unrolled, agent loops expanded with a seeded tool order
/// (different per session, identical across cells, so every transport replays exactly the
/// same conversations).
fn expand_turns(
    scenario_turns: &[TurnSpec],
    prompts: &[Arc<str>],
    default_max: u32,
    seed: u64,
    session: u32,
) -> Vec<TurnPlan> {
    let mut out = Vec::new();
    for (ti, t) in scenario_turns.iter().enumerate() {
        let mut rng = Rng::derive(seed, STREAM_AGENT + u64::from(session) * 4096 + ti as u64);
        for _ in 0..t.repeat.unwrap_or(1) {
            let tool_calls = match &t.agent {
                Some(a) => (0..a.calls)
                    .map(|_| ToolCallPlan {
                        name: a.tools[rng.below(a.tools.len() as u64) as usize].clone(),
                        tool_time: a.tool_time.map_or(Duration::ZERO, |d| d.0),
                        output_bytes: a.output_bytes.unwrap_or(DEFAULT_TOOL_OUTPUT_BYTES),
                        parallel: false,
                        max_output_tokens: None,
                    })
                    .collect(),
                None => t
                    .tool_calls
                    .iter()
                    .map(|c| ToolCallPlan {
                        name: c.name.clone(),
                        tool_time: c.tool_time.map_or(Duration::ZERO, |d| d.0),
                        output_bytes: c.output_bytes.unwrap_or(DEFAULT_TOOL_OUTPUT_BYTES),
                        parallel: c.parallel.unwrap_or(false),
                        max_output_tokens: c.max_output_tokens,
                    })
                    .collect(),
            };
            out.push(TurnPlan {
                user_text: prompts[ti].clone(),
                think_time: t.think_time.map_or(Duration::ZERO, |d| d.0),
                max_output_tokens: t.max_output_tokens.unwrap_or(default_max),
                tool_calls,
                fault: t.fault.clone(),
                answer: t.answer.clone(),
            });
        }
    }
    out
}

/// Deterministic, code-like repository context of exactly `n` bytes (ASCII).
fn context_filler(mut rng: Rng, n: usize) -> String {
    const NOUNS: [&str; 12] = [
        "board", "snake", "cell", "score", "input", "frame", "queue", "config", "render", "timer",
        "apple", "grid",
    ];
    const VERBS: [&str; 8] = [
        "update", "handle", "parse", "render", "reset", "spawn", "check", "load",
    ];
    let mut s = String::from("\n\n# Repository context (files already open in the editor)\n");
    let mut file = 0u32;
    while s.len() < n {
        file += 1;
        let noun = NOUNS[rng.below(NOUNS.len() as u64) as usize];
        s.push_str(&format!("\n// src/{noun}_{file}.rs\n"));
        for _ in 0..(3 + rng.below(5)) {
            let verb = VERBS[rng.below(VERBS.len() as u64) as usize];
            let k = 2 + rng.below(14);
            let m = 97 + rng.below(900);
            s.push_str(&format!(
                "pub fn {verb}_{noun}(state: &mut State, input: &[u8]) -> Result<usize, Error> {{\n    let mut total = 0usize;\n    for chunk in input.chunks({k}) {{\n        total += chunk.iter().map(|b| *b as usize).sum::<usize>();\n    }}\n    state.{noun}_count += 1;\n    Ok(total % {m})\n}}\n\n"
            ));
        }
    }
    s.truncate(n);
    s
}

fn names(ts: &[TransportKind]) -> String {
    ts.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

mod sessions;
pub(super) use sessions::planned_requests;

#[cfg(test)]
mod tests;
