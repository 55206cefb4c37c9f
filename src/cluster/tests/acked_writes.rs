//! Shared by the tests that move replicas under load (reassignment, drain): an
//! `acks=all` producer writing over the wire while partitions move, and the check that
//! every record it had acknowledged is stored on the partition's leader at its offset.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::failover::addr;
use super::replication::{broker, part};
use super::*;
use crate::consumer::{Consumer, ConsumerConfig};
use crate::producer::{Acks, Producer, ProducerRecord};
use crate::remote::{ClientConfig, Cluster};

/// The addresses of the running nodes, comma-separated (a `bootstrap.servers`).
pub(super) fn bootstrap(c: &TestCluster) -> String {
    c.running()
        .iter()
        .map(|&i| addr(c, i).to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// (partition, offset, value) of one acknowledged record.
pub(super) type Acked = (i32, i64, String);

/// An `acks=all`, `linger=0` producer thread sending `v-0`, `v-1`, ... to the
/// partitions of a topic in turn, until stopped (at most `2 * WAIT` or 100 000 sends).
pub(super) struct AckedWriter {
    acked: Arc<Mutex<Vec<Acked>>>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<usize>,
}

impl AckedWriter {
    /// Starts writing to partitions `0..partitions` of `topic` through the running
    /// nodes of `c`.
    pub(super) fn start(c: &TestCluster, topic: &str, partitions: i32) -> Self {
        let remote = Cluster::connect(ClientConfig::new(bootstrap(c))).unwrap();
        let producer = Producer::builder(&remote)
            .acks(Acks::All)
            .linger(Duration::ZERO)
            .build()
            .unwrap();
        let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (acked, stop, topic) = (acked.clone(), stop.clone(), topic.to_string());
            std::thread::spawn(move || {
                let deadline = Instant::now() + WAIT * 2;
                let mut failed = 0;
                for i in 0..100_000 {
                    if stop.load(Ordering::Acquire) || Instant::now() > deadline {
                        break;
                    }
                    let v = format!("v-{i}");
                    let p = i % partitions;
                    match producer.send(&topic, ProducerRecord::new(v.as_bytes()).partition(p)) {
                        Ok(m) => acked.lock().unwrap().push((p, m.offset, v)),
                        Err(_) => failed += 1,
                    }
                }
                producer.close().unwrap();
                failed
            })
        };
        AckedWriter {
            acked,
            stop,
            thread,
        }
    }

    /// How many records are acknowledged so far.
    pub(super) fn count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Waits until `n` more records than now are acknowledged.
    pub(super) fn wait_for_more(&self, what: &str, n: usize) {
        let before = self.count();
        wait_until(what, || self.count() >= before + n);
    }

    /// Stops the producer; every acknowledged record and how many sends failed.
    pub(super) fn finish(self) -> (Vec<Acked>, usize) {
        self.stop.store(true, Ordering::Release);
        let failed = self.thread.join().unwrap();
        let acked = self.acked.lock().unwrap().clone();
        (acked, failed)
    }
}

/// Asserts that node index `i` stores every record of `acked` sent to partition `p` of
/// `topic`, at its offset, once its high watermark passed the last of them.
pub(super) fn assert_acked_stored(c: &TestCluster, i: usize, topic: &str, p: i32, acked: &[Acked]) {
    let last = acked
        .iter()
        .filter(|(q, _, _)| *q == p)
        .map(|(_, o, _)| *o)
        .max()
        .unwrap_or_else(|| panic!("{topic}-{p}: no acknowledged record"));
    let log = part(c, i, topic, p);
    wait_until("the leader's high watermark", || {
        log.high_watermark() > last
    });
    let mut consumer = Consumer::new(&broker(c, i), ConsumerConfig::default());
    consumer.assign(&[(topic, p)]).unwrap();
    consumer.seek_to_beginning().unwrap();
    let mut stored = BTreeMap::new();
    let deadline = Instant::now() + WAIT;
    while stored.len() as i64 <= last && Instant::now() < deadline {
        for r in consumer.poll(Duration::from_millis(100)).unwrap().iter() {
            let r = r.unwrap();
            stored.insert(
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            );
        }
    }
    let lost: Vec<_> = acked
        .iter()
        .filter(|(q, o, v)| *q == p && stored.get(o) != Some(v))
        .collect();
    assert!(
        lost.is_empty(),
        "{topic}-{p}: {} acknowledged records lost: {lost:?}",
        lost.len()
    );
}
