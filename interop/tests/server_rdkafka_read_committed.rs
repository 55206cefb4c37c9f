//! librdkafka (the `rdkafka` crate) reading transactions from `tidelog::Server`: the
//! transactional batches and COMMIT/ABORT markers are written with tidelog's storage
//! API (no transactional producer is served yet). A consumer with
//! `isolation.level=read_committed` reads only committed records and stops at the open
//! transaction (the last stable offset) until its marker comes, while a
//! `read_uncommitted` one reads every data record; neither sees a marker. The
//! read_committed consumer's watermarks end at the last stable offset.

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tidelog::record::{EndTxnMarker, TRANSACTIONAL_BIT};
use tidelog::{BatchBuilder, Partition};
use tidelog_interop::groups::serve_topic;

const TOPIC: &str = "ledger";

/// Appends one batch of `values`, transactional for producer `txn` if given.
fn append(p: &Partition, txn: Option<i64>, values: &[&str]) {
    let mut b = BatchBuilder::new();
    if let Some(pid) = txn {
        b = b.producer(pid, 0, 0).attributes(TRANSACTIONAL_BIT);
    }
    for v in values {
        b.push(1_700_000_000_000, None, Some(v.as_bytes()), &[]);
    }
    p.append_batch(&b.finish()).unwrap();
}

fn end_txn(p: &Partition, pid: i64, commit: bool) {
    let marker = match commit {
        true => EndTxnMarker::commit(0),
        false => EndTxnMarker::abort(0),
    };
    p.log()
        .append_end_txn_marker(pid, 0, marker, 1_700_000_000_000)
        .unwrap();
}

fn consumer(bootstrap: &str, isolation: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("reader-{isolation}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    c
}

/// The values `c` reads until it has `want` of them, or 20 s pass.
fn read(c: &BaseConsumer, want: usize) -> Vec<String> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < want && Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.unwrap();
            got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    got
}

/// Nothing more arrives within `wait`.
fn quiet(c: &BaseConsumer, wait: Duration) -> Vec<String> {
    let mut extra = Vec::new();
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Some(m) = c.poll(Duration::from_millis(100)) {
            let m = m.unwrap();
            extra.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
    }
    extra
}

#[test]
fn librdkafka_reads_committed_and_uncommitted_records() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, server) = serve_topic(dir.path(), TOPIC, 1);
    let bootstrap = server.local_addr().to_string();
    let p = broker.topic(TOPIC).unwrap().partition(0).unwrap();
    append(&p, None, &["a"]); // 0
    append(&p, Some(7), &["aborted-1", "aborted-2"]); // 1-2
    append(&p, Some(8), &["c1"]); // 3
    end_txn(&p, 7, false); // 4
    append(&p, Some(8), &["c2"]); // 5
    end_txn(&p, 8, true); // 6
    append(&p, None, &["d"]); // 7
    append(&p, Some(7), &["later"]); // 8: a new transaction of producer 7, open
    append(&p, None, &["e"]); // 9

    let committed = consumer(&bootstrap, "read_committed");
    assert_eq!(read(&committed, 4), ["a", "c1", "c2", "d"]);
    assert_eq!(
        quiet(&committed, Duration::from_secs(1)),
        Vec::<String>::new(),
        "nothing past the open transaction"
    );

    let uncommitted = consumer(&bootstrap, "read_uncommitted");
    let all = read(&uncommitted, 7);
    assert_eq!(
        all,
        ["a", "aborted-1", "aborted-2", "c1", "c2", "d", "later"]
    );
    assert_eq!(read(&uncommitted, 1), ["e"]);

    // The transaction commits: the waiting read_committed consumer goes on.
    end_txn(&p, 7, true); // 10
    assert_eq!(read(&committed, 2), ["later", "e"]);
    assert_eq!(
        quiet(&committed, Duration::from_millis(500)),
        Vec::<String>::new()
    );
}
