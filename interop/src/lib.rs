//! Shared helpers of the interop tests (real Kafka clients and multi-node clusters
//! against tidelog). The tests themselves are in `tests/`, one scenario per file.

use std::path::PathBuf;

/// The `tidelog` binary built by `cargo test --workspace --all-features` (it sits in the
/// same target directory as the test executables), for tests that run nodes as child
/// processes.
///
/// # Panics
/// If the binary is not there: build it with `cargo build --features cli,server` or run
/// the tests with `cargo test --workspace --all-features`.
pub fn tidelog_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test executable");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/tidelog
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test executable in target/<profile>/deps");
    let bin = dir.join("tidelog");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --features cli,server` or run the tests \
         with `cargo test --workspace --all-features`",
        bin.display()
    );
    bin
}
