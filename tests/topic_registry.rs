//! The topic registry is a checksummed, crash-safe file: overrides survive a restart,
//! and a damaged registry is reported, never trusted.

use tidelog::{Broker, CleanupPolicy, Error, TopicConfig};

#[test]
fn overrides_survive_restart_and_damage_is_detected() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let broker = Broker::open(dir.path())?;
        broker.create_topic(
            "compacted",
            2,
            TopicConfig::new()
                .cleanup_policy(CleanupPolicy::Compact)
                .segment_bytes(1 << 20),
        )?;
    }
    {
        let broker = Broker::open(dir.path())?;
        let d = broker.describe_topic("compacted")?;
        assert_eq!(d.partitions.len(), 2);
        assert_eq!(d.log_config.cleanup_policy, CleanupPolicy::Compact);
        assert_eq!(d.log_config.segment_bytes, 1 << 20);
        assert_eq!(d.config.get("cleanup.policy"), Some("compact"));
        // Settings not overridden follow the broker's defaults.
        assert_eq!(d.config.get("retention.ms"), None);
    }
    // Flip one byte in the middle of the registry: the CRC catches it.
    let path = dir.path().join("topics");
    let mut bytes = std::fs::read(&path).expect("read registry");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&path, &bytes).expect("write registry");
    match Broker::open(dir.path()) {
        Err(e @ Error::Corrupt { .. }) => assert!(e.to_string().contains("topics"), "{e}"),
        other => panic!("expected a corruption error, got {other:?}"),
    }
    Ok(())
}
