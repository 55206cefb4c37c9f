//! `tidelog topics alter --config` changes a topic's settings durably: the registry
//! keeps them across a restart and the partition logs apply them.
// Reaches into the partition's log (`Partition::log`, a `testing` feature hook).
#![cfg(feature = "testing")]

mod cli_support;
use cli_support::{err, ok, tidelog};

#[test]
fn alter_config_persists_and_applies() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let t = |args: &[&str]| tidelog(&data, args, "");
    ok(t(&[
        "topics",
        "create",
        "a",
        "--partitions",
        "2",
        "--config",
        "retention.ms=60000",
    ]));
    ok(t(&[
        "topics",
        "alter",
        "a",
        "--config",
        "retention.bytes=1048576",
        "--config",
        "cleanup.policy=compact",
    ]));
    err(
        t(&["topics", "alter", "a", "--config", "nonsense.key=1"]),
        1,
        "nonsense.key",
    );

    // Reopen through the library: the registry and every partition see the new settings.
    let broker = tidelog::Broker::open(&data).unwrap();
    let topic = broker.topic("a").unwrap();
    let cfg = topic.config();
    assert_eq!(
        cfg.get("retention.ms"),
        Some("60000"),
        "earlier override kept"
    );
    assert_eq!(cfg.get("retention.bytes"), Some("1048576"));
    assert_eq!(cfg.get("cleanup.policy"), Some("compact"));
    assert_eq!(
        cfg.get("nonsense.key"),
        None,
        "a refused change left nothing behind"
    );
    for p in 0..2 {
        let log = topic.partition(p).unwrap().log().config();
        assert_eq!(log.retention_bytes, Some(1 << 20));
        assert_eq!(log.retention_ms, Some(60_000));
        assert_eq!(log.cleanup_policy, tidelog::CleanupPolicy::Compact);
    }
    broker.close().unwrap();
}
