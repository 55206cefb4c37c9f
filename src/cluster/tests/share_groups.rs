//! Share groups on a cluster: ShareFetch and ShareAcknowledge served by a partition's
//! leader, its share-partition's state written to `__share_group_state` through that
//! partition's leader, wherever it is. When the state partition's leader and then the
//! data partition's leader stop, three members still get disjoint records, no accepted
//! record is delivered again, and what a member held when its leader stopped is
//! delivered again, counted. A group's `share.isolation.level=read_committed`, set
//! through any node, keeps the leader's share fetch below the last stable offset.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
};
use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::failover::{addr, send, values};
use super::replication::{broker, create, part};
use super::*;
use crate::cluster::client::Client;
use crate::coordinator::SHARE_GROUP_STATE_TOPIC;
use crate::producer::Acks;

const CALL: Duration = Duration::from_secs(15);
const GROUP: &str = "workers";
const RECORDS: i64 = 30;

/// A member of the share group, with its share session on one node.
struct Member {
    id: String,
    group: String,
    node: usize,
    client: Client,
    epoch: i32,
}

impl Member {
    fn new(c: &TestCluster, id: &str, node: usize) -> Member {
        Member::of(c, GROUP, id, node)
    }

    /// A member of share group `group`.
    fn of(c: &TestCluster, group: &str, id: &str, node: usize) -> Member {
        Member {
            id: id.into(),
            group: group.into(),
            node,
            client: Client::new(addr(c, node).to_string(), id),
            epoch: 0,
        }
    }

    /// Moves its session to `node` (a new session there, epoch 0).
    fn to(&mut self, c: &TestCluster, node: usize) {
        if self.node != node {
            *self = Member::of(c, &self.group, &self.id, node);
        }
    }

    /// One ShareFetch of t-0: the acquired offsets with their delivery counts.
    fn fetch(&mut self, topic_id: [u8; 16], max_records: i32) -> BTreeMap<i64, i16> {
        let r = self.fetch_answer(topic_id, max_records);
        let mut out = BTreeMap::new();
        for p in r.responses.iter().flat_map(|t| &t.partitions) {
            assert_eq!(p.error_code, 0, "{:?}", p.error_message);
            for a in &p.acquired_records {
                for o in a.first_offset..=a.last_offset {
                    out.insert(o, a.delivery_count);
                }
            }
        }
        out
    }

    /// One ShareFetch of t-0, its answer.
    fn fetch_answer(&mut self, topic_id: [u8; 16], max_records: i32) -> ShareFetchResponse {
        let request = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_string(self.group.clone()))))
            .with_member_id(Some(StrBytes::from_string(self.id.clone())))
            .with_share_session_epoch(self.epoch)
            .with_max_wait_ms(500)
            .with_max_bytes(1 << 20)
            .with_max_records(max_records)
            .with_topics(vec![
                FetchTopic::default()
                    .with_topic_id(uuid::Uuid::from_bytes(topic_id))
                    .with_partitions(vec![
                        FetchPartition::default()
                            .with_partition_index(0)
                            .with_partition_max_bytes(1 << 20),
                    ]),
            ]);
        let r: ShareFetchResponse = self.client.call(&request, 1, CALL).unwrap();
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        self.epoch += 1;
        r
    }

    /// Accepts `offsets` of t-0 with ShareAcknowledge; its error code.
    fn accept(&mut self, topic_id: [u8; 16], offsets: &BTreeSet<i64>) -> i16 {
        let batches = offsets
            .iter()
            .map(|&o| {
                AcknowledgementBatch::default()
                    .with_first_offset(o)
                    .with_last_offset(o)
                    .with_acknowledge_types(vec![1])
            })
            .collect();
        let request = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_string(self.group.clone()))))
            .with_member_id(Some(StrBytes::from_string(self.id.clone())))
            .with_share_session_epoch(self.epoch)
            .with_topics(vec![
                AcknowledgeTopic::default()
                    .with_topic_id(uuid::Uuid::from_bytes(topic_id))
                    .with_partitions(vec![
                        AcknowledgePartition::default()
                            .with_partition_index(0)
                            .with_acknowledgement_batches(batches),
                    ]),
            ]);
        let r: ShareAcknowledgeResponse = self.client.call(&request, 1, CALL).unwrap();
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        self.epoch += 1;
        r.responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .find(|c| *c != 0)
            .unwrap_or(0)
    }
}

