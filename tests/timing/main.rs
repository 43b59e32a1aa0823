//! Timing-sensitive tests against the simulator's ground truth, in a test binary of their
//! own: cargo runs test binaries one after another, so nothing else in the suite competes
//! for the machine's two cores while these measure microseconds. Within the binary they
//! take one lock each, so they also never overlap each other.

#[path = "../support/mod.rs"]
mod support;

mod accuracy;
mod client_sim;
mod compare_sim;
mod harness_bound;
mod late_reader;
mod realtime;
mod run_link;
mod sim_link;
mod sim_rates;
