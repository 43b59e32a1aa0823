//! The single integration-test binary. Helpers shared with the `timing` binary are in
//! `tests/support`.

#[path = "../support/mod.rs"]
mod support;

mod architecture;
mod attribution;
mod binary;
mod buffering;
mod client_interop;
mod client_peer;
mod compare_synthetic;
mod conn_lifecycle;
mod connect_timeout;
mod data;
mod datasets;
mod equivalence;
mod harness;
mod hostile;
mod hostile_inputs;
mod llama;
mod load_rate;
mod load_schedule;
mod metrics_out;
mod one_line;
mod probe;
mod rates;
mod raw_head;
mod record_bounds;
mod record_proxy;
mod report;
mod run_e2e;
mod run_exit;
mod run_faults;
mod run_net;
mod run_provenance;
mod secret_matrix;
mod secrets;
mod shard_merge;
mod sim_cli;
mod sim_faults;
mod sim_groups;
mod sim_wire;
mod sim_ws;
mod survive;
mod sweep;
mod workload;
