//! What the transaction tests with real clients share: librdkafka's transactional
//! producer, the coordinator of a transactional id or a group (FindCoordinator), the
//! `transaction.version` a node finalizes (ApiVersions v3), a copy loop through a node's
//! SIGKILL with either client, what librdkafka's read_committed consumer reads, and
//! what one may read of a stopped node's partition log, by Kafka's rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use futures_executor::block_on;
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, FindCoordinatorResponse,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::BaseProducer;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tidelog::record::EndTxnMarker;
use tidelog::storage::{PartitionLog, ReadLimit};

use crate::cluster::{KafkaConn, Processes, eventually};

/// How long the cluster's start and its topics may take.
const START: Duration = Duration::from_secs(60);

/// librdkafka's transactional producer of `transactional_id` at `bootstrap`, whose
/// transactions time out after `timeout_ms` (`init_transactions` not called yet).
///
/// # Panics
/// If librdkafka refuses the configuration.
#[must_use]
pub fn transactional_producer(
    bootstrap: &str,
    transactional_id: &str,
    timeout_ms: u32,
) -> BaseProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", timeout_ms.to_string())
        .create()
        .unwrap()
}

/// Three `tidelog serve` child processes under `root` (a 2 s broker session timeout,
/// so a killed node's leaderships move in seconds), `topics` made with `partitions`
/// partitions each, three replicas and `min.insync.replicas` 2, and an admin client;
/// returns once every partition has a leader and its three replicas in sync, with the
/// leaders of each topic's partitions.
///
/// # Panics
/// If the nodes or the topics are not there within a minute.
pub fn three_nodes_with(
    root: &Path,
    topics: &[&str],
    partitions: i32,
) -> (
    Processes,
    AdminClient<DefaultClientContext>,
    Vec<BTreeSet<i32>>,
) {
    let nodes = Processes::start(
        crate::tidelog_bin(),
        root,
        3,
        &["--broker-session-timeout-ms", "2000"],
    );
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", nodes.layout.bootstrap())
        .create()
        .expect("an admin client");
    eventually("three brokers", START, || {
        let m = admin
            .inner()
            .fetch_metadata(None, Duration::from_secs(2))
            .ok()?;
        (m.brokers().len() == 3).then_some(())
    });
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| {
            NewTopic::new(t, partitions, TopicReplication::Fixed(3)).set("min.insync.replicas", "2")
        })
        .collect();
    let created =
        block_on(admin.create_topics(&new, &AdminOptions::new().operation_timeout(Some(START))))
            .expect("CreateTopics");
    for r in created {
        r.expect("a topic made");
    }
    let leaders = topics
        .iter()
        .map(|topic| {
            eventually("a leader per partition, fully in sync", START, || {
                let m = admin
                    .inner()
                    .fetch_metadata(Some(topic), Duration::from_secs(2))
                    .ok()?;
                let ps = m.topics().first()?.partitions();
                (ps.len() == partitions as usize
                    && ps.iter().all(|p| p.leader() >= 1 && p.isr().len() == 3))
                .then(|| ps.iter().map(|p| p.leader()).collect())
            })
        })
        .collect();
    (nodes, admin, leaders)
}

/// The node that coordinates `transactional_id`, as FindCoordinator answers on `addr`.
pub fn coordinator(addr: &str, transactional_id: &str) -> Option<i32> {
    find_coordinator(addr, 1, transactional_id)
}

/// The node that coordinates consumer group `group`, as FindCoordinator answers on
/// `addr`.
pub fn group_coordinator(addr: &str, group: &str) -> Option<i32> {
    find_coordinator(addr, 0, group)
}

/// FindCoordinator v3 of `key` (`key_type` 0 a group, 1 a transactional id) on `addr`.
fn find_coordinator(addr: &str, key_type: i8, key: &str) -> Option<i32> {
    let request = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_key(StrBytes::from_string(key.to_string()));
    let response: FindCoordinatorResponse =
        KafkaConn::connect(addr, Duration::from_secs(5))?.call(&request, 3)?;
    (response.error_code == 0).then_some(response.node_id.0)
}

