//! The single integration-test binary.

mod client_peer;
