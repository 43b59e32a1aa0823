//! The single integration-test binary.

mod architecture;
mod client_interop;
mod client_peer;
mod common;
mod compare_synthetic;
mod conn_lifecycle;
mod data;
mod llama;
mod load_schedule;
mod report;
mod run_e2e;
mod run_faults;
mod run_net;
mod run_provenance;
mod run_support;
mod sim_cli;
mod sim_client;
mod sim_faults;
mod sim_groups;
mod sim_wire;
mod sim_ws;
