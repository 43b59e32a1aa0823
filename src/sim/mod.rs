//! The embedded simulator: a deterministic, seeded, OpenAI-compatible streaming server.
//!
//! It is the offline default target of `spark-bench run`, the target of every test, and the
//! ground truth the harness is judged against: it records the instant each content chunk was
//! handed to the connection. Imports no client code.
//!
//! A request goes down this list (each layer imports only the ones below it):
//!
//! * `server`: the accept loop, per-connection state, [`serve`], [`spawn`], [`SimHandle`].
//! * `router`: one hyper service per connection; method + path → an API handler; every
//!   handler's error becomes a response here.
//! * `api`: the APIs' semantics: `chat` (Chat Completions), `responses` (the Responses API
//!   over HTTP and its event encoder), `ws` (the Responses WebSocket mode).
//! * `wire`: what every handler shares: the request context and common headers, the one
//!   error type (`ApiError`, as an HTTP response or a WebSocket envelope), JSON field
//!   readers and the SSE body.
//! * The engine below them: `model` (schedule + runner), `profile` (timing parameters),
//!   `text`/`corpus` (tokenizer and output text), `fault` (fault injection), `trace` (ground
//!   truth), `crate::clock::tx` (kernel transmit stamps); `config` ([`SimConfig`]) is data.

mod api;
mod config;
mod corpus;
mod fault;
mod model;
mod profile;
mod router;
mod server;
pub mod text;
mod trace;
mod wire;

pub use config::{BusyPolicy, SimConfig};
pub use fault::Fault;
pub use profile::{ChatTiming, FaultRates, Profile};
pub use server::{serve, spawn, SimHandle};
pub use trace::{ChunkWrite, ResponseTrace, Trace};
