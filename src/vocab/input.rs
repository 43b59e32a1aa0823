//! Bounded reading of input files: every reader of a results file, a history file or a
//! dataset goes through here, so a hostile or broken file (endless, newline-free, zero-filled,
//! a FIFO, a directory) ends in an error naming the file, the line and the reason, within a
//! bounded memory and time.
//!
//! Owns: the bounds on what is read from a file ([`MAX_LINE_BYTES`], [`MAX_WHOLE_FILE_BYTES`]),
//! the check that a path is a regular file, and [`Lines`], the `Read` wrapper that enforces
//! the line bound and refuses NUL bytes.
//! Does not own: parsing (CSV, JSON and JSONL are parsed by their readers) or the error types
//! of those readers (they wrap [`std::io::Error`], whose inner error is an [`InputError`]).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The longest line any input file may have (1 MiB): a `requests.csv` row is a few hundred
/// bytes (its error text is cut at 512), a JSONL dataset line a few KiB.
pub const MAX_LINE_BYTES: u64 = 1 << 20;

/// The largest file read whole (32 MiB): `manifest.json`, `summary.json`, `timeline.json`,
/// `stalls.json`, histogram logs, `history.jsonl`. What spark-bench writes is far smaller
/// (sessions are generated on demand, the timeline is a bounded sample).
pub const MAX_WHOLE_FILE_BYTES: u64 = 32 << 20;

/// Why an input file was refused: the line (1-based) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The line the reader was on (0 when the file as a whole was refused).
    pub line: u64,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: {}", self.line, self.reason)
        } else {
            f.write_str(&self.reason)
        }
    }
}

impl std::error::Error for InputError {}

impl InputError {
    fn io(line: u64, reason: String) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, InputError { line, reason })
    }

    /// The [`InputError`] inside `e`, if this module made it.
    pub fn of(e: &io::Error) -> Option<&InputError> {
        e.get_ref()?.downcast_ref::<InputError>()
    }
}

/// Opens `path` for reading if it is a regular file (following symbolic links). A directory,
/// FIFO, socket or device is refused before it is opened (opening a FIFO would wait for a
/// writer; reading a device may never end), and a symlink loop or missing file gives the OS's
/// reason. Returns the file and its size at open.
pub fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    let meta = std::fs::metadata(path)?;
    let ft = meta.file_type();
    if !ft.is_file() {
        use std::os::unix::fs::FileTypeExt as _;
        let what = if ft.is_dir() {
            "a directory"
        } else if ft.is_fifo() {
            "a FIFO (named pipe)"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_block_device() || ft.is_char_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(InputError::io(
            0,
            format!("{what}, not a regular file: spark-bench reads only regular files"),
        ));
    }
    let f = File::open(path)?;
    Ok((f, meta.len()))
}

/// Opens `path` as [`open_regular`] does and wraps it in [`Lines`]: no more than the file's
/// size at open is read (a file that grows while it is read ends where it was), no line
/// longer than [`MAX_LINE_BYTES`], no NUL byte.
pub fn open_lines(path: &Path) -> io::Result<Lines<io::Take<File>>> {
    let (f, len) = open_regular(path)?;
    Ok(Lines::new(f.take(len)))
}

