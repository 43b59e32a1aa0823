//! The driver: runs a plan (sessions, concurrency, pacing, cancellation) and emits one
//! record per request. [`exchange`] is the one request the driver repeats.

pub mod exchange;
