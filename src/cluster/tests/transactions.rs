//! The transaction coordinator on an in-process cluster: `__transaction_state` made
//! through the controller with Kafka's settings capped at the nodes, each partition's
//! coordinator loaded on its leader only, and unloaded when the leadership leaves a
//! running node (controlled shutdown).

use super::*;
use crate::config::TransactionConfig;
use crate::transaction::log::TRANSACTION_STATE_TOPIC;

const PARTITIONS: i32 = 6;

fn config() -> TransactionConfig {
    TransactionConfig {
        state_log_partitions: PARTITIONS,
        ..TransactionConfig::default()
    }
}

/// True when node index `i` coordinates exactly the `__transaction_state` partitions
/// it leads in its image, at the partition count of the topic.
fn coordinates_what_it_leads(c: &TestCluster, i: usize) -> bool {
    let node = c.node(i);
    let image = node.image();
    let Some(topic) = image.topic(TRANSACTION_STATE_TOPIC) else {
        return false;
    };
    let Some(broker) = node.broker.upgrade() else {
        return false;
    };
    let txns = broker.transaction_coordinator();
    txns.partition_count() == PARTITIONS
        && topic
            .partitions
            .iter()
            .enumerate()
            .all(|(p, layout)| txns.leads(p as i32) == (layout.leader == node.node_id()))
}

/// Three nodes with `__transaction_state`, each coordinating what it leads.
fn coordinating_cluster() -> TestCluster {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    c.node(0).ensure_transaction_state(&config()).unwrap();
    wait_until("every node coordinating what it leads", || {
        (0..3).all(|i| coordinates_what_it_leads(&c, i))
    });
    c
}

#[test]
fn each_transaction_state_partition_is_coordinated_by_its_leader_only() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    c.node(1).ensure_transaction_state(&config()).unwrap();
    // Again, from another node: it exists, nothing more is proposed.
    c.node(2).ensure_transaction_state(&config()).unwrap();
    let image = c.wait_same_image();
    let topic = image.topic(TRANSACTION_STATE_TOPIC).unwrap();
    assert!(topic.internal);
    assert_eq!(topic.partitions.len(), PARTITIONS as usize);
    assert!(topic.partitions.iter().all(|p| p.replicas.len() == 3));
    assert_eq!(
        topic.configs.get("min.insync.replicas").map(String::as_str),
        Some("2")
    );
    assert_eq!(
        topic.configs.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    wait_until("every node coordinating what it leads", || {
        (0..3).all(|i| coordinates_what_it_leads(&c, i))
    });

    // A controlled shutdown moves node 1's leaderships away while it still runs: it
    // stops coordinating them, and their new leaders load them.
    let led_by_first = topic.partitions.iter().filter(|p| p.leader == 1).count();
    assert!(led_by_first > 0, "node 1 leads a partition of {PARTITIONS}");
    c.node(0).controlled_shutdown(WAIT).unwrap();
    wait_until(
        "node 1 coordinating nothing, the others what they lead",
        || {
            let broker = c.node(0).broker.upgrade().unwrap();
            let txns = broker.transaction_coordinator();
            (0..PARTITIONS).all(|p| !txns.leads(p))
                && (1..3).all(|i| coordinates_what_it_leads(&c, i))
        },
    );
    c.halt(0);
    c.shutdown();
}

#[test]
fn the_replication_factor_is_capped_at_the_unfenced_nodes() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    c.halt(2);
    wait_until("node 3 fenced", || {
        c.node(0).image().unfenced_brokers() == vec![1, 2]
    });
    c.node(0).ensure_transaction_state(&config()).unwrap();
    let image = c.node(0).image();
    let topic = image.topic(TRANSACTION_STATE_TOPIC).unwrap();
    assert!(topic.partitions.iter().all(|p| p.replicas.len() == 2));
    assert_eq!(
        topic.configs.get("min.insync.replicas").map(String::as_str),
        Some("2")
    );
    c.shutdown();
}

