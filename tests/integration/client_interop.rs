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
use spark_bench::vocab::{
    ApiFlavour, Chaining, OutcomeKind, RequestKind, RequestRecord, TransportKind,
};

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

/// `turns` user turns on one session, after a `generate:false` warm-up when `warmup`.
async fn conversation(
    t: &Target,
    kind: TransportKind,
    turns: u32,
    warmup: bool,
) -> Vec<RequestRecord> {
    let clock = Clock::start();
    let c =
        Arc::new(Connector::new(t, kind, Trust::PublicRoots, Link::default(), clock, 1).unwrap());
    let mut s = c.session();
    let mut conv = Conversation::new("You are terse.", t.api, kind, false);
    let mut recs = Vec::new();
    if warmup {
        let spec = RequestSpec {
            kind: RequestKind::Warmup,
            ..Default::default()
        };
        let meta = RecordMeta {
            intended_ns: clock.now_ns(),
            ..Default::default()
        };
        let cancel = CancellationToken::new();
        recs.push(
            exchange(&mut s, t, &mut conv, &spec, &meta, &cancel)
                .await
                .0,
        );
    }
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
        let recs = conversation(&t, kind, 2, false).await;
        recs.iter().for_each(check);
        assert_eq!(recs[1].connection_reused, kind == TransportKind::HttpPooled);
    }
}

#[tokio::test]
#[ignore]
async fn llmsim_responses_sse_and_websocket() {
    let t = target(ApiFlavour::Responses);
    let recs = conversation(&t, TransportKind::HttpPooled, 2, false).await;
    recs.iter().for_each(check);
    let recs = conversation(&t, TransportKind::Ws, 3, false).await;
    recs.iter().for_each(check);
    assert!(recs[0].ws_upgrade_ns.is_some());
    assert!(recs[1..]
        .iter()
        .all(|r| r.connection_reused && r.ws_upgrade_ns.is_none()));
    assert_eq!(recs[2].chaining, Chaining::PreviousResponseId);
}

/// llmsim 0.6 answers a `generate:false` warm-up with one `response.created` whose response
/// is already `completed`, and no `response.completed`: the warm-up ends there, well inside
/// the stall timeout (it used to wait the stall timeout out). llmsim does not keep the
/// warm-up's response, so the turn chained from it (as OpenAI's guide has it) gets llmsim's
/// `previous_response_not_found`, named, on the same socket, and the record says to set
/// `ws_warmup = false`; the turn after it resends the history and runs.
#[tokio::test]
#[ignore]
async fn llmsim_websocket_warmup() {
    let t = target(ApiFlavour::Responses);
    let recs = conversation(&t, TransportKind::Ws, 2, true).await;
    let warm = &recs[0];
    assert_eq!(
        (warm.kind, warm.outcome),
        (RequestKind::Warmup, OutcomeKind::Ok),
        "{warm:?}"
    );
    assert!(
        warm.chunks.is_empty() && warm.output_tokens == 0,
        "{warm:?}"
    );
    // It ended on its one frame, not on a timer.
    assert_eq!(warm.end_ns, warm.first_event_ns, "{warm:?}");
    let chained = &recs[1];
    assert_eq!(chained.chaining, Chaining::PreviousResponseId);
    assert_eq!(chained.outcome, OutcomeKind::ServerError, "{chained:?}");
    let why = chained.error.as_deref().unwrap_or_default();
    assert!(why.starts_with("previous_response_not_found"), "{why}");
    assert!(
        why.ends_with("set `ws_warmup = false` in the target)"),
        "{why}"
    );
    check(&recs[2]);
    assert!(recs[1..].iter().all(|r| r.connection_reused));
}
