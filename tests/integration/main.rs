//! The single integration-test binary.

mod client_interop;
mod client_peer;
