//! Temporary directories for spark-bench's tests, in place of the `tempfile` crate.
//!
//! Why a crate of our own: `tempfile` turns on `rustix`'s `fs` feature, which the shipped
//! binary's dependencies do not use. A dev-dependency that changes a normal dependency's
//! features makes `cargo test` and `cargo build` build the library twice (the CI steps
//! build the shipped binary right after the tests: ~3 CPU-minutes, docs/measurements.md,
//! "CI time"). This crate depends on nothing; `tests/integration/temp_dirs.rs` tests it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A directory removed, with everything in it, when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A new, empty directory under the system's temporary directory, named after this process,
/// a counter and the time; `create_dir` fails on a name already taken, and then the next
/// name is tried.
pub fn tempdir() -> io::Result<TempDir> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    let mut last = None;
    for _ in 0..100 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!(".sbtest-{}-{n}-{nanos:x}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(TempDir { path }),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary directory name")))
}