/// Reads a whole file of at most `max` bytes (a regular file; NUL bytes refused).
pub fn read_bounded(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let (f, len) = open_regular(path)?;
    let too_big = |n: u64| {
        InputError::io(
            0,
            format!("{n} bytes or more, over the {max}-byte limit for this file"),
        )
    };
    if len > max {
        return Err(too_big(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // NUL bytes refused as they arrive; no line bound (a JSON string may be long).
    Lines::with_max_line(f.take(max + 1), u64::MAX).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Reads a whole text file of at most `max` bytes as UTF-8 (see [`read_bounded`]).
pub fn read_text(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read_bounded(path, max)?)
        .map_err(|e| InputError::io(0, format!("not UTF-8 text: {e}")))
}

fn nul_reason() -> String {
    "a NUL byte: not a text file spark-bench wrote (zero-filled, or binary)".to_string()
}

/// A reader that counts lines as bytes pass and fails with an [`InputError`] on a line longer
/// than [`MAX_LINE_BYTES`] or a NUL byte.
pub struct Lines<R> {
    inner: R,
    line: u64,
    in_line: u64,
    max_line: u64,
    /// The error this reader failed with: every later read fails with it again.
    failed: Option<InputError>,
}

impl<R: Read> Lines<R> {
    /// Wraps `inner` with the default line bound.
    pub fn new(inner: R) -> Self {
        Self::with_max_line(inner, MAX_LINE_BYTES)
    }

    /// Wraps `inner` with a line bound of `max_line` bytes.
    pub fn with_max_line(inner: R, max_line: u64) -> Self {
        Lines {
            inner,
            line: 1,
            in_line: 0,
            max_line,
            failed: None,
        }
    }
}

impl<R: Read> Read for Lines<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = &self.failed {
            return Err(InputError::io(e.line, e.reason.clone()));
        }
        let r = self.scan(buf);
        if let Err(e) = &r {
            self.failed = InputError::of(e).cloned();
        }
        r
    }
}

impl<R: Read> Lines<R> {
    fn scan(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut rest = &buf[..n];
        if let Some(at) = memchr::memchr(0, rest) {
            let line = self.line + memchr::memchr_iter(b'\n', &rest[..at]).count() as u64;
            return Err(InputError::io(line, nul_reason()));
        }
        while !rest.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    if self.in_line.saturating_add(i as u64) > self.max_line {
                        break;
                    }
                    self.line += 1;
                    self.in_line = 0;
                    rest = &rest[i + 1..];
                }
                None => {
                    self.in_line = self.in_line.saturating_add(rest.len() as u64);
                    rest = &[];
                }
            }
        }
        if self.in_line > self.max_line || !rest.is_empty() {
            return Err(InputError::io(
                self.line,
                format!(
                    "a line longer than {} bytes (no line end within the limit): not a file spark-bench wrote",
                    self.max_line
                ),
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(data: &[u8], max: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Lines::with_max_line(data, max).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn lines_within_the_bound_pass_whole() {
        let data = b"abc\nde\n\nfghij";
        assert_eq!(read_all(data, 5).unwrap(), data);
    }

    #[test]
    fn a_long_line_is_refused_at_its_line() {
        let e = read_all(b"ab\ncd\nefghijk\n", 5).unwrap_err();
        let ie = InputError::of(&e).unwrap();
        assert_eq!(ie.line, 3, "{ie}");
        assert!(ie.reason.contains("longer than 5 bytes"), "{ie}");
    }

    #[test]
    fn a_nul_byte_is_refused_at_its_line() {
        let e = read_all(b"a\nb\nc\0", 100).unwrap_err();
        assert_eq!(InputError::of(&e).unwrap().line, 3);
    }

    #[test]
    fn an_endless_reader_stops_at_the_bound() {
        let e = read_all_endless();
        assert!(InputError::of(&e).is_some(), "{e}");
    }

    fn read_all_endless() -> io::Error {
        let mut out = Vec::new();
        Lines::new(io::repeat(b'x'))
            .read_to_end(&mut out)
            .unwrap_err()
    }

    #[test]
    fn non_regular_files_are_refused_with_what_they_are() {
        let dir = testkit::tempdir().unwrap();
        let e = open_regular(dir.path()).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let e = open_regular(&a).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(40), "ELOOP: {e}");
        let big = dir.path().join("big.json");
        std::fs::write(&big, b"{\"a\": 1}").unwrap();
        assert!(read_bounded(&big, 8).is_ok());
        let e = read_bounded(&big, 7).unwrap_err();
        assert!(e.to_string().contains("over the 7-byte limit"), "{e}");
    }
}
