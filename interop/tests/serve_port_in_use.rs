//! `tidelog serve` on an address already in use fails with a message naming it, before
//! it creates or locks the data directory.

mod serve_support;

use serve_support::{answers, run_to_exit, start};

#[test]
fn a_second_serve_on_a_held_port_fails_before_touching_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let first = start(&tmp.path().join("first"), &[], None);
    let addr = first.addr.to_string();

    let missing = tmp.path().join("missing");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for data in [&missing, &empty] {
        let (code, stderr) = run_to_exit(data, &["--listen", &addr]);
        assert_eq!(code, Some(1), "{stderr}");
        let line = stderr.trim_end();
        assert_eq!(line.lines().count(), 1, "{stderr}");
        assert!(
            line.starts_with(&format!("error: cannot listen on {addr}: ")),
            "{stderr}"
        );
        assert!(line.to_lowercase().contains("in use"), "{stderr}");
    }
    assert!(!missing.exists(), "the data directory was created");
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "the data directory was written to (locked or opened)"
    );
    // The first server is untouched.
    assert!(answers(first.addr));
    let (status, lines) = first.stop();
    assert!(status.success(), "{lines:?}");
}
