//! A simulator profile with `chunks_per_write = 4` (a server that flushes every few events),
//! read by spark-bench's real client path on every transport and both APIs: every chunk of a
//! group leaves in one write (one transmit stamp) and arrives together, each chunk is still
//! counted on its own, and the token counts are the simulator's.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use spark_bench::driver::exchange::{
    exchange, Clock, Connector, Conversation, RecordMeta, RequestSpec, Trust,
};
use spark_bench::link::Link;
use spark_bench::plan::{targets, Target};
use spark_bench::sim::{self, Profile, SimConfig};
use spark_bench::vocab::{ApiFlavour, OutcomeKind, TransportKind};

const GROUP: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_chunks_arrive_together_and_are_each_counted() {
    // With the kernel's transmit stamps, and with the instant before the write instead.
    for tx_stamps in [true, false] {
        grouped(tx_stamps).await;
    }
}

async fn grouped(tx_stamps: bool) {
    let profile = Profile {
        chunks_per_write: GROUP as u32,
        ..Profile::builtin("fast").unwrap()
    };
    let mut cfg = SimConfig::new(profile);
    cfg.tx_stamps = tx_stamps;
    let sim = sim::spawn(cfg).await.unwrap();
    let cases = [
        (ApiFlavour::ChatCompletions, TransportKind::HttpPooled),
        (ApiFlavour::Responses, TransportKind::Http),
        (ApiFlavour::Responses, TransportKind::HttpPooled),
        (ApiFlavour::Responses, TransportKind::Http2),
        (ApiFlavour::Responses, TransportKind::Ws),
    ];
    for (api, kind) in cases {
        // The built-in simulator target, pointed at this simulator.
        let t = Target {
            base_url: Some(sim.base_url.clone()),
            sim_profile: None,
            api,
            ..targets::builtin("sim-wafer").unwrap()
        };
        let clock = Clock::start();
        let connector = Arc::new(
            Connector::new(&t, kind, Trust::PublicRoots, Link::default(), clock, 1).unwrap(),
        );
        let mut session = connector.session();
        let mut conv = Conversation::new("You are terse.", api, kind, false);
        conv.add_user_message("Write a long file.");
        let spec = RequestSpec {
            max_output_tokens: 300,
            ..Default::default()
        };
        let meta = RecordMeta {
            intended_ns: clock.now_ns(),
            ..Default::default()
        };
        let (r, _) = exchange(
            &mut session,
            &t,
            &mut conv,
            &spec,
            &meta,
            &CancellationToken::new(),
        )
        .await;
        let what = format!(
            "{api:?} over {} (transmit stamps: {tx_stamps})",
            kind.as_str()
        );
        assert_eq!(r.outcome, OutcomeKind::Ok, "{what}: {r:?}");
        let truth = sim
            .trace
            .get(r.response_id.as_deref().expect("response id"))
            .expect("trace");
        assert!(truth.chunk_writes.len() > 3 * GROUP, "{what}");
        assert_eq!(r.chunks.len(), truth.chunk_writes.len(), "{what}");
        assert_eq!(r.output_tokens, truth.output_tokens, "{what}");
        let sent: Vec<u64> = truth.chunk_writes.iter().map(|w| clock.ns(w.at)).collect();
        // Groups whose chunks all carry one arrival. A group leaves in one write, which is
        // one segment; it is split only when a late reader's read ends inside it (the
        // kernel then hands over many waiting segments at once, up to the read's size).
        let mut together = 0;
        for (g, (got, wrote)) in r.chunks.chunks(GROUP).zip(sent.chunks(GROUP)).enumerate() {
            assert!(
                wrote.iter().all(|&w| w == wrote[0]),
                "{what}: group {g} left in more than one write: {wrote:?}"
            );
            if got.iter().all(|c| c.at_ns == got[0].at_ns) {
                together += 1;
            }
            let err = got[0].at_ns as i64 - wrote[0] as i64;
            assert!(err.abs() < 50_000_000, "{what}: group {g} off by {err} ns");
        }
        let groups = r.chunks.len().div_ceil(GROUP);
        assert!(
            together * 2 >= groups,
            "{what}: only {together} of {groups} groups arrived in one read"
        );
        assert!(
            r.chunks.windows(2).all(|w| w[0].at_ns <= w[1].at_ns),
            "{what}: arrivals out of order"
        );
        // The groups are separate writes.
        let mut writes = sent.clone();
        writes.dedup();
        assert!(writes.len() > 1, "{what}: one write for everything");
    }
    sim.shutdown().await;
}
