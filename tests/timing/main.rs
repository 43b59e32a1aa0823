//! Timing-sensitive tests against the simulator's ground truth, in a test binary of their
//! own: cargo runs test binaries one after another, so nothing else in the suite competes
//! for the machine's two cores while these measure microseconds. Within the binary they
//! take one lock each, so they also never overlap each other.

#[allow(dead_code)]
#[path = "../integration/run_support.rs"]
mod run_support;
#[path = "../integration/sim_client.rs"]
mod sim_client;

mod accuracy;
mod client_sim;
mod compare_sim;
mod late_reader;
mod realtime;
mod run_link;
mod sim_link;
mod sim_rates;
