//! `tidelog serve --quorum-security-protocol ...` misconfigured: each mistake is one
//! `error: ...` line naming the flag (and the file, for a file that cannot be used),
//! exit code 1, never a panic. The flag combinations are refused before the data
//! directory is created.

mod quorum_ssl_support;
mod serve_support;

use std::path::Path;

use quorum_ssl_support::Pki;
use serve_support::run_to_exit;
use tidelog_interop::cluster::free_ports;

/// Runs a one-node cluster's `serve` with `extra` on `data`; asserts it fails with one
/// error line containing every one of `needles`.
fn refused(data: &Path, extra: &[&str], needles: &[&str]) {
    let quorum = format!("1@127.0.0.1:{}", free_ports(1)[0]);
    let mut args = vec![
        "--listen",
        "127.0.0.1:0",
        "--node-id",
        "1",
        "--quorum",
        &quorum,
    ];
    args.extend_from_slice(extra);
    let (code, stderr) = run_to_exit(data, &args);
    assert_eq!(code, Some(1), "{extra:?}: {stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("{extra:?}: no error line: {stderr}"));
    for n in needles {
        assert!(line.contains(n), "{extra:?}: {n:?} not in {line:?}");
    }
    assert!(
        !stderr.contains("panicked") && !stderr.contains("internal error"),
        "{extra:?}: {stderr}"
    );
}

#[test]
fn quorum_ssl_misconfigurations_name_the_flag_and_the_file() {
    let pki = Pki::new(2);
    let tmp = tempfile::tempdir().unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (ca, cert, key) = (s(&pki.ca), s(&pki.nodes[0].cert), s(&pki.nodes[0].key));
    let other_key = s(&pki.nodes[1].key);
    let missing = s(&tmp.path().join("missing-ca.pem"));
    let junk = tmp.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let junk = s(&junk);

    // Flag combinations: refused before the data directory exists.
    let data = tmp.path().join("data");
    for (extra, needles) in [
        (
            vec!["--quorum-security-protocol", "TLS"],
            vec!["--quorum-security-protocol", "\"TLS\"", "PLAINTEXT or SSL"],
        ),
        (
            vec!["--quorum-security-protocol", "SASL_SSL"],
            vec!["--quorum-security-protocol SASL_SSL", "PLAINTEXT or SSL"],
        ),
        (
            vec![
                "--quorum-security-protocol",
                "SSL",
                "--tls-cert",
                &cert,
                "--tls-key",
                &key,
            ],
            vec!["--quorum-ssl-ca-location"],
        ),
        (
            vec![
                "--quorum-security-protocol",
                "ssl",
                "--quorum-ssl-ca-location",
                &ca,
            ],
            vec!["--quorum-security-protocol SSL", "--tls-cert"],
        ),
        (
            vec!["--quorum-ssl-ca-location", &ca],
            vec![
                "--quorum-ssl-ca-location",
                "ca.pem",
                "--quorum-security-protocol SSL",
            ],
        ),
    ] {
        refused(&data, &extra, &needles);
        assert!(!data.exists(), "{extra:?} created the data directory");
    }

    // Files that cannot be used: the setting and the file are named.
    let ssl = |extra: &[&str]| {
        let mut a = vec!["--quorum-security-protocol", "SSL"];
        a.extend_from_slice(extra);
        a.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    for (i, (extra, needles)) in [
        (
            ssl(&[
                "--tls-cert",
                &cert,
                "--tls-key",
                &key,
                "--quorum-ssl-ca-location",
                &missing,
            ]),
            vec!["quorum-ssl-ca-location", "missing-ca.pem"],
        ),
        (
            ssl(&[
                "--tls-cert",
                &cert,
                "--tls-key",
                &key,
                "--quorum-ssl-ca-location",
                &junk,
            ]),
            vec!["quorum-ssl-ca-location", "junk.pem"],
        ),
        (
            ssl(&[
                "--tls-cert",
                &missing,
                "--tls-key",
                &key,
                "--quorum-ssl-ca-location",
                &ca,
            ]),
            vec!["tls-cert", "missing-ca.pem"],
        ),
        (
            ssl(&[
                "--tls-cert",
                &cert,
                "--tls-key",
                &junk,
                "--quorum-ssl-ca-location",
                &ca,
            ]),
            vec!["tls-key", "junk.pem"],
        ),
        (
            ssl(&[
                "--tls-cert",
                &cert,
                "--tls-key",
                &other_key,
                "--quorum-ssl-ca-location",
                &ca,
            ]),
            vec!["tls-key", "node-2.key", "node-1.pem"],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        refused(&tmp.path().join(format!("data-{i}")), &extra, &needles);
    }
}
