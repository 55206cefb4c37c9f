//! A topic deleted and created again under the same name, as librdkafka's test 0107 does
//! it: one producer keeps producing (records without a partition, placed by its
//! partitioner) before the deletion, while the topic is gone and after it is created
//! again with fewer partitions, and must deliver everything once the new topic exists.
//!
//! librdkafka tells the two incarnations apart by the topic id of Metadata (v10+); a
//! broker that gives none leaves it sending to the old topic's partitions 3 to 9 (its
//! partition count only ever grows for one topic id), and those records never leave.
//! Run on a single node and on a 3-node cluster, with the same producer instance and a
//! new one; a fresh consumer then reads the second incarnation's records.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::{ClientConfig, ClientContext};
use tidelog::{Broker, Server};
use tidelog_interop::cluster::{Layout, eventually, shutdown_all, start_nodes};

const TOPIC: &str = "recreated";

/// Numbers the readers' groups (each reads from the start).
static READERS: AtomicUsize = AtomicUsize::new(0);

/// Partition count of `TOPIC` as `bootstrap` answers, None while it does not exist.
fn partitions(bootstrap: &str) -> Option<usize> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .ok()?;
    let md = consumer
        .fetch_metadata(Some(TOPIC), Duration::from_secs(5))
        .ok()?;
    let t = md.topics().first()?;
    (t.error().is_none() && !t.partitions().is_empty()).then(|| t.partitions().len())
}

fn create(admin: &AdminClient<DefaultClientContext>, bootstrap: &str, n: i32, rf: i32) {
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let created = block_on(admin.create_topics(
        &[NewTopic::new(TOPIC, n, TopicReplication::Fixed(rf))],
        &opts,
    ))
    .unwrap();
    assert!(created[0].is_ok(), "{created:?}");
    eventually("the topic in Metadata", Duration::from_secs(30), || {
        (partitions(bootstrap) == Some(n as usize)).then_some(())
    });
}

/// Counts the records of value `after` delivered (and those refused).
#[derive(Default)]
struct Deliveries {
    after_ok: AtomicUsize,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Ok(m) = result
            && m.payload() == Some(b"after".as_slice())
        {
            self.after_ok.fetch_add(1, Ordering::Relaxed);
        }
    }
}

type CountingProducer = BaseProducer<Deliveries>;

fn send(producer: &CountingProducer, value: &str) {
    producer
        .send(BaseRecord::<(), str>::to(TOPIC).payload(value))
        .expect("a send");
    producer.poll(Duration::ZERO);
}

/// How many records of value `after` a fresh consumer reads, waiting (at most 30 s)
/// until it has read `expected` of them.
fn read_after(bootstrap: &str, expected: usize) -> usize {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set(
            "group.id",
            format!("reader-{}", READERS.fetch_add(1, Ordering::Relaxed)),
        )
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[TOPIC]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut after = 0;
    while after < expected && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(500))
            && m.payload() == Some(b"after".as_slice())
        {
            after += 1;
        }
    }
    after
}

/// The 0107 scenario against `bootstrap` (replication factor `rf`): the records the
/// producer sent before it learnt of the new topic may fail (as with Kafka, where 0107
/// ignores their delivery errors), but none stays stuck, and records keep being
/// delivered to the new topic.
fn create_delete_create(bootstrap: &str, rf: i32, same_producer: bool) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let new_producer = || -> CountingProducer {
        ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("topic.metadata.refresh.interval.ms", "500")
            .set("message.timeout.ms", "120000")
            .create_with_context(Deliveries::default())
            .unwrap()
    };
    create(&admin, bootstrap, 10, rf);
    let mut producer = new_producer();
    for _ in 0..100 {
        send(&producer, "before");
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("the first topic's records delivered");

    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let deleted = block_on(admin.delete_topics(&[TOPIC], &opts)).unwrap();
    assert!(deleted[0].is_ok(), "{deleted:?}");
    eventually("the topic gone", Duration::from_secs(30), || {
        partitions(bootstrap).is_none().then_some(())
    });
    // Produced while the topic is gone: queued on the old topic's partitions.
    for _ in 0..20 {
        send(&producer, "during");
        std::thread::sleep(Duration::from_millis(50));
    }

    create(&admin, bootstrap, 3, rf);
    if !same_producer {
        producer = new_producer();
    }
    // As 0107: keep producing until 30 records are delivered to the new topic.
    let deadline = Instant::now() + Duration::from_secs(30);
    while producer.context().after_ok.load(Ordering::Relaxed) < 30 && Instant::now() < deadline {
        send(&producer, "after");
        std::thread::sleep(Duration::from_millis(20));
    }
    let flushed = producer.flush(Duration::from_secs(30));
    let which = if same_producer {
        "same producer"
    } else {
        "new producer"
    };
    assert!(
        flushed.is_ok(),
        "{} records left unflushed 30 s after the topic was created again ({which})",
        producer.in_flight_count(),
    );
    let delivered = producer.context().after_ok.load(Ordering::Relaxed);
    assert!(delivered >= 30, "{delivered} records delivered ({which})");
    assert_eq!(read_after(bootstrap, delivered), delivered, "({which})");
}

fn single_node(same_producer: bool) {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    create_delete_create(&server.local_addr().to_string(), 1, same_producer);
}

#[test]
fn single_node_same_producer_delivers_to_the_recreated_topic() {
    single_node(true);
}

#[test]
fn single_node_new_producer_delivers_to_the_recreated_topic() {
    single_node(false);
}

#[test]
fn three_nodes_same_and_new_producer_deliver_to_the_recreated_topic() {
    let layout = Layout::new(3);
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (_brokers, servers) = start_nodes(&layout, &dirs, |_, b| b);
    let bootstrap = layout.bootstrap();
    eventually("3 brokers", Duration::from_secs(30), || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .ok()?;
        let md = consumer.fetch_metadata(None, Duration::from_secs(5)).ok()?;
        (md.brokers().len() == 3).then_some(())
    });
    create_delete_create(&bootstrap, 3, true);
    // Once more, with a producer made after the second creation.
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    assert!(block_on(admin.delete_topics(&[TOPIC], &opts)).unwrap()[0].is_ok());
    eventually("the topic gone", Duration::from_secs(30), || {
        partitions(&bootstrap).is_none().then_some(())
    });
    create_delete_create(&bootstrap, 3, false);
    shutdown_all(servers);
}
