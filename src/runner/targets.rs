//! Where each cell of a plan sends its requests: the trust and proxy of every real endpoint,
//! and an embedded simulator started for each simulator cell.
//!
//! Owns: reading certificate files and the environment's proxy variables (once per target,
//! before any request), the simulators' seeds and certificates, and the notes the manifest
//! keeps about each target's network, and the simulator profiles' write groups the buffering
//! check expects.
//! Does not own: the simulators' shutdown (the run does it when the driver is done).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;

use crate::driver::Endpoint;
use crate::link::Link;
use crate::plan::{self, Plan};
use crate::sim;
use crate::transport::proxy;
use crate::transport::Trust;
use crate::vocab::Proxy;

/// The trust and proxy of each real target, by target name.
pub type Reach<'p> = BTreeMap<&'p str, (Trust, Option<Proxy>)>;

/// Trust and proxy of every real endpoint, checked before any request: certificate files
/// are read once per target, and the environment's proxy variables are read here and
/// nowhere else (the library takes the resolved proxy).
pub fn reach(plan: &Plan) -> anyhow::Result<Reach<'_>> {
    let mut reach: Reach<'_> = Default::default();
    for cell in &plan.cells {
        let t = &cell.target;
        let Some(url) = &t.base_url else { continue };
        if reach.contains_key(t.name.as_str()) {
            continue;
        }
        let endpoint = crate::vocab::BaseUrl::parse(url)?;
        // A plain-http target makes no TLS connection: the system's store is not read for it
        // (~5 ms of CPU), unless it names certificate files, which are still checked.
        let files = t.net.ca_file.is_some() || t.net.client_cert.is_some();
        let trust = if endpoint.scheme == crate::vocab::Scheme::Http && !files {
            Trust::PublicRoots
        } else {
            endpoint_trust(t)?
        };
        let proxy = proxy::choose(t.net.proxy.as_deref(), &endpoint, |name| {
            std::env::var(name).ok()
        })
        .map_err(|why| anyhow::anyhow!("target {}: {why}", t.name))?;
        if let Trust::Endpoint(e) = &trust {
            if files {
                errln!("target {}: trusting {}", t.name, e.describe());
            }
            for note in e.notes() {
                errln!("warning: target {}: {note}", t.name);
            }
        }
        if let Some(p) = &proxy {
            errln!(
                "target {}: through proxy {} (HTTP CONNECT)",
                t.name,
                p.url()
            );
        }
        reach.insert(t.name.as_str(), (trust, proxy));
    }
    Ok(reach)
}

/// The simulator targets whose profile writes several chunks at once by design
/// (`chunks_per_write` > 1), with that group size: the buffering check's expected cadence.
pub fn write_groups(plan: &Plan) -> anyhow::Result<Vec<(String, u32)>> {
    let mut out = Vec::new();
    for cell in &plan.cells {
        if let (None, Some(name)) = (&cell.target.base_url, &cell.target.sim_profile) {
            let group = sim_profile(&cell.target, name)?.chunks_per_write;
            if group > 1 {
                out.push((cell.target.name.clone(), group));
            }
        }
    }
    Ok(out)
}

/// One endpoint per cell of the plan, in order: real targets as reached, and for each
/// simulator cell a simulator of its own (so cells cannot disturb each other), returned
/// with the endpoints so the run can shut them down. The plan's link applies to simulator
/// targets, and to real endpoints only when it came from `--link`.
pub async fn endpoints(
    plan: &Plan,
    reach: &Reach<'_>,
) -> anyhow::Result<(Vec<Endpoint>, Vec<sim::SimHandle>)> {
    let mut sims = Vec::new();
    let mut endpoints = Vec::new();
    for (i, cell) in plan.cells.iter().enumerate() {
        match (&cell.target.base_url, &cell.target.sim_profile) {
            (Some(url), _) => {
                let (trust, proxy) = reach[cell.target.name.as_str()].clone();
                endpoints.push(Endpoint {
                    base_url: url.clone(),
                    trust,
                    link: if plan.link_for_real_targets {
                        plan.link
                    } else {
                        Link::default()
                    },
                    proxy,
                })
            }
            (None, Some(profile_name)) => {
                let profile = sim_profile(&cell.target, profile_name)?;
                let mut cfg = sim::SimConfig::new(profile);
                // One seed per target, not per cell: every transport of a target gets the same
                // answers to the same conversation, so only the transport differs.
                let target_index = plan
                    .cells
                    .iter()
                    .position(|c| c.target.name == cell.target.name)
                    .unwrap_or(i);
                cfg.seed =
                    crate::rng::Rng::derive(plan.seed, 1000 + target_index as u64).next_u64();
                let cert = crate::tls::SelfSigned::generate()?;
                cfg.tls = Some(cert.clone());
                let handle = sim::spawn(cfg).await?;
                endpoints.push(Endpoint {
                    base_url: handle.base_url.clone(),
                    trust: Trust::Sim(cert),
                    link: plan.link,
                    proxy: None,
                });
                sims.push(handle);
            }
            (None, None) => anyhow::bail!(
                "target {} has neither base_url nor sim_profile; set one in [targets.{}]",
                cell.target.name,
                cell.target.name
            ),
        }
    }
    Ok((endpoints, sims))
}

