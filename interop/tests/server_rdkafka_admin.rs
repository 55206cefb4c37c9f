//! librdkafka's AdminClient (the `rdkafka` crate) against `tidelog::Server`:
//! CreatePartitions, AlterConfigs, DescribeConfigs and DeleteRecords, each result checked
//! in the broker itself as well as in what the client was told.

use std::net::SocketAddr;
use std::time::Duration;

use futures_executor::block_on;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewPartitions, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use tidelog::{Broker, Producer, ProducerRecord, Server};

#[test]
fn the_admin_client_grows_configures_and_trims_topics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::open(dir.path()).unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", server.local_addr().to_string())
        .create()
        .unwrap();
    let opts = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));

    let created = block_on(admin.create_topics(
        &[NewTopic::new("admin", 1, TopicReplication::Fixed(1))],
        &opts,
    ))
    .unwrap();
    assert_eq!(created, vec![Ok("admin".to_string())]);

    // CreatePartitions: grow to 4; shrinking is INVALID_PARTITIONS.
    let grown =
        block_on(admin.create_partitions(&[NewPartitions::new("admin", 4)], &opts)).unwrap();
    assert_eq!(grown, vec![Ok("admin".to_string())]);
    assert_eq!(broker.topic("admin").unwrap().partition_count(), 4);
    let shrunk =
        block_on(admin.create_partitions(&[NewPartitions::new("admin", 2)], &opts)).unwrap();
    assert_eq!(
        shrunk,
        vec![Err((
            "admin".to_string(),
            RDKafkaErrorCode::InvalidPartitions
        ))]
    );

    // AlterConfigs, then DescribeConfigs shows the new values, and the logs have them.
    let topic = ResourceSpecifier::Topic("admin");
    let change = AlterConfig::new(topic)
        .set("retention.ms", "60000")
        .set("cleanup.policy", "compact")
        .set("compression.type", "lz4");
    let altered = block_on(admin.alter_configs(&[change], &opts)).unwrap();
    assert!(altered[0].is_ok(), "{altered:?}");
    let described =
        block_on(admin.describe_configs(&[ResourceSpecifier::Topic("admin")], &opts)).unwrap();
    let resource = described[0].as_ref().unwrap();
    let value = |k: &str| resource.get(k).and_then(|e| e.value.clone());
    assert_eq!(value("retention.ms").as_deref(), Some("60000"));
    assert_eq!(value("cleanup.policy").as_deref(), Some("compact"));
    assert_eq!(value("compression.type").as_deref(), Some("lz4"));
    let log = broker
        .topic("admin")
        .unwrap()
        .partition(3)
        .unwrap()
        .config();
    assert_eq!(log.retention_ms, Some(60_000));
    assert_eq!(log.compression_type.as_str(), "lz4");
    let bad = AlterConfig::new(ResourceSpecifier::Topic("admin")).set("retention.ms", "later");
    // rdkafka 0.39 reports every resource of AlterConfigs as Ok (it does not read the
    // per-resource error); the refusal shows in the settings, which did not change.
    block_on(admin.alter_configs(&[bad], &opts)).unwrap();
    let described =
        block_on(admin.describe_configs(&[ResourceSpecifier::Topic("admin")], &opts)).unwrap();
    let retention = described[0]
        .as_ref()
        .unwrap()
        .get("retention.ms")
        .and_then(|e| e.value.clone());
    assert_eq!(retention.as_deref(), Some("60000"));

    // DeleteRecords: the log start moves to the offset asked for.
    let producer = Producer::new(&broker).unwrap();
    for i in 0..10u8 {
        producer
            .send("admin", ProducerRecord::new(&[i]).partition(1))
            .unwrap();
    }
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("admin", 1, Offset::Offset(6))
        .unwrap();
    let trimmed = block_on(admin.delete_records(&offsets, &opts)).unwrap();
    let p = trimmed.find_partition("admin", 1).unwrap();
    assert!(p.error().is_ok(), "{:?}", p.error());
    assert_eq!(p.offset(), Offset::Offset(6));
    let partition = broker.topic("admin").unwrap().partition(1).unwrap();
    assert_eq!(partition.log_start_offset(), 6);
    let mut beyond = TopicPartitionList::new();
    beyond
        .add_partition_offset("admin", 1, Offset::Offset(50))
        .unwrap();
    let refused = block_on(admin.delete_records(&beyond, &opts)).unwrap();
    let p = refused.find_partition("admin", 1).unwrap();
    assert!(
        p.error().is_err(),
        "offset beyond the high watermark is refused"
    );
    assert_eq!(partition.log_start_offset(), 6);

    drop(admin);
    server.shutdown().unwrap();
    broker.close().unwrap();
}
