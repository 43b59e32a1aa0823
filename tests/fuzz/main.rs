//! Fuzzing and property tests of every parser that reads bytes we did not write: the SSE
//! framer, the WebSocket frame and event decoders, the chat/responses event parsers, the
//! HTTP byte log, the scenario loader, the `--link` / duration parsers, the results
//! readers (`requests.csv` rows, `history.jsonl`, `manifest.json`) and what a client sends
//! `spark-bench record`'s proxy.
//!
//! Each test replays the target's corpus (`fuzz/corpus/<target>/`), then generates and
//! mutates inputs for `SPARK_FUZZ_SECS` seconds (default 0.5 under plain `cargo test`;
//! `.ci/steps/40-fuzz.sh` gives each 5 s). The long run and how to replay a saved crash:
//! `fuzz/README.md`.

mod bytelog;
mod config;
mod decode;
mod engine;
mod readers;
mod record;
mod wire;

macro_rules! target_test {
    ($name:ident, $target:expr) => {
        #[test]
        fn $name() {
            let t = $target;
            if !engine::replay(&t) {
                engine::fuzz(&t);
            }
        }
    };
}

target_test!(sse, wire::SSE);
target_test!(ws, wire::WS);
target_test!(chat, decode::CHAT);
target_test!(responses, decode::RESPONSES);
target_test!(bytelog_h1, bytelog::H1);
target_test!(bytelog_h2, bytelog::H2);
target_test!(scenario, config::SCENARIO);
target_test!(link, config::LINK);
target_test!(duration, config::DURATION);
target_test!(csv_rows, readers::CSV_ROWS);
target_test!(jsonl, readers::JSONL);
target_test!(manifest, readers::MANIFEST);
target_test!(record, record::RECORD);
