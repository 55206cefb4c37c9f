//! `tidelog consume --isolation-level`: read_committed prints the committed records of
//! transactions only, up to the last stable offset (an open transaction holds it back);
//! read_uncommitted, the default, prints every record; neither prints a marker.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, ok, tidelog};
use tidelog::{Broker, Producer, ProducerRecord, TopicConfig};

#[test]
fn read_committed_prints_committed_records_up_to_the_last_stable_offset() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = Broker::open(dir.path()).unwrap();
        broker.create_topic("t", 1, TopicConfig::new()).unwrap();
        let txn = Producer::builder(&broker)
            .transactional_id("cli")
            .build()
            .unwrap();
        txn.init_transactions().unwrap();
        let send = |v: &str| {
            txn.send("t", ProducerRecord::new(v.as_bytes())).unwrap();
        };
        txn.begin_transaction().unwrap();
        send("a");
        send("b");
        txn.commit_transaction().unwrap();
        txn.begin_transaction().unwrap();
        send("aborted");
        txn.abort_transaction().unwrap();
        let plain = Producer::new(&broker).unwrap();
        plain.send("t", ProducerRecord::new(b"c")).unwrap();
        txn.begin_transaction().unwrap();
        send("open");
        txn.flush().unwrap();
        plain.send("t", ProducerRecord::new(b"after")).unwrap();
        // The transaction stays open: the process ends without its commit.
        std::mem::forget(txn);
        drop(plain);
        broker.close().unwrap();
    }
    let consume = |level: &[&str]| {
        let mut args = vec!["consume", "t", "--from-beginning", "-e"];
        args.extend_from_slice(level);
        ok(tidelog(dir.path(), &args, ""))
    };
    assert_eq!(
        consume(&["--isolation-level", "read_committed"]),
        "a\nb\nc\n"
    );
    assert_eq!(consume(&[]), "a\nb\naborted\nc\nopen\nafter\n");
    assert_eq!(
        consume(&["--isolation-level", "read_uncommitted"]),
        consume(&[])
    );
    err(
        tidelog(
            dir.path(),
            &["consume", "t", "--isolation-level", "serializable"],
            "",
        ),
        2,
        "read_committed",
    );
}
