//! The `errno` values callers tell apart (an `io::Error`'s `raw_os_error`).
//!
//! Owns: naming them once, for the few that `std::io::ErrorKind` does not name.
//! Does not own: what an error means to a caller (e.g. transport's
//! `is_local_exhaustion`, the simulator's accept warning).

/// Too many open files in this process.
pub const EMFILE: i32 = libc::EMFILE;
/// Too many open files on this machine.
pub const ENFILE: i32 = libc::ENFILE;
/// No local address (ephemeral port) left to bind.
pub const EADDRNOTAVAIL: i32 = libc::EADDRNOTAVAIL;
/// No buffer space left in the kernel.
pub const ENOBUFS: i32 = libc::ENOBUFS;
/// Out of memory.
pub const ENOMEM: i32 = libc::ENOMEM;