/// The node index leading `topic`-`p` once it applied its leadership, among the
/// running nodes.
fn applied_leader(c: &TestCluster, topic: &str, p: i32) -> usize {
    let mut found = None;
    wait_until(&format!("a running leader of {topic}-{p}"), || {
        let img = c.node(c.running()[0]).image();
        let Some(leader) = img.topic(topic).map(|t| t.partitions[p as usize].leader) else {
            return false;
        };
        let Ok(i) = usize::try_from(leader - 1) else {
            return false;
        };
        found = Some(i);
        c.running().contains(&i)
            && broker(c, i)
                .hosted_partition(topic, p)
                .is_some_and(|x| x.leader_epoch().is_some())
    });
    found.unwrap()
}

/// A settled 3-node cluster with topic t (one partition): t's id and its leader.
fn cluster_with_t() -> (TestCluster, [u8; 16], usize) {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    create(&c, "t", 1, Vec::new());
    let topic_id = c.node(0).image().topic("t").unwrap().id;
    let l0 = applied_leader(&c, "t", 0);
    (c, topic_id, l0)
}

/// Accepted records, checked: none was accepted before.
fn record_accepts(accepted: &mut BTreeSet<i64>, offsets: &BTreeSet<i64>) {
    for o in offsets {
        assert!(accepted.insert(*o), "offset {o} accepted twice");
    }
}

#[test]
fn share_partitions_keep_every_record_state_when_leaders_move() {
    let (mut c, topic_id, l0) = cluster_with_t();
    let mut members: Vec<Member> = ["m1", "m2", "m3"]
        .iter()
        .map(|id| Member::new(&c, id, l0))
        .collect();
    // The first fetch makes `__share_group_state` and starts the share-partition at
    // the log's end (`share.auto.offset.reset` latest): nothing yet.
    for m in &mut members {
        assert!(m.fetch(topic_id, 5).is_empty());
    }
    c.wait_same_image();
    send(&c, l0, "t", Acks::All, &values("job", RECORDS as usize));

    // Three members, disjoint records; m1 and m3 accept theirs, m2 holds its own.
    let mut accepted = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut held = BTreeSet::new();
    for (i, m) in members.iter_mut().enumerate() {
        let got = m.fetch(topic_id, 5);
        assert_eq!(got.len(), 5, "{} got {got:?}", m.id);
        let offsets: BTreeSet<i64> = got.keys().copied().collect();
        assert!(seen.is_disjoint(&offsets), "{} got {offsets:?} again", m.id);
        seen.extend(offsets.iter().copied());
        if i == 1 {
            held = offsets;
        } else {
            assert_eq!(m.accept(topic_id, &offsets), 0);
            record_accepts(&mut accepted, &offsets);
        }
    }

    // A follower does not hold the share-partition: NOT_LEADER_OR_FOLLOWER.
    let follower = (0..3).find(|&i| i != l0).unwrap();
    let mut stray = Member::new(&c, "m1", follower);
    let r = stray.fetch_answer(topic_id, 5);
    assert_eq!(r.responses[0].partitions[0].error_code, 6);
    assert_eq!(stray.accept(topic_id, &held), 6);

    // The leader of the share-partition's state partition stops.
    let state: Vec<i32> = (0..broker(&c, l0).config().share.state_topic_partitions)
        .filter(|&i| {
            broker(&c, l0)
                .hosted_partition(SHARE_GROUP_STATE_TOPIC, i)
                .is_some_and(|p| p.log_end_offset() > 0)
        })
        .collect();
    assert_eq!(state.len(), 1, "one state partition written: {state:?}");
    let s = applied_leader(&c, SHARE_GROUP_STATE_TOPIC, state[0]);
    c.halt(s);
    c.wait_settled();
    let mut leader = applied_leader(&c, "t", 0);
    if leader == l0 {
        // The data leader stayed: its state goes to the new state leader, over the
        // network. m2 accepts what it held and takes more, held when the data leader
        // stops in its turn.
        applied_leader(&c, SHARE_GROUP_STATE_TOPIC, state[0]);
        assert_eq!(members[1].accept(topic_id, &held), 0);
        record_accepts(&mut accepted, &held);
        let got = members[1].fetch(topic_id, 5);
        assert_eq!(got.len(), 5, "m2 got {got:?}");
        assert!(got.keys().all(|o| !seen.contains(o)), "{got:?} again");
        held = got.keys().copied().collect();
        c.restart(s);
        c.wait_settled();
        wait_until("every replica of the state partition in sync", || {
            let img = c.node(c.running()[0]).image();
            img.topic(SHARE_GROUP_STATE_TOPIC).unwrap().partitions[state[0] as usize]
                .isr
                .len()
                == 3
        });
        c.halt(l0);
        c.wait_settled();
        leader = applied_leader(&c, "t", 0);
    }
    assert_ne!(leader, l0);

    // The new leader loads the share-partition: accepted records stay accepted; the
    // ones m2 held come back, delivered a second time.
    let mut redelivered = BTreeMap::new();
    for m in &mut members {
        m.to(&c, leader);
    }
    for round in 0..60 {
        if accepted.len() == RECORDS as usize {
            break;
        }
        let m = &mut members[round % 3];
        let got = m.fetch(topic_id, 4);
        for (o, count) in &got {
            assert!(!accepted.contains(o), "accepted offset {o} delivered again");
            if held.contains(o) {
                redelivered.insert(*o, *count);
            }
        }
        let offsets: BTreeSet<i64> = got.keys().copied().collect();
        if !offsets.is_empty() {
            assert_eq!(m.accept(topic_id, &offsets), 0);
            record_accepts(&mut accepted, &offsets);
        }
    }
    assert_eq!(accepted, (0..RECORDS).collect::<BTreeSet<_>>());
    assert_eq!(
        redelivered.keys().copied().collect::<BTreeSet<_>>(),
        held,
        "what m2 held came back"
    );
    assert!(redelivered.values().all(|&n| n == 2), "{redelivered:?}");
    c.shutdown();
}

