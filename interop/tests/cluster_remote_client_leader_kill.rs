//! tidelog's own network client through a leader's death: three `tidelog serve` child
//! processes, a topic with replication factor 3 and `min.insync.replicas=2`, an
//! idempotent acks=all `Producer` over `Cluster` sending numbered records while a
//! `GroupConsumer` over the network reads them, committing after each poll. The leader
//! of partition 0 is killed with SIGKILL halfway: every record is acknowledged in the
//! end, and the consumer reads each acknowledged record exactly once, in the order
//! sent per partition.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tidelog::{GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord};
use tidelog_interop::cluster::eventually;

mod remote_cluster_support;
use remote_cluster_support::{WAIT, three_nodes_with_topic};

const TOPIC: &str = "remote-kill";
const PARTITIONS: i32 = 2;
const RECORDS: u32 = 4000;

#[test]
fn the_remote_producer_and_group_consumer_ride_out_a_killed_leader() {
    let root = tempfile::tempdir().unwrap();
    let (mut nodes, _, cluster, leader) = three_nodes_with_topic(root.path(), TOPIC, PARTITIONS);

    // The group consumer reads from the start, committing after each poll.
    let stop = AtomicBool::new(false);
    let consumed = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let group = GroupConfig::new("remote-kill-readers", &[TOPIC])
                .auto_offset_reset(OffsetReset::Earliest)
                .enable_auto_commit(false);
            let mut member = eventually("a member", WAIT, || {
                GroupConsumer::join(&cluster, group.clone()).ok()
            });
            let mut seen: Vec<(i32, i64, u32)> = Vec::new();
            let mut errors = Vec::new();
            let deadline = Instant::now() + WAIT * 3;
            while seen.len() < RECORDS as usize && Instant::now() < deadline {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                match member.poll(Duration::from_millis(100)) {
                    Ok(records) => {
                        let before = seen.len();
                        for r in &records {
                            let r = r.expect("a record");
                            let v = std::str::from_utf8(r.value.unwrap())
                                .unwrap()
                                .parse()
                                .unwrap();
                            seen.push((r.partition, r.offset, v));
                        }
                        if seen.len() > before
                            && let Err(e) = member.commit_sync()
                        {
                            errors.push(e.to_string());
                        }
                    }
                    Err(e) => errors.push(e.to_string()),
                }
            }
            member.close();
            (seen, errors)
        });

        let producer = Producer::new(&cluster).unwrap();
        let mut receipts: Vec<tidelog::DeliveryReceipt> = Vec::new();
        for i in 0..RECORDS {
            if i == RECORDS / 2 {
                // Half acknowledged; then the leader of partition 0 dies with SIGKILL
                // while records are on their way.
                if let Some(last) = receipts.last() {
                    let _ = last.wait_timeout(WAIT);
                }
                nodes.kill((leader - 1) as usize);
            }
            let value = i.to_string();
            let record = ProducerRecord::new(value.as_bytes()).partition(i as i32 % PARTITIONS);
            receipts.push(producer.send_async(TOPIC, record).unwrap());
        }
        let flushed = producer.flush();
        let failed: Vec<String> = receipts
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| r.wait().err().map(|e| format!("record {i}: {e}")))
            .collect();
        if flushed.is_err() || !failed.is_empty() {
            stop.store(true, Ordering::SeqCst);
        }
        assert!(
            failed.is_empty(),
            "every record acknowledged ({flushed:?}): {:?}\n{}",
            &failed[..failed.len().min(5)],
            nodes.logs()
        );
        producer.close().unwrap();
        reader.join().unwrap()
    });
    let (seen, errors) = consumed;

    // Each record once, in the order sent per partition.
    let mut per_partition: BTreeMap<i32, Vec<(i64, u32)>> = BTreeMap::new();
    for (p, offset, v) in &seen {
        per_partition.entry(*p).or_default().push((*offset, *v));
    }
    for (p, records) in &per_partition {
        assert!(
            records
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
            "partition {p}: read in offset and send order ({} consumer errors: {:?})",
            errors.len(),
            errors.first()
        );
    }
    let unique: HashSet<u32> = seen.iter().map(|s| s.2).collect();
    assert_eq!(unique.len(), seen.len(), "no record read twice");
    let missing: Vec<u32> = (0..RECORDS).filter(|v| !unique.contains(v)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged records not read, first {:?} ({} consumer errors: {:?})\n{}",
        missing.len(),
        &missing[..missing.len().min(10)],
        errors.len(),
        errors.first(),
        nodes.logs()
    );
}
