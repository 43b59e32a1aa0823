//! Shards: one plan split across N machines or processes (`run --shard I/N`), and the
//! plan hash that proves every shard ran a part of the same plan.
//!
//! Owns: the deterministic partition (session `k` of the plan runs in shard `k mod N`, in
//! every cell, so each transport's share of the load is the same in every shard), the split
//! of the load (concurrency, `max_in_flight` and request rate divided, session interval
//! multiplied), the plan hash, and the reverse: the shards' plans folded back into the whole
//! plan (what `merge` writes into the merged manifest).
//! Does not own: running a shard (the runner runs a shard plan like any other) or merging
//! results (`store::merge`).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Load, Plan, PlanError};

/// `--shard I/N`: shard `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    /// 0-based index, below `count`.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
}

impl std::str::FromStr for ShardSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "--shard {s:?}: expected I/N with 0 <= I < N <= {MAX_SHARDS}, e.g. 0/4 … 3/4 (the index is 0-based, like a Kubernetes completion index)"
            )
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(bad());
        }
        Ok(ShardSpec { index, count })
    }
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Most shards one plan can be split into.
pub const MAX_SHARDS: u32 = 1024;

/// What a shard plan knows about the whole plan (`manifest.json` → `plan.shard`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shard {
    /// 0-based index.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
    /// [`plan_hash`] of the whole plan: equal in every shard of one plan.
    pub plan_hash: String,
    /// The whole plan's load (this shard's `load` is its part of it).
    pub plan_load: Load,
    /// Measured sessions per cell in the whole plan.
    pub plan_sessions: u32,
}