/// Partition 0 of `__share_group_state` written and pruned by the share store of its
/// leader (locally) and of another node (Produce and DeleteRecords to the leader):
/// every replica's log then starts where it was pruned.
#[test]
fn a_state_partition_is_pruned_through_its_leader_from_any_node() {
    use crate::coordinator::ShareStateStore;
    use crate::coordinator::share_records::{self, SNAPSHOT, ShareKey, ShareState};
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let store = |i: usize| {
        let node = c.node(i);
        let broker = broker(&c, i);
        super::super::share::ClusterShareStore::new(
            node.config.node_id,
            &broker,
            std::sync::Arc::downgrade(&node.handle),
        )
    };
    assert!(store(0).partitions().unwrap() > 0);
    let leader = applied_leader(&c, SHARE_GROUP_STATE_TOPIC, 0);
    let other = (0..3).find(|&i| i != leader).unwrap();
    // A share-partition's state (the state partition's leader checks each record).
    let k = ShareKey {
        group: GROUP.into(),
        topic_id: [9; 16],
        partition: 0,
    };
    let state = ShareState {
        snapshot_epoch: 0,
        state_epoch: 0,
        leader_epoch: 0,
        start_offset: 0,
        batches: Vec::new(),
    };
    let (key, value) = (
        share_records::key(SNAPSHOT, &k),
        share_records::value(SNAPSHOT, &state),
    );
    // The fence a loading node writes first (the state partition's leader takes no
    // other record of a share-partition it knows no state of).
    let fence = ShareState {
        start_offset: -1,
        ..state.clone()
    };
    store(other)
        .journal(0)
        .append(
            &share_records::key(share_records::UPDATE, &k),
            &share_records::value(share_records::UPDATE, &fence),
        )
        .unwrap();
    for i in [leader, other] {
        let journal = store(i).journal(0);
        let offsets: Vec<i64> = (0..3)
            .map(|_| journal.append(&key, &value).unwrap())
            .collect();
        journal.prune(offsets[2]).unwrap();
        for n in 0..3 {
            wait_until(&format!("node {n} pruned to {}", offsets[2]), || {
                part(&c, n, SHARE_GROUP_STATE_TOPIC, 0).log_start_offset() == offsets[2]
            });
        }
    }
}

