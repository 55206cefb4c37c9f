//! Three cluster nodes in one process on loopback ports: a topic with replication
//! factor 3, records written through one node's `Producer` with `acks=all` (each send
//! returns once every in-sync replica has the record), then read back from each
//! replica's own log, at the same offsets.
//!
//! ```text
//! cargo run --example replicated --features server
//! ```
//!
//! Each node is a `Broker` on its own data directory served by a `Server` built with
//! `.node_id(..)` and `.quorum(..)`; the nodes elect a controller (Raft), the
//! controller places the replicas, and each follower fetches its leader's log.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use tidelog::{Acks, Broker, Producer, ProducerRecord, Server, TopicConfig};

const TOPIC: &str = "payments";
const RECORDS: i64 = 100;

fn main() -> tidelog::Result<()> {
    // Six free loopback ports: a Kafka listener and a quorum listener per node.
    let ports: Vec<u16> = {
        let ls: Vec<TcpListener> = (0..6)
            .map(|_| TcpListener::bind("127.0.0.1:0"))
            .collect::<std::io::Result<_>>()
            .expect("free loopback ports");
        ls.iter()
            .map(|l| l.local_addr().expect("bound").port())
            .collect()
    };
    let quorum = format!(
        "1@127.0.0.1:{},2@127.0.0.1:{},3@127.0.0.1:{}",
        ports[3], ports[4], ports[5]
    );
    let root = std::env::temp_dir().join(format!("tidelog-replicated-{}", std::process::id()));
    let mut brokers = Vec::new();
    let mut servers = Vec::new();
    for (i, port) in ports[..3].iter().enumerate() {
        let broker = Broker::open(root.join(format!("node-{}", i + 1)))?;
        let server = Server::builder(broker.clone())
            .listen(format!("127.0.0.1:{port}"))
            .node_id(i as i32 + 1)
            .quorum(quorum.clone())
            .default_replication_factor(3)
            .start()?;
        brokers.push(broker);
        servers.push(server);
    }

    // A topic with 3 replicas (the nodes' default replication factor). Creating it
    // through any node goes through the controller; the call returns once the topic
    // exists on that node. Retry while the controller is being elected.
    let deadline = Instant::now() + Duration::from_secs(30);
    let leads = |b: &Broker| {
        b.topic(TOPIC)
            .and_then(|t| t.partition(0))
            .is_ok_and(|p| p.is_leader())
    };
    loop {
        match brokers[0].create_topic(TOPIC, 1, TopicConfig::new()) {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                println!("waiting for the cluster: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    }
    // Write through the node that leads the partition. Leadership can move (a node
    // fenced, an election): a send then fails with NotLeaderOrFollower, and, as a Kafka
    // client does, we find the new leader and go on there. Its log is the partition's
    // truth (records an old leader held past it are cut from that node's log), so the
    // next record to send is the one at its log end: none is lost or written twice.
    let mut sent = 0;
    while sent < RECORDS {
        // One node leads once the others follow (a partition created on a node leads
        // itself until the cluster tells it its role).
        let leader = loop {
            let leading: Vec<usize> = (0..3).filter(|i| leads(&brokers[*i])).collect();
            if let [i] = leading[..] {
                break i;
            }
            if Instant::now() > deadline {
                return Err(tidelog::Error::Timeout("no leader for payments-0".into()));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        sent = brokers[leader].topic(TOPIC)?.partition(0)?.log_end_offset();
        println!("node {} leads {TOPIC}-0 (log end {sent})", leader + 1);
        let producer = Producer::builder(&brokers[leader])
            .acks(Acks::All)
            .build()?;
        while sent < RECORDS {
            let value = format!("payment-{sent}");
            match producer.send(TOPIC, ProducerRecord::new(value.as_bytes()).partition(0)) {
                Ok(m) => {
                    assert_eq!(m.offset, sent);
                    sent += 1;
                }
                Err(e @ tidelog::Error::NotLeaderOrFollower { .. })
                    if Instant::now() < deadline =>
                {
                    println!("leadership moved: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        producer.close()?;
    }
    println!("{RECORDS} records acknowledged by every in-sync replica");

    // Every replica's own log holds the same records at the same offsets.
    for (i, broker) in brokers.iter().enumerate() {
        let log = broker.topic(TOPIC)?.partition(0)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while log.high_watermark() < RECORDS && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut offset = 0;
        while offset < RECORDS {
            let slice = log.read(offset, 1 << 20)?;
            assert!(!slice.is_empty(), "node {} stops at {offset}", i + 1);
            for batch in slice.batches() {
                for record in batch.records() {
                    let record = record?;
                    let expected = format!("payment-{}", record.offset);
                    assert_eq!(record.value, Some(expected.as_bytes()));
                    offset = record.offset + 1;
                }
            }
        }
        println!(
            "node {}: {RECORDS} records, offsets 0..{RECORDS}, high watermark {}",
            i + 1,
            log.high_watermark()
        );
    }
    for s in servers {
        s.shutdown()?;
    }
    drop(brokers);
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
