//! Kafka transactions on a three-node cluster (three `tidelog serve` child processes)
//! through librdkafka's transactional producer:
//!
//! - transactions over three partitions led by three different nodes are committed,
//!   aborted and committed again: the coordinator (the leader of the transactional id's
//!   `__transaction_state` partition) sends markers to the remote leaders, and the
//!   leaders ask it to verify the first transactional batch of each partition;
//! - the coordinator's node is killed with SIGKILL while a commit is under way: the
//!   transaction ends committed or aborted in every partition, never half, and a new
//!   producer with the same transactional.id initializes and commits on the survivors.
//!
//! What a read_committed consumer sees is checked in the partitions' logs, read from
//! the stopped nodes' data directories with Kafka's rule (a transaction's records
//! count once a COMMIT marker of its producer follows them, never after an ABORT, and
//! not while none followed), and through librdkafka's read_committed consumer.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use tidelog_interop::cluster::Processes;
use tidelog_interop::transactions::{
    committed_in_log, coordinator, read_committed, three_nodes_with, transactional_producer,
};

const TOPIC: &str = "txn-work";
const PARTITIONS: i32 = 3;
const WAIT: Duration = Duration::from_secs(60);

/// Three nodes, the topic with one partition led by each (preferred leaders of a
/// fresh three-way topic are spread), and an admin client.
fn cluster(root: &Path) -> (Processes, AdminClient<DefaultClientContext>) {
    let (nodes, admin, leaders) = three_nodes_with(root, &[TOPIC], PARTITIONS);
    assert_eq!(leaders[0].len(), 3, "each partition led by another node");
    (nodes, admin)
}

fn producer(bootstrap: &str, transactional_id: &str) -> BaseProducer {
    transactional_producer(bootstrap, transactional_id, 20_000)
}

/// Sends `n` records `tag-partition-i` to every partition and waits for them.
fn send(p: &BaseProducer, tag: &str, n: usize) -> BTreeSet<String> {
    let mut sent = BTreeSet::new();
    for partition in 0..PARTITIONS {
        for i in 0..n {
            let v = format!("{tag}-{partition}-{i}");
            p.send(
                BaseRecord::<(), String>::to(TOPIC)
                    .payload(&v)
                    .partition(partition),
            )
            .unwrap();
            sent.insert(v);
        }
    }
    p.flush(WAIT).unwrap();
    sent
}

/// The read_committed view of every partition from the longest replica among the
/// data directories of `nodes` (stopped), and whether any transaction is left open.
fn committed_view(nodes: &Processes, survivors: &[usize]) -> (BTreeSet<String>, bool) {
    let mut all = BTreeSet::new();
    let mut any_open = false;
    for p in 0..PARTITIONS {
        let (_, values, open) = survivors
            .iter()
            .map(|i| committed_in_log(&nodes.dir(*i), TOPIC, p))
            .max_by_key(|(end, _, _)| *end)
            .expect("a survivor");
        any_open |= open;
        all.extend(values);
    }
    (all, any_open)
}

#[test]
fn transactions_commit_and_abort_across_leaders() {
    let root = tempfile::tempdir().unwrap();
    let (mut nodes, admin) = cluster(root.path());
    let bootstrap = nodes.layout.bootstrap();
    let p = producer(&bootstrap, "cluster-txn");
    // The first use makes __transaction_state through the controller; librdkafka
    // retries COORDINATOR_NOT_AVAILABLE until its partition has a leader.
    p.init_transactions(WAIT).unwrap();
    let node = coordinator(&nodes.layout.addr(0), "cluster-txn").expect("a coordinator");
    assert!((1..=3).contains(&node), "coordinator {node}");

    let mut expected = BTreeSet::new();
    p.begin_transaction().unwrap();
    expected.extend(send(&p, "first", 5));
    p.commit_transaction(WAIT).unwrap();

    p.begin_transaction().unwrap();
    let aborted = send(&p, "aborted", 5);
    p.abort_transaction(WAIT).unwrap();

    p.begin_transaction().unwrap();
    expected.extend(send(&p, "second", 5));
    p.commit_transaction(WAIT).unwrap();
    drop(p);

    let seen: BTreeSet<String> =
        read_committed(&bootstrap, TOPIC, PARTITIONS, expected.len(), WAIT)
            .into_iter()
            .collect();
    assert_eq!(
        seen, expected,
        "a read_committed consumer sees the committed records only"
    );
    drop(admin);
    let stopped = nodes.terminate_all();
    assert!(
        stopped.iter().all(|ok| *ok),
        "every node stops cleanly: {stopped:?}\n{}",
        nodes.logs()
    );
    let (view, open) = committed_view(&nodes, &[0, 1, 2]);
    assert!(!open, "no transaction left open");
    assert_eq!(view, expected, "exactly the committed records");
    assert!(view.is_disjoint(&aborted));
}

