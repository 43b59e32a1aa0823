//! A run's transport probe: before any request, each real target is asked once per transport
//! whether it speaks it ([`crate::transport::probe`]); cells on a transport their server
//! does not speak are skipped with a line saying so, or, with `--force-transports`, run, and
//! their failed requests recorded as `unsupported-transport`, quoting the server's answer.
//!
//! Simulator targets are not probed: the embedded simulator speaks every transport (the
//! integration tests probe it to keep that true). A probe that cannot tell (the server is
//! unreachable, no answer in time) skips nothing: the run records what its requests meet.
//!
//! Owns: which cells are probed, the skip and force lines, the plan without the skipped
//! cells, the manifest's `transport_probes` records, and relabelling a forced cell's failed
//! requests. Does not own: the probes themselves (`transport::probe`), the upgrade's headers
//! (`backend::request::ws_headers`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::targets::Reach;
use crate::plan::Plan;
use crate::store::TransportProbe;
use crate::transport::probe::{Probe, Verdict, TIMEOUT};
use crate::vocab::{BaseUrl, OutcomeKind, RequestRecord, TransportKind};

/// One unsupported target × transport: the probe's answer in a sentence.
type Key = (String, TransportKind);

/// The forced cells' probe sentences, by target × transport: what relabels their failed
/// requests.
#[derive(Debug, Clone, Default)]
pub struct Forced(BTreeMap<Key, String>);

impl Forced {
    /// Records a failed request of a forced, unsupported cell as `unsupported-transport`,
    /// its error quoting the probe's answer before the transport's own message. Requests
    /// that were cancelled, never connected or failed for lack of local resources keep
    /// their kind: the transport is not why they failed.
    pub fn relabel(&self, r: &mut RequestRecord) {
        if r.outcome == OutcomeKind::Ok
            || matches!(
                r.outcome,
                OutcomeKind::Cancelled | OutcomeKind::ConnectError | OutcomeKind::LocalError
            )
        {
            return;
        }
        let Some(why) = self.0.get(&(r.target.clone(), r.transport)) else {
            return;
        };
        let was = r.error.take().unwrap_or_else(|| r.outcome.to_string());
        r.error = Some(format!(
            "{} (run with --force-transports): {was}",
            unsupported(r.transport, why)
        ));
        r.outcome = OutcomeKind::UnsupportedTransport;
    }

