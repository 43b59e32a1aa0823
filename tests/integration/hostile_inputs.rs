//! Hostile input files: a results directory whose CSV files are endless (a FIFO a writer
//! fills forever), newline-free, zero-filled (a huge sparse file), a directory or a symlink
//! loop. `report`, `compare` and `merge` must each exit 2 within 5 s under 100 MB peak RSS
//! (measured by `/usr/bin/time -v`), naming the file and the reason. The files are made here
//! with the standard library, a shell and Python, nothing of `src/sim`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::binary::{only_run, run_bin, texts};

/// A child process killed when the test ends (the FIFO's endless writer).
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One small shard run (`--shard 0/1`, so `merge` takes it too), made once per test.
async fn good_run(tmp: &Path) -> PathBuf {
    let out = tmp.join("good");
    let out_s = out.to_string_lossy().into_owned();
    let args = [
        "run",
        "scenarios/smoke.toml",
        "--sessions",
        "2",
        "--concurrency",
        "2",
        "--shard",
        "0/1",
        "--out",
        &out_s,
        "--quiet",
        "--no-report",
    ];
    let o = run_bin(&args, &[]).await;
    assert!(o.status.success(), "{:?}", texts(&o));
    only_run(&out)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// The ways a CSV file is made hostile.
#[derive(Debug, Clone, Copy)]
enum Hostile {
    /// A 4 GiB sparse file: zeros, no newline, no disk used.
    Sparse,
    /// 64 MiB of `x` without a newline.
    NoNewline,
    /// A FIFO that a writer fills with `x` forever.
    EndlessFifo,
    /// A directory where the file should be.
    Directory,
    /// A symbolic link that points at itself through a second one.
    SymlinkLoop,
}

/// Makes `dir/name` hostile; returns the writer to kill for a FIFO.
fn make_hostile(dir: &Path, name: &str, how: Hostile) -> Option<Kill> {
    let path = dir.join(name);
    std::fs::remove_file(&path).unwrap();
    match how {
        Hostile::Sparse => {
            let f = std::fs::File::create(&path).unwrap();
            f.set_len(4 << 30).unwrap();
        }
        Hostile::NoNewline => std::fs::write(&path, vec![b'x'; 64 << 20]).unwrap(),
        Hostile::EndlessFifo => {
            let ok = Command::new("mkfifo").arg(&path).status().unwrap();
            assert!(ok.success());
            // Opens the FIFO (blocking until a reader comes) and writes forever.
            let writer = Command::new("python3")
                .args([
                    "-c",
                    "import sys\nf = open(sys.argv[1], 'wb')\nwhile True: f.write(b'x' * 65536)",
                ])
                .arg(&path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            return Some(Kill(writer));
        }
        Hostile::Directory => std::fs::create_dir(&path).unwrap(),
        Hostile::SymlinkLoop => {
            let other = dir.join(format!("{name}.loop"));
            std::os::unix::fs::symlink(&other, &path).unwrap();
            std::os::unix::fs::symlink(&path, &other).unwrap();
        }
    }
    None
}

/// What one command did: exit code, wall time, peak RSS (KiB), stderr.
struct Outcome {
    code: i32,
    wall: Duration,
    rss_kib: u64,
    stderr: String,
}

/// Runs the spark-bench binary with `args` under `/usr/bin/time -v`, killed after 30 s.
fn measured(args: &[&str]) -> Outcome {
    let mut cmd = Command::new("/usr/bin/time");
    cmd.arg("-v")
        .arg(env!("CARGO_BIN_EXE_spark-bench"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let mut child = Kill(cmd.spawn().unwrap());
    let limit = Duration::from_secs(30);
    while child.0.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < limit,
            "spark-bench {args:?} ran past {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = t0.elapsed();
    let mut stderr = String::new();
    use std::io::Read as _;
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let field = |key: &str| -> Option<u64> {
        stderr
            .lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
    };
    Outcome {
        code: field("Exit status:").map_or(-1, |c| c as i32),
        rss_kib: field("Maximum resident set size (kbytes):").unwrap_or(u64::MAX),
        wall,
        stderr,
    }
}

/// `report`, `compare` and `merge` on a run whose `file` is made hostile `how`: each exits 2
/// within 5 s under 100 MB, naming the file; returns one line of figures per command.
fn every_reader_refuses(good: &Path, tmp: &Path, file: &str, how: Hostile) -> Vec<String> {
    let bad = tmp.join(format!("bad-{file}-{how:?}"));
    copy_dir(good, &bad);
    let _writer = make_hostile(&bad, file, how);
    let (good_s, bad_s) = (good.to_string_lossy(), bad.to_string_lossy());
    let rep = tmp.join(format!("rep-{file}-{how:?}"));
    let merged = tmp.join(format!("merged-{file}-{how:?}"));
    let (rep_s, merged_s) = (rep.to_string_lossy(), merged.to_string_lossy());
    let commands: [(&str, Vec<&str>); 3] = [
        ("report", vec!["report", &bad_s, "--out", &rep_s]),
        ("compare", vec!["compare", &good_s, &bad_s]),
        (
            "merge",
            vec!["merge", &bad_s, "--out", &merged_s, "--no-report"],
        ),
    ];
    let mut figures = Vec::new();
    for (name, args) in commands {
        let o = measured(&args);
        let what = format!("{name} with {file} {how:?}");
        figures.push(format!(
            "{what}: exit {}, {:.2} s, {:.1} MB peak RSS",
            o.code,
            o.wall.as_secs_f64(),
            o.rss_kib as f64 / 1024.0
        ));
        assert_eq!(o.code, 2, "{what}: exit {}\n{}", o.code, o.stderr);
        assert!(o.wall < Duration::from_secs(5), "{what}: {:?}", o.wall);
        assert!(o.rss_kib < 100 * 1024, "{what}: {} KiB", o.rss_kib);
        assert!(
            o.stderr.contains(file),
            "{what}: the file is not named:\n{}",
            o.stderr
        );
        assert!(!o.stderr.contains("panicked"), "{what}:\n{}", o.stderr);
    }
    figures
}

#[tokio::test]
async fn endless_newline_free_and_zero_filled_files_end_in_exit_2_under_100_mb() {
    let tmp = testkit::tempdir().unwrap();
    let good = good_run(tmp.path()).await;
    let mut figures = Vec::new();
    for (file, how) in [
        ("requests.csv", Hostile::Sparse),
        ("requests.csv", Hostile::NoNewline),
        ("requests.csv", Hostile::EndlessFifo),
        ("sessions.csv", Hostile::Sparse),
        ("chunks.csv", Hostile::NoNewline),
    ] {
        figures.extend(every_reader_refuses(&good, tmp.path(), file, how));
    }
    eprintln!("{}", figures.join("\n"));
}

#[tokio::test]
async fn an_unreadable_requests_csv_is_an_error_with_the_os_reason() {
    let tmp = testkit::tempdir().unwrap();
    let good = good_run(tmp.path()).await;
    for (how, reason) in [
        (Hostile::Directory, "a directory"),
        (Hostile::SymlinkLoop, "Too many levels of symbolic links"),
    ] {
        let bad = tmp.path().join(format!("bad-{how:?}"));
        copy_dir(&good, &bad);
        make_hostile(&bad, "requests.csv", how);
        let rep = tmp.path().join(format!("rep-{how:?}"));
        let o = measured(&[
            "report",
            &bad.to_string_lossy(),
            "--out",
            &rep.to_string_lossy(),
        ]);
        assert_eq!(o.code, 2, "{how:?}:\n{}", o.stderr);
        assert!(o.stderr.contains("requests.csv"), "{how:?}:\n{}", o.stderr);
        assert!(o.stderr.contains(reason), "{how:?}:\n{}", o.stderr);
        assert!(!o.stderr.contains("truncated"), "{how:?}:\n{}", o.stderr);
    }
}

#[tokio::test]
async fn a_bad_csv_row_is_named_by_its_line_and_column() {
    let tmp = testkit::tempdir().unwrap();
    let good = good_run(tmp.path()).await;
    let bad = tmp.path().join("bad");
    copy_dir(&good, &bad);
    // No summary: the rows are read (rebuilt) and a bad row in the middle is an error.
    std::fs::remove_file(bad.join("summary.json")).unwrap();
    let path = bad.join("requests.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(lines.len() >= 4, "{text}");
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = header.iter().position(|c| *c == "dispatch_ns").unwrap();
    let mut cells: Vec<String> = lines[2].split(',').map(str::to_string).collect();
    cells[col] = "not-a-number".into();
    lines[2] = cells.join(",");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let rep = tmp.path().join("rep");
    let o = measured(&[
        "report",
        &bad.to_string_lossy(),
        "--out",
        &rep.to_string_lossy(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("requests.csv: bad row at line 3, column \"dispatch_ns\""),
        "{}",
        o.stderr
    );
}
