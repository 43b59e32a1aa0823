//! File-system flags that `std` takes as raw integers.
//!
//! Owns: the `open` flags callers pass through `OpenOptionsExt::custom_flags`.
//! Does not own: opening anything (the callers use `std::fs`).

/// `O_NOFOLLOW`: fail rather than open through a symbolic link at the last component.
pub const O_NOFOLLOW: i32 = libc::O_NOFOLLOW;