/// The coordinator's node is killed right as the commit starts: the race of the kill
/// with the EndTxn, the PrepareCommit record and the markers.
#[test]
fn a_commit_survives_or_aborts_whole_when_the_coordinator_is_killed() {
    commit_while_the_coordinator_dies(false);
}

/// The coordinator's node is frozen (SIGSTOP) before the commit is asked, so the
/// EndTxn is surely sent to it, then killed: the producer's commit is left to the
/// successor.
#[test]
fn a_commit_sent_to_a_frozen_coordinator_that_is_killed_ends_whole() {
    commit_while_the_coordinator_dies(true);
}

fn commit_while_the_coordinator_dies(freeze_first: bool) {
    let root = tempfile::tempdir().unwrap();
    let (mut nodes, admin) = cluster(root.path());
    let bootstrap = nodes.layout.bootstrap();
    let id = "cluster-txn-killed";
    let p = producer(&bootstrap, id);
    p.init_transactions(WAIT).unwrap();
    let node = coordinator(&nodes.layout.addr(0), id).expect("a coordinator");
    let victim = (node - 1) as usize;

    p.begin_transaction().unwrap();
    let in_flight = send(&p, "in-flight", 20);
    if freeze_first {
        nodes.signal(victim, "STOP");
    }
    // The commit runs while the coordinator's node dies under it.
    let committing = std::thread::spawn(move || {
        let outcome = p.commit_transaction(Duration::from_secs(10));
        drop(p);
        outcome
    });
    if freeze_first {
        std::thread::sleep(Duration::from_millis(500));
    }
    nodes.kill(victim);
    let outcome = committing.join().unwrap();
    eprintln!("commit_transaction while the coordinator died: {outcome:?}");

    let survivors: Vec<usize> = (0..3).filter(|i| *i != victim).collect();
    let live = survivors
        .iter()
        .map(|i| nodes.layout.addr(*i))
        .collect::<Vec<_>>()
        .join(",");
    // A new instance fences the old one and finds the transaction completed (a
    // commit the coordinator had prepared is finished by its successor; an unprepared
    // one is aborted), then commits its own.
    let next = producer(&live, id);
    next.init_transactions(WAIT)
        .unwrap_or_else(|e| panic!("init_transactions after the kill: {e}\n{}", nodes.logs()));
    next.begin_transaction().unwrap();
    let after = send(&next, "after", 5);
    next.commit_transaction(WAIT).unwrap();
    drop(next);

    let seen: BTreeSet<String> = read_committed(&live, TOPIC, PARTITIONS, after.len(), WAIT)
        .into_iter()
        .collect();
    assert!(
        after.is_subset(&seen),
        "the new producer's commit is visible"
    );
    drop(admin);
    nodes.terminate_all();
    let (view, open) = committed_view(&nodes, &survivors);
    assert!(!open, "no transaction left open");
    assert!(after.is_subset(&view));
    let survived: BTreeSet<&String> = view.intersection(&in_flight).collect();
    assert!(
        survived.is_empty() || survived.len() == in_flight.len(),
        "the killed commit is half visible: {} of {} records",
        survived.len(),
        in_flight.len()
    );
    if outcome.is_ok() {
        assert_eq!(
            survived.len(),
            in_flight.len(),
            "an acknowledged commit is kept"
        );
    }
    eprintln!(
        "the in-flight transaction ended {}",
        if survived.is_empty() {
            "aborted"
        } else {
            "committed"
        }
    );
}
