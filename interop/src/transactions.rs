//! What the transaction tests with real clients share: librdkafka's transactional
//! producer, the node that coordinates a transactional id or a group
//! (FindCoordinator), the finalized `transaction.version` a node reports (ApiVersions
//! v3), what librdkafka's read_committed consumer reads, and what it may read of a
//! partition's log left on disk by a stopped node, by Kafka's rule.

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
