//! The in-process ShareConsumer and transactions: a read_committed share group
//! (`ShareConsumerConfig::isolation_level`, or the group config `share.isolation.level`)
//! hands out the records of committed transactions and plain records, never those of
//! aborted transactions, and the records of an open transaction only once it commits;
//! a read_uncommitted one hands out every data record. The group configs
//! `share.isolation.level` and `share.auto.offset.reset`, where set, are in force over
//! the consumer's settings, as they are for network members.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tidelog::coordinator::group_configs::{
    FileGroupConfigStore, GroupConfigStore, SHARE_AUTO_OFFSET_RESET, SHARE_ISOLATION_LEVEL,
};
use tidelog::transaction::TransactionConfig;
use tidelog::{
    Broker, IsolationLevel, OffsetReset, Producer, ProducerRecord, ShareConsumer,
    ShareConsumerConfig, TopicConfig,
};

fn open(dir: &std::path::Path) -> Broker {
    let broker = Broker::builder(dir)
        .transaction(TransactionConfig {
            state_log_partitions: 1,
            ..TransactionConfig::default()
        })
        .open()
        .expect("broker");
    broker
        .create_topic("q", 1, TopicConfig::new())
        .expect("topic");
    broker
}

/// Polls `c` until it handed out `n` records or 10 s passed, then once more briefly
/// (anything past `n` is an error the caller sees); the values handed out, accepted.
fn values(c: &mut ShareConsumer, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        out.extend(c.poll(Duration::from_millis(100)).expect("poll"));
    }
    out.extend(c.poll(Duration::from_millis(300)).expect("poll"));
    c.commit_sync().expect("commit");
    let mut got: Vec<String> = out
        .into_iter()
        .map(|r| String::from_utf8(r.value.expect("a value")).expect("utf-8"))
        .collect();
    got.sort();
    got
}

fn member(broker: &Broker, config: ShareConsumerConfig) -> ShareConsumer {
    ShareConsumer::new(broker, config).expect("share consumer")
}

#[test]
fn read_committed_share_groups_skip_aborted_and_wait_for_open_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let plain = Producer::new(&broker).unwrap();
    plain.send("q", ProducerRecord::new(b"plain")).unwrap();
    let txn = Producer::builder(&broker)
        .transactional_id("t")
        .build()
        .unwrap();
    txn.init_transactions().unwrap();
    txn.begin_transaction().unwrap();
    for v in ["kept-1", "kept-2"] {
        txn.send("q", ProducerRecord::new(v.as_bytes())).unwrap();
    }
    txn.commit_transaction().unwrap();
    txn.begin_transaction().unwrap();
    txn.send("q", ProducerRecord::new(b"dropped")).unwrap();
    txn.abort_transaction().unwrap();
    txn.begin_transaction().unwrap();
    txn.send("q", ProducerRecord::new(b"open")).unwrap();
    txn.flush().unwrap();

    let earliest = |group: &str| {
        ShareConsumerConfig::new(group, &["q"]).auto_offset_reset(OffsetReset::Earliest)
    };
    // The consumer's own setting (no group config is set).
    let mut committed = member(
        &broker,
        earliest("committed").isolation_level(IsolationLevel::ReadCommitted),
    );
    // The group config, in force over the consumer's settings (read_uncommitted and
    // latest, the defaults).
    let share = broker.share_coordinator().unwrap();
    let config = broker.config();
    let store = FileGroupConfigStore::open(dir.path(), &config.coordinator, &config.share).unwrap();
    store
        .apply(
            "by-config",
            &[
                (SHARE_ISOLATION_LEVEL.into(), Some("read_committed".into())),
                (SHARE_AUTO_OFFSET_RESET.into(), Some("earliest".into())),
            ],
        )
        .unwrap();
    share.set_group_configs(Arc::new(store));
    let mut by_config = member(&broker, ShareConsumerConfig::new("by-config", &["q"]));
    let mut uncommitted = member(&broker, earliest("uncommitted"));

    let decided = ["kept-1", "kept-2", "plain"];
    assert_eq!(values(&mut committed, 3), decided);
    assert_eq!(values(&mut by_config, 3), decided);
    assert_eq!(
        values(&mut uncommitted, 5),
        ["dropped", "kept-1", "kept-2", "open", "plain"]
    );

    // Once the open transaction commits, its record is handed out (after the aborted
    // one, which never is).
    txn.commit_transaction().unwrap();
    assert_eq!(values(&mut committed, 1), ["open"]);
    assert_eq!(values(&mut by_config, 1), ["open"]);
    assert_eq!(values(&mut uncommitted, 0), Vec::<String>::new());
}
