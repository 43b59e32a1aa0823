//! `testkit::tempdir` (the tests' temporary directories, in place of `tempfile`): each
//! directory is new and empty, and it is removed with its contents when dropped.

#[test]
fn each_is_new_and_empty_and_removed_on_drop() {
    let a = testkit::tempdir().unwrap();
    let b = testkit::tempdir().unwrap();
    assert_ne!(a.path(), b.path());
    assert!(a.path().starts_with(std::env::temp_dir()));
    assert_eq!(std::fs::read_dir(a.path()).unwrap().count(), 0);
    std::fs::create_dir(a.path().join("sub")).unwrap();
    std::fs::write(a.path().join("sub/f"), b"x").unwrap();
    let gone = a.path().to_path_buf();
    drop(a);
    assert!(!gone.exists());
    assert!(b.path().is_dir());
}
