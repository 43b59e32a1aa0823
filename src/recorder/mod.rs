//! Measurement: request records in, HdrHistograms and summaries out. Pure: no clocks, no I/O.

pub mod record;

pub use record::*;
