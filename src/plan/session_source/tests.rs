use super::*;
use crate::plan::{build, Overrides, Plan};

fn plan_of(text: &str) -> Plan {
    let s = crate::scenario::parse("s.toml", text).unwrap();
    build(&s, "s.toml", text.as_bytes(), &Overrides::default()).unwrap()
}

/// An agent loop: every session draws its own tool order, so no two sessions need share.
fn agent(sessions: u32, load: &str) -> Plan {
    plan_of(&format!(
        "name = \"m\"\nseed = 7\n[load]\nsessions = {sessions}\nwarmup_sessions = 2\n{load}\n[[turns]]\nprompt = \"go\"\nagent = {{ calls = 3, tools = [\"a\", \"b\", \"c\", \"d\"] }}\n[[turns]]\nprompt = \"again\"\n"
    ))
}

fn same(a: &SessionPlan, b: &SessionPlan) -> bool {
    a.index == b.index
        && a.warmup == b.warmup
        && a.start_offset == b.start_offset
        && a.turns == b.turns
}

/// `p`'s source stretched to `whole` sessions (`[load] sessions` stops at 100,000; the
/// source does not care how many it is asked for).
fn stretched(p: &Plan, whole: u32) -> Sessions {
    match &p.sessions.kind {
        Kind::Source { src, .. } => Sessions::from_source((**src).clone(), whole),
        Kind::Runs(_) => panic!("a built plan is a source"),
    }
}

#[test]
fn ten_million_sessions_cost_nothing_and_session_i_is_the_small_plans() {
    let small = agent(30, "");
    let big = stretched(&small, 10_000_002);
    // Nothing per session: the value is the source (a function of the index), not a list,
    // and a late session is built when asked for.
    let late = big.get(9_999_990).unwrap();
    let copy = big.clone();
    assert!(matches!(big.kind, Kind::Source { .. }));
    assert!(matches!(copy.kind, Kind::Source { .. }));
    assert_eq!((big.len(), big.end_index()), (10_000_002, 10_000_002));
    assert_eq!((late.index, late.warmup), (9_999_990, false));
    // Session i depends on the seed and i only: the plan of 30 sessions has the same ones,
    // and so does the biggest plan `[load]` allows.
    let listed = small.sessions.to_vec();
    assert_eq!(listed.len(), 32);
    let most = agent(100_000, "");
    for (k, s) in listed.iter().enumerate() {
        assert!(same(s, &big.get(k).unwrap()), "session {k}");
        assert!(same(s, &copy.iter().nth(k).unwrap()), "session {k}");
        assert!(same(s, &most.sessions.get(k).unwrap()), "session {k}");
    }
    let scripts: Vec<_> = listed.iter().map(|s| &s.turns).collect();
    assert!(
        scripts.windows(2).any(|w| w[0] != w[1]),
        "tool orders differ"
    );
    let k = 99_999;
    assert!(same(&big.get(k).unwrap(), &most.sessions.get(k).unwrap()));
    assert!(same(
        &big.get(k).unwrap(),
        &most.sessions.iter().nth(k).unwrap()
    ));
    // A shard of it is as cheap.
    let shard = big.shard(3, 4);
    assert_eq!(shard.len(), 2_500_000);
    assert!(same(
        &shard.get(2_499_999).unwrap(),
        &big.get(9_999_999).unwrap()
    ));
    assert!(matches!(shard.kind, Kind::Source { .. }));
}

#[test]
fn a_closed_loop_of_one_script_shares_it_and_folds_to_two_entries() {
    let p = plan_of("name = \"m\"\n[load]\nsessions = 100000\nwarmup_sessions = 2\n[[turns]]\nprompt = \"hi\"\n");
    let first = p.sessions.get(0).unwrap();
    assert!(p
        .sessions
        .iter()
        .all(|s| Arc::ptr_eq(&s.turns, &first.turns)));
    let runs: Vec<Run> = p.sessions.runs().collect();
    assert_eq!(
        runs.iter()
            .map(|r| (r.index, r.warmup, r.count))
            .collect::<Vec<_>>(),
        vec![(0, true, 2), (2, false, 100_000)]
    );
}

#[test]
fn open_loop_sessions_replay_the_same_walk_every_time() {
    let p = agent(40, "rate = 50.0\nwarmup = \"200ms\"");
    let a = p.sessions.to_vec();
    let b = p.sessions.to_vec();
    assert_eq!(a.len(), p.sessions.len());
    assert!(a.iter().zip(&b).all(|(x, y)| same(x, y)));
    assert!(a
        .windows(2)
        .all(|w| w[0].start_offset <= w[1].start_offset || w[1].index < 2));
    assert!(a.iter().skip(2).any(|s| s.warmup), "warm-up by time");
    assert_eq!(a.iter().filter(|s| !s.warmup).count(), 40);
    for k in [0, 1, 2, 17, a.len() - 1] {
        assert!(same(&a[k], &p.sessions.get(k).unwrap()));
    }
    assert!(p.sessions.get(a.len()).is_none());
}

#[test]
fn a_shard_is_the_whole_filtered_and_knows_its_last_index() {
    for p in [agent(23, ""), agent(23, "session_interval = \"10ms\"")] {
        let whole = p.sessions.to_vec();
        for n in [1u32, 2, 4, 7, 30] {
            for k in 0..n {
                let shard = p.sessions.shard(k, n);
                let got = shard.to_vec();
                let want: Vec<_> = whole.iter().filter(|s| s.index % n == k).collect();
                assert_eq!(got.len(), want.len(), "{k}/{n}");
                assert_eq!(shard.len(), want.len(), "{k}/{n}");
                assert!(got.iter().zip(&want).all(|(a, b)| same(a, b)), "{k}/{n}");
                let end = want.iter().map(|s| s.index + 1).max().unwrap_or(0);
                assert_eq!(shard.end_index(), end, "{k}/{n}");
                if let Some(last) = want.last() {
                    assert!(same(&shard.get(want.len() - 1).unwrap(), last));
                }
                // Folded runs read back equal.
                let back = Sessions::from_runs(shard.runs().collect());
                assert!(back.iter().zip(&want).all(|(a, b)| same(&a, b)));
                assert_eq!(back.end_index(), end);
            }
        }
        let parts: Vec<Sessions> = (0..3).map(|k| p.sessions.shard(k, 3)).collect();
        let merged = Sessions::merged(parts.iter());
        assert!(merged.iter().zip(&whole).all(|(a, b)| same(&a, b)));
        assert_eq!(merged.len(), whole.len());
    }
}