/// The simulator profile of a simulator target: the built-in `name`, with the target's
/// `sim_profile_file` layered on top when it has one (read here, at run start). Errors name
/// the target, the file and the fix.
pub fn sim_profile(target: &plan::Target, name: &str) -> anyhow::Result<sim::Profile> {
    let Some(path) = &target.sim_profile_file else {
        return sim::Profile::builtin(name).with_context(|| {
            format!(
                "target {}: unknown simulator profile {name:?} (known: {})",
                target.name,
                sim::Profile::builtin_names().join(", ")
            )
        });
    };
    if !path.is_file() {
        anyhow::bail!(
            "target {}: sim_profile_file {} does not exist; the path is relative to the file that names it (write e.g. sim_profile_file = \"profiles/cap8.toml\" next to a profiles/ folder, or give an absolute path)",
            target.name,
            path.display()
        );
    }
    sim::Profile::from_toml_file(path, name).map_err(|e| {
        anyhow::anyhow!(
            "target {}: sim_profile_file: {e:#}; a profile file holds the keys of docs/simulator.md's \"Profiles\" section, e.g. capacity = 8 and decode_tok_s = 1000.0",
            target.name
        )
    })
}

/// What the manifest says about each real target's network: what its TLS trusts and
/// whether it goes through a proxy, by target name.
pub fn network_notes(plan: &Plan, reach: &Reach<'_>) -> Vec<(String, String)> {
    let mut notes = Vec::new();
    for (name, (trust, proxy)) in reach {
        let plain = plan.cells.iter().any(|c| {
            c.target.name == *name
                && c.target
                    .base_url
                    .as_deref()
                    .is_some_and(|u| u.starts_with("http://"))
        });
        let trusted = match trust {
            _ if plain => "none (plain http)".to_string(),
            Trust::Endpoint(e) => e.describe().to_string(),
            _ => "the simulator's certificate".to_string(),
        };
        let via = proxy.as_ref().map_or("direct".to_string(), |p| p.url());
        notes.push((name.to_string(), format!("trust: {trusted}; proxy: {via}")));
    }
    notes
}

/// What a real endpoint's TLS client trusts and presents: the system's store, the bundled
/// roots, the target's `ca_file` and client certificate. Errors name the target, the key
/// and the file.
fn endpoint_trust(t: &plan::Target) -> anyhow::Result<Trust> {
    use crate::tls::{EndpointTrust, NamedFile};
    fn named<'a>(key: &'static str, p: &'a Option<std::path::PathBuf>) -> Option<NamedFile<'a>> {
        p.as_deref().map(|path| NamedFile { key, path })
    }
    let ca = named("ca_file", &t.net.ca_file);
    let client =
        named("client_cert", &t.net.client_cert).zip(named("client_key", &t.net.client_key));
    let trust =
        EndpointTrust::load(ca, client).map_err(|e| anyhow::anyhow!("target {}: {e:#}", t.name))?;
    Ok(Trust::Endpoint(Arc::new(trust)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target_from(dir: &std::path::Path, spec: &str) -> anyhow::Result<sim::Profile> {
        let scenario = dir.join("s.toml");
        let text = format!("name = \"s\"\n[targets.t]\n{spec}\n[[turns]]\nprompt = \"hi\"\n");
        std::fs::write(&scenario, &text)?;
        let s = crate::scenario::parse(&scenario.display().to_string(), &text)?;
        let o = crate::plan::Overrides {
            targets: vec!["t".into()],
            ..Default::default()
        };
        let plan = crate::plan::build(&s, &scenario.display().to_string(), text.as_bytes(), &o)
            .map_err(|e| anyhow::anyhow!(e.message))?;
        let t = &plan.cells[0].target;
        sim_profile(t, t.sim_profile.as_deref().unwrap_or("gpu"))
    }

    #[test]
    fn sim_profile_file_is_relative_to_its_file_and_errors_say_the_fix() {
        let dir = testkit::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("profiles")).unwrap();
        std::fs::write(
            dir.path().join("profiles/cap.toml"),
            "capacity = 8\ndecode_tok_s = 500.0\n",
        )
        .unwrap();
        let p = target_from(dir.path(), "sim_profile_file = \"profiles/cap.toml\"").unwrap();
        assert_eq!((p.capacity, p.decode_tok_s), (8, 500.0));
        // Layered on the target's sim_profile.
        let p = target_from(
            dir.path(),
            "sim_profile = \"wafer\"\nsim_profile_file = \"profiles/cap.toml\"",
        )
        .unwrap();
        assert_eq!(p.api_base, std::time::Duration::from_millis(40));
        let e = target_from(dir.path(), "sim_profile_file = \"profiles/nope.toml\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nope.toml") && e.contains("relative to the file"),
            "{e}"
        );
        std::fs::write(dir.path().join("profiles/bad.toml"), "capacty = 8\n").unwrap();
        let e = format!(
            "{:#}",
            target_from(dir.path(), "sim_profile_file = \"profiles/bad.toml\"").unwrap_err()
        );
        assert!(e.contains("bad.toml") && e.contains("capacty"), "{e}");
    }
}
