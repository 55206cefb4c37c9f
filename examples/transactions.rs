//! Transactions in process: an atomic write to two topics (every order with its
//! payment, or neither), then a consume-transform-produce loop on another thread that
//! turns orders into shipments exactly once: each transaction holds the shipments of
//! one poll and the group's offsets past its orders (`send_offsets_to_transaction`).
//! Readers use read_committed, so an aborted transaction is never seen. Checks what it
//! reads and exits non-zero on a mismatch.
//!
//! Run with `cargo run --release --example transactions`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tidelog::{
    Broker, Consumer, ConsumerConfig, GroupConfig, GroupConsumer, IsolationLevel, OffsetReset,
    Producer, ProducerRecord, TopicConfig,
};

const ORDERS: usize = 1_000;
const PER_TRANSACTION: usize = 50;

/// Every value of `topic` a read_committed consumer finds.
fn read_committed(broker: &Broker, topic: &str) -> tidelog::Result<Vec<String>> {
    let config = ConsumerConfig::default().isolation_level(IsolationLevel::ReadCommitted);
    let mut reader = Consumer::new(broker, config);
    let partitions = broker.topic(topic)?.partition_count();
    let all: Vec<(&str, i32)> = (0..partitions).map(|p| (topic, p)).collect();
    reader.assign(&all)?;
    reader.seek_to_beginning()?;
    let mut values = Vec::new();
    for _ in 0..100 {
        let polled = reader.poll(Duration::from_millis(20))?;
        if polled.is_empty() {
            break;
        }
        for r in polled.iter() {
            values.push(String::from_utf8_lossy(r?.value.unwrap_or_default()).into_owned());
        }
    }
    values.sort();
    Ok(values)
}

fn check(what: &str, ok: bool) {
    if !ok {
        eprintln!("mismatch: {what}");
        std::process::exit(1);
    }
    println!("ok: {what}");
}

/// Orders and payments, written together in transactions of `PER_TRANSACTION`; one
/// more transaction is aborted.
fn write_orders(broker: &Broker) -> tidelog::Result<()> {
    let producer = Producer::builder(broker)
        .transactional_id("order-writer")
        .build()?;
    producer.init_transactions()?;
    for chunk in (0..ORDERS).collect::<Vec<_>>().chunks(PER_TRANSACTION) {
        producer.begin_transaction()?;
        for i in chunk {
            let key = format!("order-{i:04}");
            producer.send_nowait(
                "orders",
                ProducerRecord::keyed(key.as_bytes(), key.as_bytes()),
            )?;
            let payment = format!("payment-{i:04}");
            producer.send_nowait(
                "payments",
                ProducerRecord::keyed(key.as_bytes(), payment.as_bytes()),
            )?;
        }
        producer.commit_transaction()?;
    }
    producer.begin_transaction()?;
    producer.send("orders", ProducerRecord::new(b"order-never"))?;
    producer.send("payments", ProducerRecord::new(b"payment-never"))?;
    producer.abort_transaction()
}

/// Turns orders into shipments, one transaction per poll, until every order is shipped.
fn ship(broker: &Broker) -> tidelog::Result<usize> {
    let producer = Producer::builder(broker)
        .transactional_id("shipper")
        .build()?;
    producer.init_transactions()?;
    let config = GroupConfig::new("shippers", &["orders"])
        .isolation_level(IsolationLevel::ReadCommitted)
        .auto_offset_reset(OffsetReset::Earliest)
        .enable_auto_commit(false);
    let mut member = GroupConsumer::join(broker, config)?;
    let mut shipped = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while shipped < ORDERS && Instant::now() < deadline {
        let polled = member.poll(Duration::from_millis(50))?;
        if polled.is_empty() {
            continue;
        }
        producer.begin_transaction()?;
        let mut partitions = BTreeSet::new();
        for r in polled.iter() {
            let r = r?;
            let order = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
            let shipment = order.replace("order", "shipment");
            producer.send_nowait("shipments", ProducerRecord::new(shipment.as_bytes()))?;
            partitions.insert(r.partition);
            shipped += 1;
        }
        // The next offset to read of each partition polled: its position, which is
        // past the transactions' markers too.
        let mut offsets = Vec::new();
        for p in partitions {
            offsets.push(("orders".to_string(), p, member.position("orders", p)?));
        }
        producer.send_offsets_to_transaction(&offsets, &member.group_metadata())?;
        producer.commit_transaction()?;
    }
    if shipped < ORDERS {
        return Err(tidelog::Error::Timeout("shipping every order".into()));
    }
    Ok(shipped)
}

fn main() -> tidelog::Result<()> {
    let dir = tempfile::tempdir()
        .map_err(|e| tidelog::Error::io("create temporary directory", std::env::temp_dir(), e))?;
    let broker = Broker::open(dir.path())?;
    for topic in ["orders", "payments", "shipments"] {
        broker.create_topic_if_missing(topic, 3, TopicConfig::new())?;
    }
    let started = Instant::now();
    write_orders(&broker)?;
    let orders = read_committed(&broker, "orders")?;
    let payments = read_committed(&broker, "payments")?;
    let want: Vec<String> = (0..ORDERS).map(|i| format!("order-{i:04}")).collect();
    check(
        "every committed order is read, the aborted one is not",
        orders == want,
    );
    check(
        "every order has its payment",
        payments
            == want
                .iter()
                .map(|o| o.replace("order", "payment"))
                .collect::<Vec<_>>(),
    );

    let shipper = {
        let broker = broker.clone();
        std::thread::spawn(move || ship(&broker))
    };
    let shipped = shipper.join().expect("shipper thread")?;
    let shipments = read_committed(&broker, "shipments")?;
    check(
        "every order is shipped exactly once",
        shipped == ORDERS
            && shipments
                == want
                    .iter()
                    .map(|o| o.replace("order", "shipment"))
                    .collect::<Vec<_>>(),
    );
    println!(
        "{ORDERS} orders and payments in {} transactions, shipped exactly once, in {:?}",
        ORDERS / PER_TRANSACTION,
        started.elapsed()
    );
    broker.close()
}
