//! Interop: our client against llmsim (an independent Rust LLM API simulator, crates.io).
//! Ignored by default; `.ci/steps/20-interop-llmsim.sh` installs and starts llmsim and runs
//! these with `SPARK_BENCH_LLMSIM_URL=http://127.0.0.1:PORT/openai/v1`.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use spark_bench::driver::exchange::{
    exchange, Clock, Connector, Conversation, RecordMeta, RequestSpec, Trust,
};
use spark_bench::link::Link;
use spark_bench::plan::Target;
use spark_bench::vocab::{ApiFlavour, Chaining, OutcomeKind, RequestRecord, TransportKind};

fn target(api: ApiFlavour) -> Target {
    let base = std::env::var("SPARK_BENCH_LLMSIM_URL").expect(
        "set SPARK_BENCH_LLMSIM_URL to a running llmsim, e.g. http://127.0.0.1:8080/openai/v1",
    );
    Target {
        name: "llmsim".into(),
        base_url: Some(base),
        sim_profile: None,
        api,
        model: "gpt-4o".into(),
        api_key_env: None,
        hardware: "llmsim".into(),
        headers: Default::default(),
        store: false,
        ws_warmup: false,
        request_timing: false,
        request_timeout: Duration::from_secs(30),
        stall_timeout: Duration::from_secs(10),
        transports: TransportKind::ALL.to_vec(),
        net: Default::default(),
        ignore_eos: false,
        sim_profile_file: None,
    }
}

async fn conversation(t: &Target, kind: TransportKind, turns: u32) -> Vec<RequestRecord> {
    let clock = Clock::start();
    let c =
        Arc::new(Connector::new(t, kind, Trust::PublicRoots, Link::default(), clock, 1).unwrap());
    let mut s = c.session();
    let mut conv = Conversation::new("You are terse.", t.api, kind, false);
    let mut recs = Vec::new();
    for turn in 0..turns {
        conv.add_user_message(&format!("Say something about step {turn}."));
        let spec = RequestSpec {
            max_output_tokens: 40,
            ..Default::default()
        };
        let meta = RecordMeta {
            turn,
            intended_ns: clock.now_ns(),
            ..Default::default()
        };
        recs.push(
            exchange(
                &mut s,
                t,
                &mut conv,
                &spec,
                &meta,
                &CancellationToken::new(),
            )
            .await
            .0,
        );
    }
    recs
}

fn check(r: &RequestRecord) {
    assert_eq!(r.outcome, OutcomeKind::Ok, "{r:?}");
    assert!(!r.chunks.is_empty(), "{r:?}");
    assert!(r.output_tokens > 0);
    assert!(r.first_token_ns.unwrap() >= r.dispatch_ns);
    eprintln!(
        "{} turn {}: {} chunks, {} tokens ({:?}), ttft {:.2} ms, reused {}",
        r.transport,
        r.turn,
        r.chunks.len(),
        r.output_tokens,
        r.token_source,
        (r.first_token_ns.unwrap() - r.dispatch_ns) as f64 / 1e6,
        r.connection_reused
    );
}

#[tokio::test]
#[ignore]
async fn llmsim_chat_completions_sse() {
    let t = target(ApiFlavour::ChatCompletions);
    for kind in [TransportKind::Http, TransportKind::HttpPooled] {
        let recs = conversation(&t, kind, 2).await;
        recs.iter().for_each(check);
        assert_eq!(recs[1].connection_reused, kind == TransportKind::HttpPooled);
    }
}

#[tokio::test]
#[ignore]
async fn llmsim_responses_sse_and_websocket() {
    let t = target(ApiFlavour::Responses);
    let recs = conversation(&t, TransportKind::HttpPooled, 2).await;
    recs.iter().for_each(check);
    let recs = conversation(&t, TransportKind::Ws, 3).await;
    recs.iter().for_each(check);
    assert!(recs[0].ws_upgrade_ns.is_some());
    assert!(recs[1..]
        .iter()
        .all(|r| r.connection_reused && r.ws_upgrade_ns.is_none()));
    assert_eq!(recs[2].chaining, Chaining::PreviousResponseId);
}
