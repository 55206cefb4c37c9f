//! `tidelog configs` (as kafka-configs --entity-type clients|users) on a stopped single
//! node's data directory: quotas set, listed, removed, and bad input refused by name.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;
use cli_support::{err, ok, tidelog};

#[test]
fn configs_sets_lists_and_removes_client_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let t = |args: &[&str]| tidelog(&data, args, "");
    ok(t(&["topics", "create", "events"]));
    ok(t(&[
        "configs",
        "--alter",
        "--add-config",
        "producer_byte_rate=1048576,request_percentage=50",
        "--entity-type",
        "clients",
        "--entity-name",
        "ingest",
    ]));
    ok(t(&[
        "configs",
        "--alter",
        "--add-config",
        "consumer_byte_rate=2048",
        "--user",
        "alice",
        "--client-defaults",
    ]));
    let all = ok(t(&["configs", "--describe"]));
    assert!(
        all.contains(
            "Quota configs for client-id 'ingest' are producer_byte_rate=1048576, request_percentage=50"
        ),
        "{all}"
    );
    assert!(
        all.contains(
            "Quota configs for user-principal 'alice', the default client-id are consumer_byte_rate=2048"
        ),
        "{all}"
    );
    let users = ok(t(&["configs", "--describe", "--entity-type", "users"]));
    assert!(!users.contains("ingest"), "{users}");
    ok(t(&[
        "configs",
        "--alter",
        "--delete-config",
        "request_percentage",
        "--entity-type",
        "clients",
        "--entity-name",
        "ingest",
    ]));
    let clients = ok(t(&["configs", "--describe", "--entity-type", "clients"]));
    assert!(
        clients.contains("client-id 'ingest' are producer_byte_rate=1048576\n"),
        "{clients}"
    );
    err(
        t(&[
            "configs",
            "--alter",
            "--add-config",
            "producer_bytes_rate=1",
            "--entity-type",
            "clients",
            "--entity-name",
            "ingest",
        ]),
        1,
        "producer_bytes_rate",
    );
    err(
        t(&[
            "configs",
            "--alter",
            "--add-config",
            "producer_byte_rate=0",
            "--entity-type",
            "clients",
            "--entity-default",
        ]),
        1,
        "above 0",
    );
}
