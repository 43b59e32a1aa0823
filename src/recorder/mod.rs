//! Measurement: request records ([`crate::vocab::RequestRecord`]) in, HdrHistograms and summaries out. Pure: no clocks, no I/O.
//!
//! * [`metrics`]: the metric catalogue (names, units, sample extraction).
//! * [`histograms`]: the [`Recorder`]: one histogram per metric × cell, counters, merge.
//! * [`summary`]: percentiles in natural units, "vs http" changes, the terminal table.
//! * [`harness`]: could the harness have been the bottleneck? The run's `harness` section
//!   and its verdict.
//! * [`busy`]: a cell's busy time (the union of its requests' intervals), bounded.
//! * [`attribution`]: each cell's TTFT and TPOT split into the server's part and the
//!   transport's, and the sentences that say whose a "vs http" difference is.
//! * [`timeline`]: the bounded per-cell sample of one session's full records, for reports.
//! * [`buffering`]: does a cell's stream arrive in bursts its server's cadence does not
//!   explain (a buffering proxy)? The per-request rule, the cell's verdict and its warning.
//! * [`stalls`]: stall windows (every stream silent together), for `stalls.json`, the
//!   report and the gate.
//! * [`sweep`]: a sweep's load points folded into curves, the knee, the sweep table.

pub mod attribution;
pub mod buffering;
pub mod busy;
pub mod harness;
pub mod histograms;
pub mod metrics;
pub mod stalls;
pub mod summary;
pub mod sweep;
pub mod timeline;

pub use attribution::*;
pub use histograms::*;
pub use metrics::*;
pub use summary::*;
pub use timeline::*;
