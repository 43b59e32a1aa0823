//! Report tests on synthetic runs written through the real store.

use super::*;

#[test]
fn renders_every_format_for_one_run() {
    let tmp = testkit::tempdir().unwrap();
    let dir = fixture::synthetic_run(tmp.path(), 96, 7).unwrap();
    let written = render_run(&dir).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    assert!(names.contains(&"report.md".to_string()), "{names:?}");
    assert!(names.contains(&"report.html".to_string()));
    assert!(names.contains(&"charts/ttft_cdf.svg".to_string()));
    assert!(names.contains(&"charts/timeline.png".to_string()));
    for p in &written {
        assert!(std::fs::metadata(p).unwrap().len() > 100, "{}", p.display());
    }
}
