//! One integration-test binary: every test starts real servers on 127.0.0.1:0.

mod common;
mod data;
mod report;
mod sim_cli;
mod sim_client;
mod sim_faults;
mod sim_link;
mod sim_rates;
mod sim_wire;
mod sim_ws;