/// An in-process transactional producer on a node that coordinates neither its
/// transactional id nor its group: every call goes to the other nodes' coordinators
/// over the inter-broker listener, with the same results as a local coordinator's
/// (commit, abort, offsets, fencing by an instance on another node).
#[test]
fn an_in_process_producer_uses_the_coordinator_of_another_node() {
    use super::replication::{broker, create};
    use crate::error::Error;
    use crate::producer::{ConsumerGroupMetadata, Producer, ProducerRecord};

    let c = coordinating_cluster();
    create(&c, "t", 3, Vec::new());
    create(&c, "in", 1, Vec::new());
    wait_until("__consumer_offsets made", || {
        c.node(0)
            .image()
            .topic(crate::broker::OFFSETS_TOPIC)
            .is_some()
    });
    let image = c.wait_same_image();
    let leader_of = |topic: &str, p: i32| image.topic(topic).unwrap().partitions[p as usize].leader;
    // The producer's node: not the coordinator of group "g" (the leader of its
    // partition of __consumer_offsets), and leading a partition of "t".
    let groups = leader_of(
        crate::broker::OFFSETS_TOPIC,
        crate::coordinator::partition_for("g", super::OFFSETS_PARTITIONS),
    );
    let (node, p) = (0..3)
        .find_map(|p| {
            let l = leader_of("t", p);
            (l != groups).then_some((l, p))
        })
        .expect("a partition of t led away from the group coordinator");
    let id = (0..)
        .map(|i| format!("remote-{i}"))
        .find(|id| {
            let tp = crate::transaction::log::partition_for(id, PARTITIONS);
            leader_of(TRANSACTION_STATE_TOPIC, tp) != node
        })
        .unwrap();
    wait_until("the group coordinator loaded", || {
        broker(&c, (groups - 1) as usize)
            .group_coordinator()
            .coordinates("g")
    });
    let here = broker(&c, (node - 1) as usize);
    let part = here.topic("t").unwrap().partition(p).unwrap();
    wait_until("leadership applied", || part.leader_epoch().is_some());
    let txns = here.transaction_coordinator();
    assert!(!txns.leads(txns.partition_of(&id).unwrap()), "remote");

    let producer = Producer::builder(&here)
        .transactional_id(id.clone())
        .build()
        .unwrap();
    producer.init_transactions().unwrap();
    producer.begin_transaction().unwrap();
    for v in [b"a", b"b"] {
        producer
            .send("t", ProducerRecord::new(v).partition(p))
            .unwrap();
    }
    let offsets = vec![("in".to_string(), 0, 5)];
    producer
        .send_offsets_to_transaction(&offsets, &ConsumerGroupMetadata::new("g"))
        .unwrap();
    producer.commit_transaction().unwrap();
    producer.begin_transaction().unwrap();
    producer
        .send("t", ProducerRecord::new(b"x").partition(p))
        .unwrap();
    producer.abort_transaction().unwrap();

    // Two records, their COMMIT marker, one aborted record and its ABORT marker: all
    // stable once the markers are replicated.
    wait_until("the markers written and replicated", || {
        part.log_end_offset() == 5 && part.log().last_stable_offset().unwrap() == 5
    });
    let aborted = part.log().aborted_transactions(0, 5).unwrap();
    assert_eq!(aborted.len(), 1, "{aborted:?}");
    assert_eq!(aborted[0].first_offset, 3);
    let committed = broker(&c, (groups - 1) as usize)
        .group_coordinator()
        .offset_fetch("g", Some(&[("in".to_string(), 0)]))
        .unwrap();
    assert_eq!(committed[0].offset, 5, "the offsets committed with it");

    // A new instance on the coordinator's node fences this one.
    let coordinator = leader_of(
        TRANSACTION_STATE_TOPIC,
        crate::transaction::log::partition_for(&id, PARTITIONS),
    );
    let there = broker(&c, (coordinator - 1) as usize);
    let newer = Producer::builder(&there)
        .transactional_id(id.clone())
        .build()
        .unwrap();
    newer.init_transactions().unwrap();
    producer.begin_transaction().unwrap();
    match producer.send("t", ProducerRecord::new(b"late").partition(p)) {
        Err(Error::ProducerFenced {
            transactional_id, ..
        }) => assert_eq!(transactional_id, id),
        other => panic!("expected the older instance fenced, got {other:?}"),
    }
    drop((producer, newer));
    c.shutdown();
}