/// Writes of share-partition states at a leader epoch older than one written before are
/// refused when written, FENCED_LEADER_EPOCH (not retried), through the state
/// partition's leader (locally) and from another node (Produce), and after that leader
/// moves: nothing of them lands.
#[test]
fn a_deposed_leaders_share_state_write_is_fenced_when_written() {
    use crate::coordinator::ShareStateStore;
    use crate::coordinator::share_records::{self, SNAPSHOT, ShareKey, ShareState, UPDATE};
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    let store = |c: &TestCluster, i: usize| {
        let node = c.node(i);
        super::super::share::ClusterShareStore::new(
            node.config.node_id,
            &broker(c, i),
            std::sync::Arc::downgrade(&node.handle),
        )
    };
    assert!(store(&c, 0).partitions().unwrap() > 0);
    let k = ShareKey {
        group: GROUP.into(),
        topic_id: [9; 16],
        partition: 0,
    };
    // A record of `kind` of the data partition's leader at `leader_epoch`.
    let put = |c: &TestCluster, node: usize, kind: i16, leader_epoch: i32, start_offset: i64| {
        let value = share_records::value(
            kind,
            &ShareState {
                snapshot_epoch: 0,
                state_epoch: 0,
                leader_epoch,
                start_offset,
                batches: Vec::new(),
            },
        );
        store(c, node)
            .journal(0)
            .append(&share_records::key(kind, &k), &value)
    };
    // An acknowledgement of the data partition's leader at `leader_epoch`, told apart
    // from the others by `tag` (its start offset).
    let write = |c: &TestCluster, node: usize, leader_epoch: i32, tag: i64| {
        put(c, node, UPDATE, leader_epoch, tag)
    };
    let fenced = |r: Result<i64>| {
        assert!(matches!(r, Err(Error::FencedLeaderEpoch { .. })), "{r:?}");
    };
    let s = applied_leader(&c, SHARE_GROUP_STATE_TOPIC, 0);
    let other = (0..3).find(|&i| i != s).unwrap();
    // The leader of epoch 5 loads the share-partition: its fence, its first snapshot.
    put(&c, other, UPDATE, 5, -1).unwrap();
    put(&c, other, SNAPSHOT, 5, 0).unwrap();
    write(&c, other, 5, 1).unwrap();
    write(&c, s, 6, 2).unwrap();
    // The leader of epoch 5 was deposed: its writes are refused, from anywhere.
    fenced(write(&c, other, 5, 3));
    fenced(write(&c, s, 5, 4));
    // The state partition's next leader knows the epochs from its log.
    c.halt(s);
    c.wait_settled();
    let s2 = applied_leader(&c, SHARE_GROUP_STATE_TOPIC, 0);
    let other = c.running().into_iter().find(|&i| i != s2).unwrap();
    fenced(write(&c, other, 5, 5));
    fenced(write(&c, s2, 4, 6));
    write(&c, other, 6, 7).unwrap();
    let mut written = Vec::new();
    store(&c, s2)
        .read(0, &mut |_, key, value| {
            if let Some((_, rk, v)) = share_records::decode(key, value)?
                && rk == k
            {
                written.push((v.leader_epoch, v.start_offset));
            }
            Ok(())
        })
        .unwrap();
    // A write whose answer came too late or said "not enough replicas after append"
    // is written again (the store's retry: a share record replays to the same state
    // however often it is in the log), so a loaded machine may leave a copy next to
    // it. Copies aside, exactly the accepted writes landed, in order, and no fenced one.
    written.dedup();
    assert_eq!(written, vec![(5, -1), (5, 0), (5, 1), (6, 2), (6, 7)]);
    c.shutdown();
}

