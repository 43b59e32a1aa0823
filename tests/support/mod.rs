//! Test support shared by both test binaries, `tests/integration` and `tests/timing`: each
//! includes this module once at its root (`#[path = "../support/mod.rs"] mod support;`).
//!
//! * `run`: `spark-bench run` through the library: scenario files, `run_lib`, a run's records.
//! * `sim_client`: a plain HTTP/WebSocket client for the simulator, independent of
//!   spark-bench's own transport, and the lock that keeps timing tests from overlapping.
//!
//! No blanket `dead_code` allowance: the few `sim_client` items that only one binary reads
//! carry a targeted `allow(dead_code)` naming it, and a helper module only one binary needs
//! lives in that binary (e.g. `tests/integration/binary.rs`, the real `spark-bench` binary,
//! which the timing tests never run).

pub mod run;
pub mod sim_client;
