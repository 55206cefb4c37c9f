//! Exactly once through a consume-transform-produce loop of librdkafka (the library
//! confluent-kafka wraps) on three `tidelog serve` child processes, a cluster at
//! `transaction.version` 2 (a new cluster's level):
//!
//! - a transactional producer copies every record of a three-partition input topic to
//!   an output topic, each batch committed with the consumer's next offsets
//!   (`send_offsets_to_transaction`); every third transaction is aborted, and the loop
//!   goes back to the group's committed offsets, as an application does;
//! - mid-transaction, with the batch's records written, the transaction coordinator's
//!   node is killed with SIGKILL; the loop goes on with whatever the commit answered
//!   (committed by the successor, or aborted and copied again from the committed
//!   offsets). The group's coordinator is another node: librdkafka 2.12 cannot follow
//!   a group coordinator killed mid-transaction (see `group_on_another_node`);
//! - a read_committed consumer reads each input record's copy exactly once, the group's
//!   offsets are at the input's end, and the surviving logs on disk hold the same
//!   committed records with no transaction left open.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tidelog_interop::cluster::eventually;
use tidelog_interop::transactions::{
    CopyClients, committed_in_log, coordinator, copy_loop, group_coordinator, read_committed,
    three_nodes_with, transaction_version, transactional_producer,
};

const INPUT: &str = "copy-in";
const OUTPUT: &str = "copy-out";
const PARTITIONS: i32 = 3;
/// Input records per partition.
const PER_PARTITION: i64 = 30;
/// Records a transaction copies at most.
const BATCH: usize = 10;
const ID: &str = "copier";
const WAIT: Duration = Duration::from_secs(60);

/// Writes the input, `in-P-I` to partition P, with an idempotent producer.
fn seed(bootstrap: &str) -> Vec<String> {
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .create()
        .unwrap();
    let mut values = Vec::new();
    for partition in 0..PARTITIONS {
        for i in 0..PER_PARTITION {
            let v = format!("in-{partition}-{i}");
            p.send(
                BaseRecord::<(), String>::to(INPUT)
                    .payload(&v)
                    .partition(partition),
            )
            .unwrap();
            values.push(v);
        }
    }
    p.flush(WAIT).unwrap();
    values
}

fn copier(bootstrap: &str) -> BaseProducer {
    let p = transactional_producer(bootstrap, ID, 10_000);
    p.init_transactions(WAIT).unwrap();
    p
}

fn all_partitions(topic: &str, offset: impl Fn(i32) -> Offset) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(topic, p, offset(p)).unwrap();
    }
    tpl
}

/// A consumer group whose coordinator is not `node`, as FindCoordinator answers on
/// `addr`.
///
/// librdkafka 2.12 sends a transaction's TxnOffsetCommit through a request to the
/// group's coordinator that has no timer (`rd_kafka_coord_req`, its open issues 5456
/// and 5511): when the coordinator it cached is down, the request moves on only when
/// one of the producer's broker connections changes state. A killed broker's
/// connection does so while librdkafka retries it, until a metadata answer without
/// the fenced node makes librdkafka drop that broker (as Kafka's answers do too);
/// after that, `send_offsets_to_transaction` waited past its own timeout, in one run
/// of many until the brokers closed the idle connections ten minutes later. With the
/// group's coordinator on a surviving node, the kill takes the transaction
/// coordinator only, whose requests librdkafka retries on timers.
fn group_on_another_node(addr: &str, node: i32) -> String {
    (0..100)
        .map(|n| format!("copier-group-{n}"))
        .find(|g| group_coordinator(addr, g).is_some_and(|c| c != node))
        .expect("a group coordinated by another node")
}

/// librdkafka's copier and consumer, and the surviving nodes (for a new copier).
struct Clients {
    producer: BaseProducer,
    consumer: BaseConsumer,
    live: String,
}

impl CopyClients for Clients {
    type Error = KafkaError;

    /// Up to [`BATCH`]; a record fetched before a rewind is skipped.
    fn poll_batch(&mut self, next: &mut BTreeMap<i32, i64>) -> Vec<(i32, i64, String)> {
        let mut batch = Vec::new();
        let mut empty = 0;
        while batch.len() < BATCH && empty < 3 {
            match self.consumer.poll(Duration::from_millis(300)) {
                Some(Ok(m)) => {
                    let at = next.entry(m.partition()).or_insert(0);
                    if m.offset() == *at {
                        *at += 1;
                        let value = String::from_utf8_lossy(m.payload().unwrap_or_default());
                        batch.push((m.partition(), m.offset(), value.into_owned()));
                    }
                }
                // librdkafka reports a killed node's connection too; it fetches on.
                Some(Err(_)) | None => empty += 1,
            }
        }
        batch
    }