/// The finalized level of `transaction.version` that the node at `addr` reports in
/// ApiVersions v3 (0 when it finalizes none).
pub fn transaction_version(addr: &str) -> Option<i16> {
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("tidelog-interop"))
        .with_client_software_version(StrBytes::from_static_str("0"));
    let response: ApiVersionsResponse =
        KafkaConn::connect(addr, Duration::from_secs(5))?.call(&request, 3)?;
    (response.error_code == 0).then(|| {
        response
            .finalized_features
            .iter()
            .find(|f| f.name.as_str() == "transaction.version")
            .map_or(0, |f| f.max_version_level)
    })
}

/// A transactional producer and a read_committed consumer of a group, with one client
/// library's API, as [`copy_loop`] drives them.
pub trait CopyClients {
    /// What a failed transaction answers.
    type Error: std::fmt::Debug + std::fmt::Display;

    /// Up to a batch of input records (partition, offset, value), each at the next
    /// offset of its partition in `next` (advanced); a record at another one is skipped.
    fn poll_batch(&mut self, next: &mut BTreeMap<i32, i64>) -> Vec<(i32, i64, String)>;

    /// The group's committed offset of each input partition (0 for none).
    fn committed(&self) -> BTreeMap<i32, i64>;

    /// Makes the consumer read each input partition from its offset in `offsets`.
    fn seek(&mut self, offsets: &BTreeMap<i32, i64>);

    /// One transaction copying `batch` with the consumer's next offsets: committed, or
    /// aborted when `abort`. Calls `step` with the name of each step that ends, the
    /// first once the batch's records are written (where [`copy_loop`] kills a node).
    fn transaction(
        &mut self,
        batch: &[(i32, i64, String)],
        abort: bool,
        step: &mut dyn FnMut(&str),
    ) -> Result<(), Self::Error>;

    /// After a failed transaction: aborts it or, where it cannot, makes a new producer;
    /// notes in `trace` what went wrong, with the time since `start`.
    fn recover(&mut self, error: Self::Error, start: Instant, trace: &mut Vec<String>);
}

/// Runs a copy loop of `clients`, at most 100 rounds, until the committed offsets are
/// `end`: each round copies a polled batch in a transaction, every third one aborted;
/// the first one meant to commit after three commits that gets its records written
/// kills node `victim` of `nodes` with SIGKILL there; after an abort or a failure it reads
/// again from the group's committed offsets. Prints what each round did.
///
/// # Panics
/// If a round starts after `limit` (with the rounds and the nodes' logs), or in the end
/// if the victim (`what`) was not killed, fewer than 4 transactions committed or 2
/// aborted, or the copied or the group's committed offsets are not `end`.
pub fn copy_loop(
    clients: &mut impl CopyClients,
    nodes: &mut Processes,
    (victim, what): (usize, &str),
    end: &BTreeMap<i32, i64>,
    limit: Duration,
) {
    let (mut commits, mut aborts, mut killed, mut failed) = (0, 0, false, Vec::new());
    // The next offset to copy of each input partition, and the group's committed ones.
    let mut next = BTreeMap::new();
    let mut done: BTreeMap<i32, i64> = BTreeMap::new();
    let start = Instant::now();
    let deadline = start + limit;
    // What each round did, for a failure's message.
    let mut trace = Vec::new();
    for round in 0..100 {
        if done == *end {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "copied by now: {done:?}\nrounds:\n{}\n{}",
            trace.join("\n"),
            nodes.logs()
        );
        let batch = clients.poll_batch(&mut next);
        if batch.is_empty() {
            trace.push(format!("{round} at {:?}: nothing polled", start.elapsed()));
            continue;
        }
        let abort = round % 3 == 2;
        let kill_now = !killed && commits >= 3 && !abort;
        let (begun, mut steps, mut killed_now) = (Instant::now(), Vec::new(), false);
        let outcome = clients.transaction(&batch, abort, &mut |name| {
            steps.push(format!("{name} {:?}", begun.elapsed()));
            if kill_now && steps.len() == 1 {
                nodes.kill(victim);
                killed_now = true;
                steps.push(format!("killed {:?}", begun.elapsed()));
            }
        });
        // A transaction that failed before its records were written killed nothing:
        // a later round kills.
        killed |= killed_now;
        let ((p0, o0, _), (p1, o1, _)) = (&batch[0], &batch[batch.len() - 1]);
        trace.push(format!(
            "{round} at {:?}: {} records, {p0}/{o0} to {p1}/{o1}, abort {abort}, kill {kill_now}, {}: {outcome:?}",
            start.elapsed(),
            batch.len(),
            steps.join(", "),
        ));
        match outcome {
            Ok(()) if !abort => {
                commits += 1;
                for (partition, offset, _) in &batch {
                    done.insert(*partition, offset + 1);
                }
                continue;
            }
            Ok(()) => aborts += 1,
            Err(e) => {
                failed.push(e.to_string());
                clients.recover(e, start, &mut trace);
            }
        }
        done = clients.committed();
        clients.seek(&done);
        next = done.clone();
        trace.push(format!("  rewound to {done:?} at {:?}", start.elapsed()));
    }
    eprintln!(
        "{commits} commits, {aborts} aborts, failed after the kill: {failed:?}\n{}",
        trace.join("\n")
    );
    assert!(killed, "{what} was killed mid-transaction");
    assert!(
        aborts >= 2 && commits >= 4,
        "{commits} commits, {aborts} aborts"
    );
    assert_eq!(done, *end, "every input record copied");
    assert_eq!(
        clients.committed(),
        *end,
        "the group's offsets at the input's end"
    );
}

