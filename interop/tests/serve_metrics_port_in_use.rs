//! `tidelog serve --metrics-listen` on an address already in use fails with a message
//! naming it, before it creates the data directory; a malformed address is refused too.

mod serve_support;

use std::net::TcpListener;

use serve_support::run_to_exit;

/// Runs `tidelog --data DATA serve --listen 127.0.0.1:0 --metrics-listen METRICS`;
/// returns its exit code and stderr.
fn serve(data: &std::path::Path, metrics: &str) -> (Option<i32>, String) {
    run_to_exit(
        data,
        &["--listen", "127.0.0.1:0", "--metrics-listen", metrics],
    )
}

#[test]
fn a_held_or_malformed_metrics_address_fails_before_the_data_directory_is_made() {
    let tmp = tempfile::tempdir().unwrap();
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let data = tmp.path().join("data");

    let (code, stderr) = serve(&data, &addr);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: cannot listen for metrics on {addr}: ")),
        "{stderr}"
    );

    let (code, stderr) = serve(&data, "localhost-ish");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr
            .starts_with("error: --metrics-listen \"localhost-ish\" is not an IP address and port"),
        "{stderr}"
    );
    assert!(!data.exists(), "the data directory was created");
}