    fn committed(&self) -> BTreeMap<i32, i64> {
        eventually("the group's committed offsets", WAIT, || {
            let tpl = self
                .consumer
                .committed_offsets(
                    all_partitions(INPUT, |_| Offset::Invalid),
                    Duration::from_secs(5),
                )
                .ok()?;
            let offsets = tpl
                .elements()
                .iter()
                .map(|e| match e.offset() {
                    Offset::Offset(o) => (e.partition(), o),
                    _ => (e.partition(), 0),
                })
                .collect::<BTreeMap<i32, i64>>();
            (offsets.len() == PARTITIONS as usize).then_some(offsets)
        })
    }

    fn seek(&mut self, offsets: &BTreeMap<i32, i64>) {
        self.consumer
            .assign(&all_partitions(INPUT, |p| Offset::Offset(offsets[&p])))
            .unwrap();
    }

    fn transaction(
        &mut self,
        batch: &[(i32, i64, String)],
        abort: bool,
        step: &mut dyn FnMut(&str),
    ) -> KafkaResult<()> {
        let (p, consumer) = (&self.producer, &self.consumer);
        p.begin_transaction()?;
        let mut next = TopicPartitionList::new();
        for (partition, offset, value) in batch {
            let copy = format!("out-{value}");
            p.send(
                BaseRecord::<(), String>::to(OUTPUT)
                    .payload(&copy)
                    .partition(*partition),
            )
            .map_err(|(e, _)| e)?;
            next.add_partition_offset(INPUT, *partition, Offset::Offset(offset + 1))?;
        }
        p.flush(WAIT)?;
        step("flushed");
        let group = consumer.group_metadata().expect("the consumer's group");
        p.send_offsets_to_transaction(&next, &group, WAIT)?;
        step("offsets sent");
        if abort {
            p.abort_transaction(WAIT)
        } else {
            p.commit_transaction(WAIT)
        }
    }

    /// Aborts where librdkafka says the transaction requires it; a new copier
    /// otherwise, or where the abort fails.
    fn recover(&mut self, error: KafkaError, start: Instant, trace: &mut Vec<String>) {
        if let KafkaError::Transaction(e) = &error
            && e.txn_requires_abort()
        {
            let Err(e) = self.producer.abort_transaction(WAIT) else {
                return;
            };
            trace.push(format!("  abort failed at {:?}: {e}", start.elapsed()));
        }
        self.producer = copier(&self.live);
        trace.push(format!("  a new copier at {:?}", start.elapsed()));
    }
}

#[test]
fn a_copy_loop_is_exactly_once_through_aborts_and_a_killed_coordinator() {
    let root = tempfile::tempdir().unwrap();
    let (mut nodes, admin, _) = three_nodes_with(root.path(), &[INPUT, OUTPUT], PARTITIONS);
    let bootstrap = nodes.layout.bootstrap();
    assert_eq!(
        transaction_version(&nodes.layout.addr(0)),
        Some(2),
        "a new cluster finalizes transaction.version 2"
    );
    let input = seed(&bootstrap);
    let producer = copier(&bootstrap);
    let node = coordinator(&nodes.layout.addr(0), ID).expect("a coordinator");
    let victim = (node - 1) as usize;
    let group = group_on_another_node(&nodes.layout.addr(0), node);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer
        .assign(&all_partitions(INPUT, |_| Offset::Beginning))
        .unwrap();
    let live = (0..3)
        .filter(|i| *i != victim)
        .map(|i| nodes.layout.addr(i))
        .collect::<Vec<_>>()
        .join(",");
    let mut clients = Clients {
        producer,
        consumer,
        live: live.clone(),
    };

    let end: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, PER_PARTITION)).collect();
    let kill = (victim, "the coordinator");
    copy_loop(&mut clients, &mut nodes, kill, &end, 2 * WAIT);
    drop((clients, admin));

    let mut expected: Vec<String> = input.iter().map(|v| format!("out-{v}")).collect();
    expected.sort();
    let mut seen = read_committed(&live, OUTPUT, PARTITIONS, expected.len(), WAIT);
    seen.sort();
    assert_eq!(seen, expected, "each input record copied exactly once");

    let survivors: Vec<usize> = (0..3).filter(|i| *i != victim).collect();
    nodes.terminate_all();
    let mut on_disk = Vec::new();
    for p in 0..PARTITIONS {
        let (_, values, open) = survivors
            .iter()
            .map(|i| committed_in_log(&nodes.dir(*i), OUTPUT, p))
            .max_by_key(|(end, _, _)| *end)
            .expect("a survivor");
        assert!(!open, "{OUTPUT}-{p}: no transaction left open");
        on_disk.extend(values);
    }
    on_disk.sort();
    assert_eq!(on_disk, expected, "the surviving logs hold each copy once");
}