/// Every record value a read_committed consumer of partitions `0..partitions` of
/// `topic` reads on `bootstrap` from the beginning, in the order read (a record read
/// twice is there twice): until it has `at_least` and nothing more comes for two
/// seconds, or `limit` passed.
pub fn read_committed(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    at_least: usize,
    limit: Duration,
) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "txn-reader")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .expect("a read_committed consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .expect("a partition to read");
    }
    c.assign(&tpl).expect("assign");
    let mut seen = Vec::new();
    let deadline = Instant::now() + limit;
    let mut quiet_until: Option<Instant> = None;
    while Instant::now() < deadline && quiet_until.is_none_or(|q| Instant::now() < q) {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
            seen.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
            if quiet_until.is_some() {
                quiet_until = Some(Instant::now() + Duration::from_secs(2));
            }
        }
        if quiet_until.is_none() && seen.len() >= at_least {
            quiet_until = Some(Instant::now() + Duration::from_secs(2));
        }
    }
    seen
}

/// What a read_committed consumer may return of partition `partition` of `topic` in
/// the data directory `dir` of a stopped node, by Kafka's rule (a transaction's records
/// count once a COMMIT marker of its producer follows them, never after an ABORT, and
/// not while none followed): the log end, the values, and whether a transaction was
/// still open at the end.
///
/// # Panics
/// If the partition's log cannot be opened or read.
pub fn committed_in_log(dir: &Path, topic: &str, partition: i32) -> (i64, Vec<String>, bool) {
    let name = format!("{topic}-{partition}");
    let log = PartitionLog::open(dir.join(&name), &name, tidelog::LogConfig::default())
        .unwrap_or_else(|e| panic!("open {name} in {}: {e}", dir.display()));
    let end = log.log_end_offset();
    let mut committed = Vec::new();
    let mut open: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let mut offset = log.log_start_offset();
    for _ in 0..100_000 {
        if offset >= end {
            break;
        }
        let slice = log
            .read_bounded(offset, 1 << 20, ReadLimit::LogEnd)
            .unwrap();
        if slice.is_empty() {
            break;
        }
        for b in slice.batches() {
            for r in b.records() {
                let r = r.unwrap();
                if b.is_control() {
                    let marker = EndTxnMarker::parse_record(&r).unwrap();
                    let values = open.remove(&b.producer_id()).unwrap_or_default();
                    if marker.commit {
                        committed.extend(values);
                    }
                } else {
                    let v = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
                    if b.is_transactional() {
                        open.entry(b.producer_id()).or_default().push(v);
                    } else {
                        committed.push(v);
                    }
                }
            }
        }
        offset = slice.next_offset();
    }
    log.close().unwrap();
    (end, committed, !open.is_empty())
}
