//! Test support shared by both test binaries, `tests/integration` and `tests/timing`: each
//! includes this module once at its root (`#[path = "../support/mod.rs"] mod support;`).
//!
//! * `run`: `spark-bench run` through the library: scenario files, `run_lib`, a run's records.
//! * `binary`: the real `spark-bench` binary with a time limit, its output, its results as
//!   plain CSV (only `tests/integration` uses it).
//! * `sim_client`: a plain HTTP/WebSocket client for the simulator, independent of
//!   spark-bench's own transport, and the lock that keeps timing tests from overlapping.
//!
//! An item only one binary uses says so with a targeted `#[allow(dead_code)]` and the reason.

// Only tests/integration runs the binary; the timing tests measure through the library.
#[allow(dead_code)]
pub mod binary;
pub mod run;
pub mod sim_client;
