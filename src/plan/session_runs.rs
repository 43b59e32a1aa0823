//! The JSON form of a plan's sessions (`manifest.json` → `plan.sessions`): consecutive
//! sessions with the same script, warm-up flag and start offset, numbered one after
//! another, are one entry with a `count`, so a closed-loop plan of a million sessions of one
//! script is one entry, not a million.
//!
//! Owns: writing that folding (streamed from [`Sessions::runs`], so a plan generated on
//! demand is never listed) and reading it back as runs (consecutive equal scripts share one
//! `Arc`), and the serde helpers for the plan's shared texts (`Arc<str>`, `Arc<[T]>`).
//! Does not own: the plan types (`plan`), the sessions themselves (`plan::session_source`),
//! nor building them (`plan::build`).
//!
//! An entry without `count` is one session: manifests written before the folding read
//! unchanged.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::session_source::{Run, Sessions};
use super::{same_script, TurnPlan};

/// One entry: `count` sessions numbered from `index`.
#[derive(Serialize, Deserialize)]
struct Entry {
    index: u32,
    warmup: bool,
    #[serde(with = "crate::units::serde_duration")]
    start_offset: Duration,
    #[serde(with = "arc_slice")]
    turns: Arc<[TurnPlan]>,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    count: u32,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl From<Run> for Entry {
    fn from(r: Run) -> Self {
        Entry {
            index: r.index,
            warmup: r.warmup,
            start_offset: r.start_offset,
            turns: r.turns,
            count: r.count,
        }
    }
}

/// Serializes the sessions folded (see the module header), streaming: a plan generated on
/// demand is never listed.
pub fn serialize<S: Serializer>(sessions: &Sessions, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(sessions.runs().map(Entry::from))
}

/// The folded JSON form (as `plan.sessions`).
impl Serialize for Sessions {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize(self, s)
    }
}

/// Reads folded or one-per-session entries as runs; consecutive equal scripts share one
/// `Arc`.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Sessions, D::Error> {
    let entries = Vec::<Entry>::deserialize(d)?;
    let mut runs: Vec<Run> = Vec::with_capacity(entries.len());
    for e in entries {
        let turns = match runs.last() {
            Some(p) if same_script(&p.turns, &e.turns) => p.turns.clone(),
            _ => e.turns,
        };
        runs.push(Run {
            index: e.index,
            warmup: e.warmup,
            start_offset: e.start_offset,
            turns,
            count: e.count,
        });
    }
    Ok(Sessions::from_runs(runs))
}

/// `#[serde(with)]` for `Arc<str>`: a plain JSON string.
pub mod arc_str {
    use super::*;

    /// As a string.
    pub fn serialize<S: Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v)
    }

    /// From a string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
        String::deserialize(d).map(Arc::from)
    }
}

/// `#[serde(with)]` for `Arc<[T]>`: a plain JSON list.
pub mod arc_slice {
    use super::*;

    /// As a list.
    pub fn serialize<S: Serializer, T: Serialize>(v: &Arc<[T]>, s: S) -> Result<S::Ok, S::Error> {
        v[..].serialize(s)
    }

    /// From a list.
    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Arc<[T]>, D::Error> {
        Vec::<T>::deserialize(d).map(Arc::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{build, Overrides, Plan};

    fn plan_of(text: &str) -> Plan {
        let s = crate::scenario::parse("s.toml", text).unwrap();
        build(&s, "s.toml", text.as_bytes(), &Overrides::default()).unwrap()
    }

    fn closed(n: u32) -> Plan {
        plan_of(&format!(
            "name = \"m\"\n[load]\nsessions = {n}\nwarmup_sessions = 2\n[[turns]]\nprompt = \"hi there\"\n[[turns]]\nprompt = \"and again\"\nrepeat = 2\n"
        ))
    }

    /// Distinct script allocations and the text bytes they retain.
    fn retained(p: &Plan) -> (usize, usize) {
        let mut scripts: Vec<Arc<[TurnPlan]>> = Vec::new();
        let mut texts: Vec<Arc<str>> = Vec::new();
        for s in &p.sessions {
            for t in s.turns.iter() {
                if !texts.iter().any(|x| Arc::ptr_eq(x, &t.user_text)) {
                    texts.push(t.user_text.clone());
                }
            }
            if !scripts.iter().any(|t| Arc::ptr_eq(t, &s.turns)) {
                scripts.push(s.turns);
            }
        }
        (scripts.len(), texts.iter().map(|t| t.len()).sum())
    }

    #[test]
    fn a_hundred_times_the_sessions_retain_the_same_scripts_and_json() {
        let (small, big) = (closed(1_000), closed(100_000));
        assert_eq!((small.sessions.len(), big.sessions.len()), (1_002, 100_002));
        // One script and one copy of each scenario turn's text, however many sessions.
        assert_eq!(retained(&small), (1, "hi there".len() + "and again".len()));
        assert_eq!(retained(&big), retained(&small));
        // The JSON folds them: warm-up and measured are one entry each.
        let json = |p: &Plan| serde_json::to_value(p).unwrap()["sessions"].clone();
        let (js, jb) = (json(&small), json(&big));
        assert_eq!(jb.as_array().unwrap().len(), 2);
        assert_eq!(jb[1]["count"], 100_000);
        assert_eq!(js.to_string().len() + 2, jb.to_string().len());
        // And unfold to the same sessions, still sharing one script.
        let back: Plan = serde_json::from_value(serde_json::to_value(&big).unwrap()).unwrap();
        assert_eq!(back.sessions.len(), 100_002);
        assert!(back
            .sessions
            .iter()
            .enumerate()
            .all(|(i, s)| s.index == i as u32
                && s.warmup == (i < 2)
                && Arc::ptr_eq(&s.turns, &back.sessions.get(0).unwrap().turns)));
        assert_eq!(retained(&back).0, 1);
    }

    #[test]
    fn sessions_with_their_own_scripts_share_the_turn_texts_and_round_trip() {
        let p = plan_of("name = \"m\"\nseed = 3\n[load]\nsessions = 200\n[[turns]]\nprompt = \"go\"\nagent = { calls = 4, tools = [\"a\", \"b\", \"c\"] }\n");
        let (scripts, text_bytes) = retained(&p);
        assert!(scripts > 10, "tool orders differ per session: {scripts}");
        assert_eq!(text_bytes, 2);
        let json = serde_json::to_string(&p).unwrap();
        let back: Plan = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
        assert_eq!(back.sessions.len(), 200);
    }

    #[test]
    fn one_entry_per_session_as_older_manifests_wrote_reads() {
        let p = closed(3);
        let mut v = serde_json::to_value(&p).unwrap();
        let turns = v["sessions"][1]["turns"].clone();
        v["sessions"] = serde_json::Value::Array(
            (0..5)
                .map(|i| {
                    serde_json::json!({"index": i, "warmup": i < 2, "start_offset": "0s", "turns": turns})
                })
                .collect(),
        );
        let back: Plan = serde_json::from_value(v).unwrap();
        assert_eq!(
            serde_json::to_string(&back.sessions).ok(),
            serde_json::to_string(&p.sessions).ok()
        );
        assert_eq!(retained(&back).0, 1);
    }
}
