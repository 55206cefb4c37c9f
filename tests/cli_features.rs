//! `tidelog features` against a cluster of three `tidelog serve` child processes, as
//! kafka-features: a new cluster describes `transaction.version` finalized at 2; a lower
//! level through `upgrade` is refused; `downgrade --dry-run` changes nothing;
//! `downgrade` and `upgrade` move the level; a bad `--feature` is one `error:` line.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{Run, err, loopback_quorum, ok, run_until, serve_nodes, stop_all, tidelog_raw};

/// Runs `args` until its stdout contains `needle` (at most 60 s); that stdout.
fn until(args: &[&str], needle: &str) -> String {
    run_until(args, |r: &Run| r.code == 0 && r.stdout.contains(needle)).stdout
}

#[test]
fn features_describe_downgrade_and_upgrade_transaction_version() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    let (nodes, bootstrap) = serve_nodes(root.path(), &quorum, &["1", "2", "3"]);
    let describe = ["features", "describe", "--bootstrap", &bootstrap];
    let out = until(&describe, "FinalizedVersionLevel: 2");
    assert!(
        out.contains(
            "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2\tEpoch: "
        ),
        "{out}"
    );
    let feature = |cmd: &str, level: &str, extra: &[&str]| {
        let mut args = vec![
            "features",
            cmd,
            "--feature",
            level,
            "--bootstrap",
            bootstrap.as_str(),
        ];
        args.extend_from_slice(extra);
        tidelog_raw(&args, "")
    };
    // A lower level is a downgrade.
    err(
        feature("upgrade", "transaction.version=1", &[]),
        1,
        "INVALID_UPDATE_VERSION",
    );
    let out = ok(feature(
        "downgrade",
        "transaction.version=1",
        &["--dry-run"],
    ));
    assert_eq!(out.trim(), "transaction.version can be downgraded to 1.");
    assert!(ok(tidelog_raw(&describe, "")).contains("FinalizedVersionLevel: 2"));
    let out = ok(feature("downgrade", "transaction.version=1", &[]));
    assert_eq!(out.trim(), "transaction.version was downgraded to 1.");
    until(&describe, "FinalizedVersionLevel: 1");
    // A higher level is an upgrade, not a downgrade.
    err(
        feature("downgrade", "transaction.version=2", &[]),
        1,
        "Can't downgrade to a newer version",
    );
    let out = ok(feature("upgrade", "transaction.version=2", &[]));
    assert_eq!(out.trim(), "transaction.version was upgraded to 2.");
    until(&describe, "FinalizedVersionLevel: 2");
    err(
        feature("upgrade", "transaction.version", &[]),
        1,
        "NAME=LEVEL",
    );
    stop_all(nodes);
}
