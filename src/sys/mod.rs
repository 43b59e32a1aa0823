//! The operating system, called: every `libc` call of the crate, each behind a thin safe
//! wrapper (Linux only: the crate builds for nothing else, see `lib.rs`).
//!
//! Owns: every `unsafe` call into the C library, with its SAFETY note, and the C types and
//! constants those calls take (socket options, control messages, `rlimit`, `sched_param`).
//! Callers get Rust types: descriptors, `io::Result`, `Duration`, `bool`.
//! Does not own: what a call is for: which socket to stamp, when to raise a limit, which
//! thread to make real-time (the callers: [`crate::clock`], [`crate::transport`],
//! [`crate::priority`], [`crate::runner`], [`crate::sim`], [`crate::commands`]). Imports
//! nothing of ours.
//!
//! * [`time`]: the process's CPU time and the kernel's NTP error estimate (raw calls: only
//!   `clock` may use them, `tests/integration/architecture.rs` checks it).
//! * [`stamp`]: the kernel's socket timestamps: receive (`SO_TIMESTAMPNS`) and transmit
//!   (`SO_TIMESTAMPING`), read with `recvmsg` and its control-message walk.
//! * [`socket`]: a non-blocking connect, a socket's pending error, descriptor duplicates,
//!   `MSG_PEEK`, `TCP_INFO`, a non-blocking `sendmsg`.
//! * [`sched`]: thread scheduling policies (`SCHED_FIFO`) and the timer slack.
//! * [`rlimit`]: the open-file limit.
//! * [`errno`] and [`fs`]: the C constants callers compare against or pass through.

pub mod errno;
pub mod fs;
pub mod rlimit;
pub mod sched;
pub mod socket;
pub mod stamp;
pub mod time;