/// Deleting a topic deletes its share-partitions' state through the leaders of
/// `__share_group_state`: the topic made again starts afresh (at its log's end, the
/// default `share.auto.offset.reset`), not where the old state was.
#[test]
fn a_topic_made_again_after_its_deletion_starts_its_share_partitions_afresh() {
    let (c, topic_id, l0) = cluster_with_t();
    let mut m = Member::new(&c, "m1", l0);
    assert!(m.fetch(topic_id, 5).is_empty());
    c.wait_same_image();
    send(&c, l0, "t", Acks::All, &values("job", 3));
    let offsets: BTreeSet<i64> = m.fetch(topic_id, 5).keys().copied().collect();
    assert_eq!(offsets, (0..3).collect());
    assert_eq!(m.accept(topic_id, &offsets), 0);

    broker(&c, (l0 + 1) % 3).delete_topic("t").unwrap();
    c.wait_same_image();
    create(&c, "t", 1, Vec::new());
    c.wait_same_image();
    let topic_id = c.node(0).image().topic("t").unwrap().id;
    let l1 = applied_leader(&c, "t", 0);
    send(&c, l1, "t", Acks::All, &values("again", 5));
    let mut m = Member::new(&c, "m2", l1);
    // Afresh, at the log's end (5): the old state would deliver 3 and 4.
    assert!(m.fetch(topic_id, 5).is_empty());
    send(&c, l1, "t", Acks::All, &values("more", 2));
    assert_eq!(m.fetch(topic_id, 5), BTreeMap::from([(5, 1), (6, 1)]));
}

/// The leader of a data partition whose state write is refused by another node, the
/// leader of its `__share_group_state` partition, with FENCED_STATE_EPOCH (an admin
/// replaced the state since it was read) answers that to the acknowledging member,
/// drops the state it held and reads the admin's at the next fetch, as Kafka's share
/// partition manager does: the records acknowledged before stay acknowledged, those
/// held are delivered anew.
#[test]
fn a_remote_fenced_state_epoch_makes_the_data_leader_read_the_state_again() {
    use crate::coordinator::share_records::{ShareKey, state_partition_for};
    use kafka_protocol::ResponseError;
    let (c, topic_id, l0) = cluster_with_t();
    // The first fetch makes `__share_group_state`; then a group whose state partition
    // another node leads.
    assert!(Member::new(&c, "m0", l0).fetch(topic_id, 5).is_empty());
    c.wait_same_image();
    let image = c.node(0).image();
    let n = image
        .topic(SHARE_GROUP_STATE_TOPIC)
        .unwrap()
        .partitions
        .len() as i32;
    let group = (0..100)
        .map(|i| format!("g{i}"))
        .find(|g| {
            let k = ShareKey {
                group: g.clone(),
                topic_id: crate::coordinator::topic_id("t"),
                partition: 0,
            };
            applied_leader(&c, SHARE_GROUP_STATE_TOPIC, state_partition_for(&k, n)) != l0
        })
        .unwrap();
    let mut m = Member::of(&c, &group, "m1", l0);
    assert!(m.fetch(topic_id, 5).is_empty());
    send(&c, l0, "t", Acks::All, &values("job", 10));
    let got: BTreeSet<i64> = m.fetch(topic_id, 5).keys().copied().collect();
    assert_eq!(got, (0..5).collect());
    assert_eq!(m.accept(topic_id, &(0..2).collect()), 0);
    // An admin on another node sets the start offset where it is (2): the next state
    // epoch, nothing in flight.
    let admin = (l0 + 1) % 3;
    let altered = broker(&c, admin)
        .share_state()
        .alter_share_offsets(&group, &[("t".into(), 0, 2)])
        .unwrap();
    altered[0].as_ref().unwrap();
    // The data leader writes the acceptance of what it held: refused by the state
    // partition's leader.
    assert_eq!(
        m.accept(topic_id, &(2..5).collect()),
        ResponseError::FencedStateEpoch.code()
    );
    // The next fetch reads the admin's state: 2 on delivered anew, 0 and 1 never again.
    let got = m.fetch(topic_id, 10);
    assert_eq!(got, (2..10).map(|o| (o, 1)).collect());
}

