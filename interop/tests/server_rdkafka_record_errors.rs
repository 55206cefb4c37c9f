//! librdkafka against `tidelog::Server`: per-record produce errors (KIP-467) and a deprecated
//! topic setting that old clients still send.
//!
//! The first two tests are the scenario of librdkafka's own test 0011
//! (`test_message_single_partition_record_fail`, both variations): records without a key
//! sent to a compacted topic are refused one by one with INVALID_RECORD (KIP-467's
//! `record_errors`), and the client fails exactly those records; the keyed records of a
//! refused batch fail as _INVALID_DIFFERENT_RECORD, those of batches of their own land.
//! The second sets `message.format.version` with the AdminClient, as librdkafka's test 0092
//! does: Kafka 3.x accepts and ignores it.

use std::net::SocketAddr;
use std::time::Duration;

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::{ClientConfig, ClientContext, Message};
use tidelog::{Broker, CleanupPolicy, Server, ServerHandle, TopicConfig};

/// Collects every delivery report: the record's key, and Ok(offset) or Err(code).
#[derive(Default)]
struct Reports(std::sync::Mutex<Vec<Report>>);

struct Ctx(std::sync::Arc<Reports>);

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let report = match result {
            Ok(m) => (m.key().map(<[u8]>::to_vec), Ok(m.offset())),
            Err((KafkaError::MessageProduction(code), m)) => {
                (m.key().map(<[u8]>::to_vec), Err(*code))
            }
            Err((e, m)) => panic!("unexpected delivery error {e} for {:?}", m.key()),
        };
        self.0.0.lock().unwrap().push(report);
    }
}

fn server() -> (tempfile::TempDir, Broker, ServerHandle) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    (dir, broker, server)
}

/// Sends 100 records to a new compacted topic, every tenth without a key (test 0011's
/// messages), and returns the delivery reports and the log end of the partition.
type Report = (Option<Vec<u8>>, Result<i64, RDKafkaErrorCode>);

fn send_keyless_among_keyed(one_record_per_batch: bool) -> (Vec<Report>, i64) {
    let (_dir, broker, server) = server();
    let config = TopicConfig::new().cleanup_policy(CleanupPolicy::Compact);
    broker.create_topic("compacted", 1, config).unwrap();

    let reports = std::sync::Arc::new(Reports::default());
    let mut client = ClientConfig::new();
    client
        .set("bootstrap.servers", server.local_addr().to_string())
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "20000");
    if one_record_per_batch {
        client.set("batch.size", "1");
    } else {
        // All 100 records in one batch.
        client.set("linger.ms", "200");
    }
    let producer: ThreadedProducer<Ctx> = client.create_with_context(Ctx(reports.clone())).unwrap();
    for i in 0..100u32 {
        let key = format!("key-{i}");
        let value = format!("value-{i}");
        let record = BaseRecord::<str, str>::to("compacted").payload(&value);
        let record = if i % 10 == 0 {
            record
        } else {
            record.key(&key)
        };
        producer.send(record).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let reports = std::mem::take(&mut *reports.0.lock().unwrap());
    let partition = broker.topic("compacted").unwrap().partition(0).unwrap();
    (reports, partition.log_end_offset())
}

fn count(reports: &[Report], want: Result<(), RDKafkaErrorCode>) -> usize {
    reports
        .iter()
        .filter(|(_, r)| r.map(|_| ()) == want)
        .count()
}

#[test]
fn keyless_records_in_one_batch_fail_and_the_batch_with_them() {
    let (reports, log_end) = send_keyless_among_keyed(false);
    assert_eq!(reports.len(), 100, "every record gets a delivery report");
    // INVALID_RECORD names exactly the keyless records (record_errors); the batch is
    // refused whole, so librdkafka fails the others as _INVALID_DIFFERENT_RECORD.
    for (key, result) in &reports {
        match key {
            None => assert_eq!(*result, Err(RDKafkaErrorCode::InvalidRecord)),
            Some(_) => assert_eq!(*result, Err(RDKafkaErrorCode::InvalidDifferentRecord)),
        }
    }
    assert_eq!(count(&reports, Err(RDKafkaErrorCode::InvalidRecord)), 10);
    assert_eq!(log_end, 0, "nothing of the refused batch is in the log");
}

#[test]
fn keyless_records_in_batches_of_their_own_fail_alone() {
    let (reports, log_end) = send_keyless_among_keyed(true);
    assert_eq!(reports.len(), 100, "every record gets a delivery report");
    assert_eq!(count(&reports, Err(RDKafkaErrorCode::InvalidRecord)), 10);
    assert_eq!(count(&reports, Ok(())), 90, "{reports:?}");
    assert!(
        reports.iter().all(|(key, r)| key.is_some() == r.is_ok()),
        "only keyless records fail"
    );
    assert_eq!(log_end, 90);
}

#[test]
fn message_format_version_is_accepted_by_alter_configs() {
    let (_dir, broker, server) = server();
    broker.create_topic("old", 1, TopicConfig::new()).unwrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", server.local_addr().to_string())
        .create()
        .unwrap();
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let change = AlterConfig::new(ResourceSpecifier::Topic("old"))
        .set("message.format.version", "0.10.0")
        .set("retention.ms", "120000");
    let altered = block_on(admin.alter_configs(&[change], &opts)).unwrap();
    assert!(altered[0].is_ok(), "{altered:?}");
    // Ignored, and the other setting of the same request applied.
    let log = broker.topic("old").unwrap().partition(0).unwrap().config();
    assert_eq!(log.retention_ms, Some(120_000));
    let described =
        block_on(admin.describe_configs(&[ResourceSpecifier::Topic("old")], &opts)).unwrap();
    let resource = described[0].as_ref().unwrap();
    let value = resource
        .get("message.format.version")
        .and_then(|e| e.value.clone());
    assert_eq!(value.as_deref(), Some("3.0-IV1"));
    // A plain producer still works after the change.
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", server.local_addr().to_string())
        .create()
        .unwrap();
    producer
        .send(BaseRecord::<str, str>::to("old").key("k").payload("v"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    assert_eq!(
        broker
            .topic("old")
            .unwrap()
            .partition(0)
            .unwrap()
            .log_end_offset(),
        1
    );
}
