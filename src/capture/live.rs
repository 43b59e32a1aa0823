//! The live session's targets in its results directory: one target, `as-recorded`, when every
//! session spoke one API; one per API (`as-recorded-chat`, `as-recorded-responses`) when a
//! recording mixes them, since a target speaks one API and chat completions has no WebSocket
//! mode. Every recorded request keeps its row either way.
//!
//! Owns: the target name of each session's rows and the targets (and transports) the results
//! directory's plan declares for them. Does not own: the rows (`write`), the plan rules (`plan`).

use super::build::Session;
use super::privacy::Privacy;
use crate::scenario::{Scenario, TargetSpec};
use crate::vocab::{ApiFlavour, TransportKind};

/// The API a session's target speaks: its own, else the first session's that has one.
fn api_of(sessions: &[Session], s: &Session) -> Option<ApiFlavour> {
    s.api.or_else(|| sessions.iter().find_map(|s| s.api))
}

/// Whether the recording holds both APIs.
fn mixed(sessions: &[Session]) -> bool {
    let has = |a| sessions.iter().any(|s| s.api == Some(a));
    has(ApiFlavour::ChatCompletions) && has(ApiFlavour::Responses)
}

/// The live target name of each session (same order as `sessions`): `base`, or with both
/// APIs in the recording `base-chat` / `base-responses`.
pub fn target_names(sessions: &[Session], base: &str) -> Vec<String> {
    let mixed = mixed(sessions);
    sessions
        .iter()
        .map(|s| match api_of(sessions, s) {
            Some(ApiFlavour::ChatCompletions) if mixed => format!("{base}-chat"),
            Some(ApiFlavour::Responses) if mixed => format!("{base}-responses"),
            _ => base.to_string(),
        })
        .collect()
}

/// Declares the live targets in `scenario`'s `[matrix]` (and, when the recording mixes APIs,
/// a copy of the target `base` per API, each limited to the transports its sessions used), so
/// the results directory's plan holds every session's target × transport. `transport` is
/// each session's transport (same order as `sessions`).
pub fn declare(
    scenario: &mut Scenario,
    sessions: &[Session],
    transport: &[TransportKind],
    base: &str,
    pv: &Privacy,
) {
    let names = target_names(sessions, base);
    let mut transports: Vec<TransportKind> = transport.to_vec();
    transports.sort();
    transports.dedup();
    let mut targets: Vec<String> = names.clone();
    targets.sort();
    targets.dedup();
    scenario.matrix.targets = Some(targets.clone());
    scenario.matrix.transports = Some(transports);
    if !mixed(sessions) {
        return;
    }
    let spec = scenario.targets.get(base).cloned().unwrap_or_default();
    for name in &targets {
        let mine: Vec<(&Session, TransportKind)> = sessions
            .iter()
            .zip(transport)
            .zip(&names)
            .filter(|(_, n)| *n == name)
            .map(|((s, t), _)| (s, *t))
            .collect();
        let mut used: Vec<TransportKind> = mine.iter().map(|m| m.1).collect();
        used.sort();
        used.dedup();
        let api = mine.first().and_then(|m| api_of(sessions, m.0));
        let model = mine
            .first()
            .map(|m| pv.clean(&m.0.model))
            .filter(|m| !m.is_empty());
        scenario.targets.insert(
            name.clone(),
            TargetSpec {
                base_url: spec.base_url.clone(),
                api_key_env: spec.api_key_env.clone(),
                model: model.or_else(|| spec.model.clone()),
                api,
                transports: Some(used),
                ..Default::default()
            },
        );
    }
}