/// A share group with `share.isolation.level=read_committed`, set through a node that
/// does not lead the partition (a group config is cluster metadata): the leader hands
/// out records below the last stable offset only, those of a transaction once it is
/// committed, never those of an aborted one, and no control record.
#[test]
fn a_read_committed_share_group_reads_what_transactions_committed_on_the_leader() {
    use crate::config::TransactionConfig;
    use crate::producer::{Producer, ProducerRecord};

    let (c, topic_id, l0) = cluster_with_t();
    c.node(0)
        .ensure_transaction_state(&TransactionConfig::default())
        .unwrap();
    let other = (l0 + 1) % 3;
    let settings = [
        ("share.isolation.level", Some("read_committed")),
        ("share.auto.offset.reset", Some("earliest")),
    ];
    assert_eq!(
        super::group_configs::alter(&c, other, "committed-readers", &settings),
        (0, None)
    );
    c.wait_same_image();
    let mut m = Member::of(&c, "committed-readers", "m1", l0);
    // Every offset acquired over a few fetches (each waits up to half a second).
    let take = |m: &mut Member| -> BTreeSet<i64> {
        let mut got = BTreeSet::new();
        for _ in 0..4 {
            got.extend(m.fetch(topic_id, 100).keys().copied());
        }
        got
    };

    send(&c, l0, "t", Acks::All, &values("before", 3)); // 0..=2
    let here = broker(&c, l0);
    let txn = Producer::builder(&here)
        .transactional_id("share-rc")
        .build()
        .unwrap();
    wait_until("the transaction coordinator answers", || {
        txn.init_transactions().is_ok()
    });
    txn.begin_transaction().unwrap();
    for v in ["open-0", "open-1"] {
        txn.send("t", ProducerRecord::new(v.as_bytes()).partition(0))
            .unwrap(); // 3, 4
    }
    txn.flush().unwrap();
    send(&c, l0, "t", Acks::All, &values("after", 2)); // 5, 6
    assert_eq!(take(&mut m), (0..3).collect(), "up to the open transaction");

    txn.commit_transaction().unwrap(); // its marker: 7
    assert_eq!(
        take(&mut m),
        (3..7).collect(),
        "the committed transaction, then the rest"
    );

    txn.begin_transaction().unwrap();
    for v in ["aborted-0", "aborted-1"] {
        txn.send("t", ProducerRecord::new(v.as_bytes()).partition(0))
            .unwrap(); // 8, 9
    }
    txn.abort_transaction().unwrap(); // its marker: 10
    send(&c, l0, "t", Acks::All, &values("last", 1)); // 11
    assert_eq!(
        take(&mut m),
        BTreeSet::from([11]),
        "nothing of the aborted transaction"
    );
    c.shutdown();
}

/// A group's `share.auto.offset.reset=earliest`, set through a node that does not lead
/// the partition, reaches the leader late (it has applied the record and not published
/// it): the first ShareFetch on the leader starts the share-partition at the log's
/// start all the same, once the leader's group configs are up to date (a read barrier
/// on the metadata log), never at its end. While they cannot be brought up to date in
/// time, the partition is answered NOT_LEADER_OR_FOLLOWER (retriable) and nothing is
/// started; the next fetch starts at the log's start.
#[test]
fn a_share_group_set_to_earliest_elsewhere_starts_there_on_a_leader_that_lags() {
    use super::metadata_visibility::Gate;

    let (c, topic_id, l0) = cluster_with_t();
    let other = (l0 + 1) % 3;
    send(&c, l0, "t", Acks::All, &values("early", 5)); // 0..=4
    // `__share_group_state` made and loaded on the leader before its publisher is held.
    Member::of(&c, "warm-up", "w", l0).fetch(topic_id, 1);
    let earliest = [("share.auto.offset.reset", Some("earliest"))];
    let late = |group: &'static str| {
        let gate = Gate::on(move |image| image.group_configs.contains_key(group));
        c.node(l0).add_listener(gate.clone());
        assert_eq!(
            super::group_configs::alter(&c, other, group, &earliest),
            (0, None)
        );
        assert!(!c.node(l0).image().group_configs.contains_key(group));
        gate
    };

    // Published a moment after the fetch came.
    let gate = late("late-readers");
    let mut m = Member::of(&c, "late-readers", "m1", l0);
    let got = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            gate.release();
        });
        m.fetch(topic_id, 100)
    });
    assert_eq!(
        got.keys().copied().collect::<BTreeSet<_>>(),
        (0..5).collect(),
        "the share-partition started at the log's start"
    );

    // Not published within the barrier's timeout (3 s).
    let gate = late("held-readers");
    let mut m = Member::of(&c, "held-readers", "m1", l0);
    let r = m.fetch_answer(topic_id, 100);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.error_code, 6, "{:?}", p.error_message);
    assert!(p.acquired_records.is_empty());
    gate.release();
    let got = m.fetch(topic_id, 100);
    assert_eq!(
        got.keys().copied().collect::<BTreeSet<_>>(),
        (0..5).collect()
    );
    c.shutdown();
}