/// A network producer of transaction version 2 on a cluster: its partitions are led by
/// other nodes than its transaction coordinator, which add them to the transaction
/// over the inter-broker client (AddPartitionsToTxn, not verify-only: KIP-890 part 2);
/// every transaction's batches carry the epoch the previous EndTxn bumped to, and each
/// ends with its marker.
#[test]
fn a_version_2_network_producer_joins_partitions_led_by_other_nodes() {
    use super::failover::addr;
    use super::replication::{broker, create};
    use crate::producer::{Producer, ProducerRecord};
    use crate::remote::{ClientConfig, Cluster};

    let c = coordinating_cluster();
    create(&c, "t", 3, Vec::new());
    let image = c.wait_same_image();
    let leaders = leaders_of(&image, "t");
    let tp = crate::transaction::log::partition_for("v2", PARTITIONS);
    let coordinator = image.topic(TRANSACTION_STATE_TOPIC).unwrap().partitions[tp as usize].leader;
    assert!(
        leaders.iter().any(|&l| l != coordinator),
        "a partition of t led away from the coordinator: {leaders:?}, {coordinator}"
    );
    let bootstrap = c
        .running()
        .iter()
        .map(|&i| addr(&c, i).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let remote = Cluster::connect(ClientConfig::new(bootstrap)).unwrap();
    let p = Producer::builder(&remote)
        .transactional_id("v2")
        .build()
        .unwrap();
    p.init_transactions().unwrap();
    for round in 0..2 {
        p.begin_transaction().unwrap();
        for partition in 0..3 {
            let value = format!("r{round}-{partition}");
            p.send(
                "t",
                ProducerRecord::new(value.as_bytes()).partition(partition),
            )
            .unwrap();
        }
        p.commit_transaction().unwrap();
    }
    for (partition, &leader) in leaders.iter().enumerate() {
        let log = broker(&c, (leader - 1) as usize)
            .topic("t")
            .and_then(|t| t.partition(partition as i32))
            .unwrap();
        wait_until("both markers written", || {
            log.read(0, 1 << 20)
                .unwrap()
                .batches()
                .filter(|b| b.is_control())
                .count()
                == 2
        });
        let slice = log.read(0, 1 << 20).unwrap();
        let epochs: Vec<i16> = slice
            .batches()
            .filter(|b| !b.is_control())
            .map(|b| b.producer_epoch())
            .collect();
        assert_eq!(epochs.len(), 2, "t-{partition}: {epochs:?}");
        assert_eq!(
            epochs[1],
            epochs[0] + 1,
            "t-{partition}: the commit bumped the epoch"
        );
        // The markers (WriteTxnMarkers v2 to the leaders of other nodes) carry the
        // bumped epochs, newer than their transaction's: the leaders took them.
        let marker_epochs: Vec<i16> = slice
            .batches()
            .filter(|b| b.is_control())
            .map(|b| b.producer_epoch())
            .collect();
        assert_eq!(
            marker_epochs,
            vec![epochs[0] + 1, epochs[1] + 1],
            "t-{partition}"
        );
    }
    p.close().unwrap();
}

/// EndTxn answers once PrepareCommit is written while the partition's leader cannot
/// write the COMMIT marker (a follower in its ISR is stalled, so the marker is never
/// committed); the markers are retried in the background, and the transaction becomes
/// CompleteCommit, its records stable, only once the follower fetches again.
#[test]
fn a_commit_completes_once_a_stalled_partition_takes_its_marker() {
    use super::failover::pause;
    use super::replication::{broker, create};
    use crate::record::{BatchBuilder, TRANSACTIONAL_BIT};
    use crate::transaction::{
        AddPartitionsRequest, EndTxnRequest, InitProducerIdAnswer, InitProducerIdRequest,
        TxnResult, TxnState,
    };

    // Followers never leave the ISR here, so a stalled one holds every commit back.
    let c = TestCluster::with_lag(3, 1024, Duration::from_secs(600));
    c.wait_settled();
    let single = TransactionConfig {
        state_log_replication_factor: 1,
        ..config()
    };
    c.node(0).ensure_transaction_state(&single).unwrap();
    wait_until("every node coordinating what it leads", || {
        (0..3).all(|i| coordinates_what_it_leads(&c, i))
    });
    create(&c, "t", 1, Vec::new());
    let image = c.wait_same_image();
    let layout = image.topic("t").unwrap().partitions[0].clone();
    let leader = (layout.leader - 1) as usize;
    let follower = layout
        .replicas
        .iter()
        .map(|r| (*r - 1) as usize)
        .find(|&r| r != leader)
        .unwrap();
    let coordinator_node = image.topic(TRANSACTION_STATE_TOPIC).unwrap().partitions
        [crate::transaction::log::partition_for("stalled", PARTITIONS) as usize]
        .leader;
    let coordinator = broker(&c, (coordinator_node - 1) as usize);
    let txns = coordinator.transaction_coordinator();

    let init = InitProducerIdRequest {
        transactional_id: "stalled".into(),
        timeout_ms: 60_000,
        expected: None,
    };
    let InitProducerIdAnswer::Ready(p) = txns.init_producer_id(&init, &|| Ok(77)).unwrap() else {
        panic!("no producer id");
    };
    txns.add_partitions(&AddPartitionsRequest {
        transactional_id: "stalled".into(),
        producer_id: p.producer_id,
        producer_epoch: p.epoch,
        partitions: [("t".to_string(), 0)].into(),
        client_transaction_version: 0,
    })
    .unwrap();
    let part = broker(&c, leader).topic("t").unwrap().partition(0).unwrap();
    wait_until("leadership applied", || part.leader_epoch().is_some());
    let mut b = BatchBuilder::new()
        .producer(p.producer_id, p.epoch, 0)
        .attributes(TRANSACTIONAL_BIT);
    b.push(1, None, Some(b"v"), &[]);
    part.append_idempotent(&b.finish()).unwrap();
    wait_until("the record replicated", || part.high_watermark() == 1);

    pause(&c, follower, true);
    txns.end_txn(
        &EndTxnRequest {
            transactional_id: "stalled".into(),
            producer_id: p.producer_id,
            producer_epoch: p.epoch,
            result: TxnResult::Commit,
            client_transaction_version: 0,
        },
        &|| Ok(78),
    )
    .unwrap();
    let prepared = txns.describe("stalled").unwrap().state;
    let hw_stalled = part.high_watermark();
    // What a read_committed consumer may read: nothing until the marker is committed.
    let lso_stalled = part.log().last_stable_offset().unwrap();

    pause(&c, follower, false);
    wait_until("the transaction complete", || {
        txns.describe("stalled").unwrap().state == TxnState::CompleteCommit
    });
    assert_eq!(
        prepared,
        TxnState::PrepareCommit,
        "answered before the marker"
    );
    assert_eq!(
        hw_stalled, 1,
        "the marker not committed while the follower stalled"
    );
    assert_eq!(lso_stalled, 0, "the record not stable before its marker is");
    // (A marker retried after its commit timed out may be written twice.)
    wait_until("the record and its marker stable", || {
        let end = part.log_end_offset();
        end >= 2 && part.high_watermark() == end && part.log().last_stable_offset().unwrap() == end
    });
    drop((part, coordinator));
    c.shutdown();
}

/// Kafka's TransactionMarkerChannelManager: the markers of several transactions to one
/// leader go in one WriteTxnMarkers (counted at the leaders), and each transaction is
/// answered on its own.
#[test]
fn the_markers_of_several_transactions_go_to_a_leader_in_one_request() {
    use super::replication::{broker, create};
    use crate::transaction::{TxnMarkers, TxnResult};

    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    create(&c, "t", 6, Vec::new());
    let image = c.wait_same_image();
    let leaders = leaders_of(&image, "t");
    // The coordinator is node index 0 (id 1); two other leaders get markers.
    let others: Vec<i32> = {
        let mut l: Vec<i32> = leaders.iter().copied().filter(|&l| l != 1).collect();
        l.sort_unstable();
        l.dedup();
        l
    };
    assert!(others.len() == 2, "leaders {leaders:?}");
    let led_by = |node: i32| -> Vec<(String, i32)> {
        (0..6)
            .filter(|&p| leaders[p as usize] == node)
            .map(|p| ("t".to_string(), p))
            .collect()
    };
    let txn = |id: &str, pid: i64, partitions: Vec<(String, i32)>| TxnMarkers {
        transactional_id: id.into(),
        producer_id: pid,
        producer_epoch: 0,
        coordinator_epoch: 0,
        result: TxnResult::Commit,
        partitions: partitions.into_iter().collect(),
        transaction_version: 0,
    };
    let mut last = led_by(others[0]);
    last.extend(led_by(others[1]));
    let batch = vec![
        txn("a", 1, led_by(others[0])),
        txn("b", 2, led_by(others[0])),
        txn("c", 3, last),
    ];
    let requests = |node: i32| -> u64 {
        broker(&c, (node - 1) as usize)
            .metrics()
            .server
            .and_then(|s| {
                s.requests
                    .iter()
                    .find(|r| r.api_key == 27)
                    .map(|r| r.latency.count)
            })
            .unwrap_or(0)
    };
    let before: Vec<u64> = others.iter().map(|&n| requests(n)).collect();
    let writer = crate::cluster::transactions::ClusterMarkers::writer(
        1,
        Arc::downgrade(&c.node(0).handle),
        &broker(&c, 0),
    );
    let answers = parking_lot::Mutex::new(Vec::new());
    writer.write_batch(&batch, &|i, failed| answers.lock().push((i, failed.len())));
    let mut answers = answers.into_inner();
    answers.sort_unstable();
    assert_eq!(
        answers,
        vec![(0, 0), (1, 0), (2, 0)],
        "each transaction answered"
    );
    // A leader counts a request once its response is written, which the coordinator
    // may read first.
    wait_until("the leaders counting their WriteTxnMarkers", || {
        others.iter().zip(&before).all(|(&n, &b)| requests(n) > b)
    });
    let after: Vec<u64> = others.iter().map(|&n| requests(n)).collect();
    assert_eq!(
        after,
        vec![before[0] + 1, before[1] + 1],
        "one WriteTxnMarkers per leader"
    );
    // Every marker is in its partition: a, b and c's on the first leader's.
    for (tp, expected) in led_by(others[0])
        .into_iter()
        .map(|tp| (tp, 3))
        .chain(led_by(others[1]).into_iter().map(|tp| (tp, 1)))
    {
        let leader = leaders[tp.1 as usize];
        let part = broker(&c, (leader - 1) as usize)
            .topic("t")
            .unwrap()
            .partition(tp.1)
            .unwrap();
        assert_eq!(part.log_end_offset(), expected, "{tp:?}");
    }
}

/// The leader of each partition of `topic` in `image`, by partition.
fn leaders_of(image: &crate::cluster::image::MetadataImage, topic: &str) -> Vec<i32> {
    image
        .topic(topic)
        .unwrap()
        .partitions
        .iter()
        .map(|p| p.leader)
        .collect()
}

/// The in-process producer follows the cluster's finalized `transaction.version`,
/// whether its node coordinates its transactional id or another node does: at level 2
/// (KIP-890 part 2) each commit bumps the epoch, the next transaction's batches and
/// the markers carry the bumped epochs, and a late batch of an earlier transaction is
/// fenced; downgraded to level 0 the epoch stays from one transaction to the next.
#[test]
fn an_in_process_producer_follows_the_finalized_transaction_version() {
    use super::replication::{broker, create};
    use crate::cluster::features::{FeatureChange, TRANSACTION_VERSION, UpgradeType};
    use crate::error::Error;
    use crate::producer::test_batches::{epochs, late_batch};
    use crate::producer::{Producer, ProducerRecord};

    let c = coordinating_cluster();
    create(&c, "t", 1, Vec::new());
    let image = c.wait_same_image();
    let leader = image.topic("t").unwrap().partitions[0].leader;
    let coordinator = |id: &str| {
        let tp = crate::transaction::log::partition_for(id, PARTITIONS);
        image.topic(TRANSACTION_STATE_TOPIC).unwrap().partitions[tp as usize].leader
    };
    let here = broker(&c, (leader - 1) as usize);
    let part = here.topic("t").unwrap().partition(0).unwrap();
    wait_until("leadership applied", || part.leader_epoch().is_some());
    for (level, bump) in [(2i16, 1i16), (0, 0)] {
        if level == 0 {
            let change = FeatureChange {
                name: TRANSACTION_VERSION.into(),
                level,
                upgrade: UpgradeType::SafeDowngrade,
            };
            c.node(0)
                .update_features(&[change], false, WAIT)
                .unwrap()
                .unwrap();
            wait_until("level 0 on every node", || {
                (0..3).all(|i| c.node(i).image().finalized_level(TRANSACTION_VERSION) == 0)
            });
        }
        // An id coordinated on the producer's node, and one coordinated elsewhere.
        let local = (0..)
            .map(|i| format!("local-{level}-{i}"))
            .find(|id| coordinator(id) == leader)
            .unwrap();
        let remote = (0..)
            .map(|i| format!("remote-{level}-{i}"))
            .find(|id| coordinator(id) != leader)
            .unwrap();
        for id in [local, remote] {
            let from = part.log_end_offset();
            let p = Producer::builder(&here)
                .transactional_id(id.clone())
                .build()
                .unwrap();
            p.init_transactions().unwrap();
            for _ in 0..2 {
                p.begin_transaction().unwrap();
                p.send("t", ProducerRecord::new(b"v").partition(0)).unwrap();
                p.commit_transaction().unwrap();
            }
            let (data, markers) = epochs(&part, from);
            let (pid, first, _) = data[0];
            let second = (pid, first + bump, if bump == 1 { 0 } else { 1 });
            assert_eq!(data, vec![(pid, first, 0), second], "{id} at level {level}");
            assert_eq!(
                markers,
                vec![first + bump, first + 2 * bump],
                "{id} at level {level}"
            );
            if level == 2 {
                // A batch of the first transaction arriving late, while a third is open.
                p.begin_transaction().unwrap();
                p.send("t", ProducerRecord::new(b"w").partition(0)).unwrap();
                match late_batch(&part, pid, first, 1) {
                    Err(Error::InvalidProducerEpoch { epoch, .. }) => assert_eq!(epoch, first),
                    other => panic!("{id}: expected the late batch fenced, got {other:?}"),
                }
                p.abort_transaction().unwrap();
            }
            p.close().unwrap();
        }
    }
    c.shutdown();
}