/// `sha256:<hex>` of the plan as JSON, without what a run adds (the cold-cache salt key,
/// drawn per run) and without any shard: the same for every shard of one plan, and
/// different for any change of scenario, seed, targets, transports, load or sessions.
pub fn plan_hash(plan: &Plan) -> String {
    // Hashed as the manifest stores it (credential header values withheld), so a merge can
    // check the shards' manifests against it.
    let mut p = super::targets::without_secrets(plan);
    p.load.salt_key = 0;
    p.shard = None;
    p.warnings.clear();
    // The plan holds strings, numbers, maps and lists only: serializing cannot fail.
    let bytes = serde_json::to_vec(&p).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `n` split into `count` near-equal parts; part `index` (the first `n % count` parts get
/// one more).
fn part(n: u32, spec: ShardSpec) -> u32 {
    n / spec.count + u32::from(spec.index < n % spec.count)
}

impl Plan {
    /// This plan's shard `spec`: every cell, the sessions whose index is `spec.index` modulo
    /// `spec.count` (warm-up sessions too), and its part of the load. Fails when the load
    /// cannot be split that many ways (fewer sessions, or a concurrency below the shard
    /// count).
    pub fn shard(&self, spec: ShardSpec) -> Result<Plan, PlanError> {
        if self.shard.is_some() {
            return Err(PlanError::new("this plan is already a shard"));
        }
        let n = spec.count;
        let load = &self.load;
        let too_few = |what: &str, have: u32| {
            PlanError::new(format!(
                "--shard {spec}: the plan's {what} is {have}, fewer than {n} shards; every shard needs at least 1 (raise it or use at most {have} shards)"
            ))
        };
        if !load.sessions_from_duration && load.sessions < n {
            return Err(too_few("session count (--sessions)", load.sessions));
        }
        let mut shard_load = load.clone();
        if load.rate.is_none() {
            if load.concurrency < n {
                return Err(too_few("concurrency (--concurrency)", load.concurrency));
            }
            shard_load.concurrency = part(load.concurrency, spec);
        }
        if let Some(m) = load.max_in_flight {
            if m < n {
                return Err(too_few("max_in_flight (--max-in-flight)", m));
            }
            shard_load.max_in_flight = Some(part(m, spec));
        }
        shard_load.rate = load.rate.map(|r| r / f64::from(n));
        shard_load.session_interval = load.session_interval.map(|g| g * n);
        let sessions = self.sessions.shard(spec.index, n);
        shard_load.sessions = sessions.iter().filter(|s| !s.warmup).count() as u32;
        if load.sessions_from_duration && !load.open_loop() {
            shard_load.sessions = load.sessions;
        }
        let mut p = self.clone();
        p.sessions = sessions;
        p.load = shard_load;
        p.shard = Some(Shard {
            index: spec.index,
            count: n,
            plan_hash: plan_hash(self),
            plan_load: self.load.clone(),
            plan_sessions: self.load.sessions,
        });
        Ok(p)
    }

    /// The whole plan the `shards` were cut from: their sessions in index order and the
    /// plan's load. With every shard present its [`plan_hash`] is the shards' `plan_hash`.
    pub fn unshard(shards: &[Plan]) -> Option<Plan> {
        let first = shards.first()?;
        let info = first.shard.clone()?;
        let mut p = first.clone();
        p.sessions = super::Sessions::merged(shards.iter().map(|s| &s.sessions));
        p.load = info.plan_load;
        p.load.salt_key = 0;
        p.shard = None;
        Some(p)
    }

    /// Driver seed stream of this shard's own randomness (interleaved arrivals), so shards
    /// of one plan do not send identical bursts at the same moments.
    pub fn shard_seed(&self) -> u64 {
        match &self.shard {
            Some(s) => {
                crate::rng::Rng::derive(self.seed, 0x5eed_0000 + u64::from(s.index)).next_u64()
            }
            None => self.seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(sessions: u32, concurrency: u32) -> Plan {
        let text = format!(
            "name = \"t\"\n[load]\nsessions = {sessions}\nconcurrency = {concurrency}\nwarmup_sessions = 2\n[[turns]]\nprompt = \"hi\"\n"
        );
        let s = crate::scenario::parse("t.toml", &text).unwrap();
        super::super::build(&s, "t.toml", text.as_bytes(), &Default::default()).unwrap()
    }

    #[test]
    fn shard_specs_parse_and_refuse() {
        assert_eq!(
            "1/4".parse::<ShardSpec>().unwrap(),
            ShardSpec { index: 1, count: 4 }
        );
        for bad in ["4/4", "1", "a/4", "0/0", "-1/4", "0/5000"] {
            let e = bad.parse::<ShardSpec>().unwrap_err();
            assert!(e.contains("0-based"), "{bad}: {e}");
        }
    }

    #[test]
    fn shards_partition_sessions_keep_every_cell_and_fold_back() {
        let whole = plan(10, 6);
        let hash = plan_hash(&whole);
        let shards: Vec<Plan> = (0..4)
            .map(|i| whole.shard(ShardSpec { index: i, count: 4 }).unwrap())
            .collect();
        let mut seen: Vec<u32> = Vec::new();
        for (i, s) in shards.iter().enumerate() {
            assert_eq!(s.cells.len(), whole.cells.len());
            assert_eq!(s.shard.as_ref().unwrap().plan_hash, hash);
            assert!(s.sessions.iter().all(|x| x.index % 4 == i as u32));
            seen.extend(s.sessions.iter().map(|x| x.index));
        }
        seen.sort();
        assert_eq!(
            seen,
            whole.sessions.iter().map(|s| s.index).collect::<Vec<_>>()
        );
        let conc: u32 = shards.iter().map(|s| s.load.concurrency).sum();
        assert_eq!(conc, 6);
        let measured: u32 = shards.iter().map(|s| s.load.sessions).sum();
        assert_eq!(measured, 10);
        assert_eq!(plan_hash(&Plan::unshard(&shards).unwrap()), hash);
        // Through JSON (as merge reads them from manifests) the hash still matches.
        let back: Vec<Plan> = shards
            .iter()
            .map(|s| serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap())
            .collect();
        assert_eq!(plan_hash(&Plan::unshard(&back).unwrap()), hash);
        // A different plan has a different hash.
        assert_ne!(plan_hash(&plan(11, 6)), hash);
    }

    #[test]
    fn a_load_too_small_to_split_is_refused() {
        let e = plan(3, 3)
            .shard(ShardSpec { index: 0, count: 4 })
            .unwrap_err();
        assert!(e.message.contains("fewer than 4 shards"), "{}", e.message);
    }
}