    /// No forced cell.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// "the server does not speak HTTP/2 (it answered `…` to the h2c preface)".
fn unsupported(transport: TransportKind, why: &str) -> String {
    let what = match transport {
        TransportKind::Ws => "the WebSocket mode",
        TransportKind::Http2 => "HTTP/2",
        _ => "HTTP/1.1",
    };
    format!("the server does not speak {what} ({why})")
}

/// What the probes found: the manifest's records, and each unsupported cell's sentence.
pub struct Found {
    /// The manifest's `transport_probes`.
    pub records: Vec<TransportProbe>,
    unsupported: BTreeMap<Key, String>,
}

/// Probes every real target × transport of the plan once, all at once, each within
/// [`TIMEOUT`].
pub async fn probe(plan: &Plan, reach: &Reach<'_>) -> anyhow::Result<Found> {
    let mut asked: Vec<(String, TransportKind, BaseUrl, Vec<_>)> = Vec::new();
    for cell in &plan.cells {
        let t = &cell.target;
        let Some(url) = &t.base_url else { continue };
        if asked
            .iter()
            .any(|(n, k, _, _)| *n == t.name && *k == cell.transport)
        {
            continue;
        }
        let headers = if cell.transport == TransportKind::Ws {
            crate::backend::request::ws_headers(t)?
        } else {
            Vec::new()
        };
        asked.push((
            t.name.clone(),
            cell.transport,
            BaseUrl::parse(url)?,
            headers,
        ));
    }
    let runs = asked.iter().map(|(name, transport, endpoint, headers)| {
        let (trust, proxy) = &reach[name.as_str()];
        let probe = Probe {
            endpoint,
            trust,
            proxy: proxy.as_ref(),
            ws_headers: headers,
            timeout: TIMEOUT,
        };
        async move { probe.run(*transport).await }
    });
    let results = futures_util::future::join_all(runs).await;
    let mut found = Found {
        records: Vec::new(),
        unsupported: BTreeMap::new(),
    };
    for ((name, transport, _, _), p) in asked.into_iter().zip(results) {
        if p.verdict == Verdict::Unsupported {
            found
                .unsupported
                .insert((name.clone(), transport), p.why.clone());
        }
        found.records.push(TransportProbe {
            target: name,
            transport,
            supported: match p.verdict {
                Verdict::Supported => Some(true),
                Verdict::Unsupported => Some(false),
                Verdict::Unknown => None,
            },
            answer: p.answer,
            elapsed_ms: (p.elapsed.as_secs_f64() * 1e4).round() / 10.0,
        });
    }
    Ok(found)
}

impl Found {
    /// The plan to run: without the unsupported cells (each named on stderr and in the
    /// plan's warnings), or, when `force`, with them, and what relabels their failures.
    /// An error when no cell is left.
    pub fn apply(&self, plan: &Arc<Plan>, force: bool) -> anyhow::Result<(Arc<Plan>, Forced)> {
        if self.unsupported.is_empty() {
            return Ok((plan.clone(), Forced::default()));
        }
        let mut kept = (**plan).clone();
        let mut lines = Vec::new();
        for ((target, transport), why) in &self.unsupported {
            let what = unsupported(*transport, why);
            lines.push(if force {
                format!("running {target} × {transport} anyway (--force-transports): {what}; its failed requests are recorded as unsupported-transport")
            } else {
                format!("skipping {target} × {transport}: {what}; --force-transports runs it anyway")
            });
        }
        for l in &lines {
            errln!("{l}");
        }
        kept.warnings.extend(lines);
        if force {
            return Ok((Arc::new(kept), Forced(self.unsupported.clone())));
        }
        kept.cells.retain(|c| {
            !self
                .unsupported
                .contains_key(&(c.target.name.clone(), c.transport))
        });
        anyhow::ensure!(
            !kept.cells.is_empty(),
            "nothing to run: the transport probe skipped every cell (a server answered a \
             transport it does not speak; see the lines above); run the transports the \
             servers speak, or pass --force-transports to record the failures"
        );
        Ok((Arc::new(kept), Forced::default()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_failures_quote_the_answer_and_others_keep_their_kind() {
        let why = "it answered `HTTP/1.1 400 Bad Request` to the h2c preface".to_string();
        let forced = Forced(BTreeMap::from([(
            ("llama".to_string(), TransportKind::Http2),
            why,
        )]));
        let mut r = RequestRecord {
            target: "llama".into(),
            transport: TransportKind::Http2,
            outcome: OutcomeKind::ProtocolError,
            error: Some("sending the request: http2 error".into()),
            ..RequestRecord::default()
        };
        forced.relabel(&mut r);
        assert_eq!(r.outcome, OutcomeKind::UnsupportedTransport);
        let e = r.error.clone().unwrap();
        assert!(
            e.starts_with("the server does not speak HTTP/2 (it answered `HTTP/1.1 400 Bad Request` to the h2c preface)")
                && e.ends_with("http2 error"),
            "{e}"
        );
        for (kind, transport) in [
            (OutcomeKind::Ok, TransportKind::Http2),
            (OutcomeKind::Cancelled, TransportKind::Http2),
            (OutcomeKind::ProtocolError, TransportKind::Http),
        ] {
            let mut r = RequestRecord {
                target: "llama".into(),
                transport,
                outcome: kind,
                ..RequestRecord::default()
            };
            forced.relabel(&mut r);
            assert_eq!(r.outcome, kind);
        }
    }
}
