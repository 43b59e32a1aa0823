//! Simulator configuration: [`SimConfig`] (profile, seed, server-side link, TLS, WebSocket
//! limits, transmit stamps) and the WebSocket [`BusyPolicy`]. Data only.

use std::time::Duration;

use super::profile::Profile;
use crate::link::Link;
use crate::tls::SelfSigned;

/// What a WebSocket connection does with a `response.create` sent while one is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BusyPolicy {
    /// Run it after the current one (OpenAI's documented behaviour).
    #[default]
    Queue,
    /// Answer with the error envelope `response_already_in_flight` (status 409), as LocalAI
    /// and the ai-stats gateway do.
    Reject,
}

/// Simulator configuration.
#[derive(Clone)]
pub struct SimConfig {
    /// Timing model.
    pub profile: Profile,
    /// Seed for every random draw (with the request content).
    pub seed: u64,
    /// Server-side link emulation applied to every accepted socket (usually none).
    pub link: Link,
    /// WebSocket connection lifetime before `websocket_connection_limit_reached`.
    pub ws_lifetime: Duration,
    /// WebSocket one-in-flight policy.
    pub ws_busy_policy: BusyPolicy,
    /// Serve HTTPS/WSS with this certificate.
    pub tls: Option<SelfSigned>,
    /// Ground-truth write times from the kernel's transmit stamps (Linux; ignored with a
    /// server-side link). Costs one extra `recvmsg` per write.
    pub tx_stamps: bool,
}

impl SimConfig {
    /// Defaults: seed 1, no link, 60-minute WebSocket lifetime, queueing, no TLS, kernel
    /// transmit stamps on.
    pub fn new(profile: Profile) -> Self {
        SimConfig {
            profile,
            seed: 1,
            link: Link::default(),
            ws_lifetime: Duration::from_secs(60 * 60),
            ws_busy_policy: BusyPolicy::Queue,
            tls: None,
            tx_stamps: true,
        }
    }
}
