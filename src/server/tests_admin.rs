//! The admin APIs added for Kafka's admin clients (CreatePartitions, AlterConfigs,
//! IncrementalAlterConfigs, DeleteRecords, DescribeCluster), the topic
//! `compression.type` on Produce and the broker's default partition count, over a real
//! socket with requests encoded by `kafka-protocol`: every advertised version, results
//! and error codes checked.

use std::net::SocketAddr;

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::Client;
use super::*;
use crate::record::{BatchBuilder, Compression, batches};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn topic_name(v: &str) -> TopicName {
    TopicName(s(v))
}

fn create(c: &mut Client, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let configs = configs
        .iter()
        .map(|(k, v)| {
            create_topics_request::CreatableTopicConfig::default()
                .with_name(s(k))
                .with_value(Some(s(v)))
        })
        .collect();
    let req = CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(topic_name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
            .with_configs(configs),
    ]);
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 4, &req);
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
}

fn partition_count(c: &mut Client, topic: &str) -> i32 {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name(topic))),
        ]))
        .with_allow_auto_topic_creation(false);
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 8, &req);
    resp.topics[0].partitions.len() as i32
}

/// The value of `key` in DescribeConfigs of `topic`.
fn config(c: &mut Client, topic: &str, key: &str) -> String {
    let req = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(topic))
            .with_configuration_keys(None),
    ]);
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 3, &req);
    resp.results[0]
        .configs
        .iter()
        .find(|e| e.name.as_str() == key)
        .and_then(|e| e.value.as_ref())
        .map(|v| v.to_string())
        .unwrap_or_else(|| panic!("no {key} in {:?}", resp.results[0]))
}

fn batch(values: &[&str], codec: Compression) -> Vec<u8> {
    let mut b = BatchBuilder::new().compression(codec);
    for v in values {
        b.push(1_700_000_000_000, None, Some(v.as_bytes()), &[]);
    }
    b.finish()
}

fn produce(c: &mut Client, topic: &str, partition: i32, records: Vec<u8>) -> (i16, i64) {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![
            produce_request::TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(records))),
                ]),
        ]);
    let resp: ProduceResponse = c.call(ApiKey::Produce, 8, &req);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// The codecs of the stored batches of `topic`-0 and the values they hold.
fn stored(broker: &crate::broker::Broker, topic: &str) -> (Vec<Compression>, Vec<String>) {
    let partition = broker.topic(topic).unwrap().partition(0).unwrap();
    let slice = partition.read(0, 1 << 20).unwrap();
    let mut codecs = Vec::new();
    let mut values = Vec::new();
    let mut scratch = Vec::new();
    for b in batches(&slice) {
        let b = b.unwrap();
        codecs.push(b.codec().unwrap());
        for r in b.decode_records("t", 1 << 20, &mut scratch).unwrap() {
            values.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
        }
    }
    (codecs, values)
}

/// A server on a free port over a broker in `dir`, and that broker.
fn serve(dir: &std::path::Path) -> (ServerHandle, crate::broker::Broker) {
    let broker = crate::broker::Broker::open(dir).unwrap();
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    (server, broker)
}

fn connect(server: &ServerHandle) -> Client {
    Client::connect(server.local_addr())
}

#[test]
fn create_partitions_grows_topics_with_kafkas_error_codes_in_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _broker) = serve(dir.path());
    let mut c = connect(&server);
    create(&mut c, "grow", 1, &[]);
    let req = |topics: Vec<(&str, i32)>, validate_only: bool| {
        CreatePartitionsRequest::default()
            .with_timeout_ms(1000)
            .with_validate_only(validate_only)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, n)| {
                        create_partitions_request::CreatePartitionsTopic::default()
                            .with_name(topic_name(t))
                            .with_count(n)
                            .with_assignments(None)
                    })
                    .collect(),
            )
    };
    let mut count = 1;
    for version in 0..=3 {
        // validate_only changes nothing.
        let resp: CreatePartitionsResponse = c.call(
            ApiKey::CreatePartitions,
            version,
            &req(vec![("grow", count + 5)], true),
        );
        assert_eq!(resp.results[0].error_code, 0, "v{version}");
        assert_eq!(partition_count(&mut c, "grow"), count);
        count += 1;
        let resp: CreatePartitionsResponse = c.call(
            ApiKey::CreatePartitions,
            version,
            &req(vec![("grow", count)], false),
        );
        assert_eq!(
            resp.results[0].error_code, 0,
            "v{version}: {:?}",
            resp.results[0]
        );
        assert_eq!(resp.results[0].name.0.as_str(), "grow");
        assert_eq!(partition_count(&mut c, "grow"), count, "v{version}");
    }
    // The new partitions take records.
    assert_eq!(
        produce(&mut c, "grow", 4, batch(&["x"], Compression::None)),
        (0, 0)
    );

    let resp: CreatePartitionsResponse = c.call(
        ApiKey::CreatePartitions,
        3,
        &req(
            vec![
                ("nope", 3),
                ("grow", 2),
                ("grow", count),
                ("__consumer_offsets", 9),
            ],
            false,
        ),
    );
    let codes: Vec<i16> = resp.results.iter().map(|r| r.error_code).collect();
    // Unknown topic; the duplicated "grow" fails both of its entries; internal topic.
    assert_eq!(codes, vec![3, 42, 42, 42]);
    for (n, want) in [(2, 37), (count, 37)] {
        let resp: CreatePartitionsResponse =
            c.call(ApiKey::CreatePartitions, 3, &req(vec![("grow", n)], false));
        assert_eq!(resp.results[0].error_code, want, "count {n}");
        assert!(resp.results[0].error_message.is_some());
    }
    // Manual assignments must name this node, once per new partition.
    let with = |ids: Vec<Vec<i32>>| {
        CreatePartitionsRequest::default().with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic_name("grow"))
                .with_count(count + ids.len() as i32)
                .with_assignments(Some(
                    ids.into_iter()
                        .map(|b| {
                            create_partitions_request::CreatePartitionsAssignment::default()
                                .with_broker_ids(b.into_iter().map(BrokerId).collect())
                        })
                        .collect(),
                )),
        ])
    };
    let resp: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &with(vec![vec![7]]));
    assert_eq!(resp.results[0].error_code, 39);
    let resp: CreatePartitionsResponse = c.call(
        ApiKey::CreatePartitions,
        3,
        &with(vec![vec![0], vec![0, 1]]),
    );
    assert_eq!(resp.results[0].error_code, 39);
    let resp: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, 3, &with(vec![vec![0]]));
    assert_eq!(resp.results[0].error_code, 0);
    assert_eq!(partition_count(&mut c, "grow"), count + 1);
    server.shutdown().unwrap();
}

#[test]
fn alter_configs_replaces_and_incremental_alter_configs_edits_topic_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (server, broker) = serve(dir.path());
    let mut c = connect(&server);
    create(&mut c, "cfg", 1, &[("retention.ms", "1000")]);
    let alter = |name: &str, rtype: i8, configs: &[(&str, Option<&str>)], validate: bool| {
        AlterConfigsRequest::default()
            .with_validate_only(validate)
            .with_resources(vec![
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(rtype)
                    .with_resource_name(s(name))
                    .with_configs(
                        configs
                            .iter()
                            .map(|(k, v)| {
                                alter_configs_request::AlterableConfig::default()
                                    .with_name(s(k))
                                    .with_value(v.map(s))
                            })
                            .collect(),
                    ),
            ])
    };
    for version in 0..=2 {
        let ms = format!("{}", 60_000 + i64::from(version));
        let r: AlterConfigsResponse = c.call(
            ApiKey::AlterConfigs,
            version,
            &alter(
                "cfg",
                2,
                &[
                    ("cleanup.policy", Some("compact")),
                    ("retention.ms", Some(&ms)),
                ],
                false,
            ),
        );
        assert_eq!(
            r.responses[0].error_code, 0,
            "v{version}: {:?}",
            r.responses[0]
        );
        assert_eq!(r.responses[0].resource_name.as_str(), "cfg");
        assert_eq!(config(&mut c, "cfg", "retention.ms"), ms);
        assert_eq!(config(&mut c, "cfg", "cleanup.policy"), "compact");
    }
    // DescribeConfigs tells overrides from defaults (kafka-configs --describe shows those).
    let r: DescribeConfigsResponse = c.call(
        ApiKey::DescribeConfigs,
        3,
        &DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("cfg"))
                .with_configuration_keys(Some(vec![s("retention.ms"), s("segment.bytes")])),
        ]),
    );
    let sources: Vec<(String, i8)> = r.results[0]
        .configs
        .iter()
        .map(|e| (e.name.to_string(), e.config_source))
        .collect();
    assert_eq!(
        sources,
        vec![
            ("segment.bytes".to_string(), 5),
            ("retention.ms".to_string(), 1)
        ]
    );
    // AlterConfigs replaces every override: what is not named returns to the default.
    let r: AlterConfigsResponse = c.call(
        ApiKey::AlterConfigs,
        2,
        &alter("cfg", 2, &[("min.insync.replicas", Some("2"))], false),
    );
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(config(&mut c, "cfg", "min.insync.replicas"), "2");
    assert_eq!(config(&mut c, "cfg", "cleanup.policy"), "delete");
    assert_eq!(config(&mut c, "cfg", "retention.ms"), "604800000");
    // validate_only checks and changes nothing; bad input gets Kafka's codes.
    for (name, rtype, configs, want) in [
        ("cfg", 2, vec![("retention.ms", Some("5"))], 0),
        ("cfg", 2, vec![("retention.ms", Some("soon"))], 40),
        ("cfg", 2, vec![("no.such.setting", Some("1"))], 40),
        ("cfg", 2, vec![("compression.type", Some("brotli"))], 40),
        ("cfg", 2, vec![("min.insync.replicas", Some("0"))], 40),
        ("cfg", 2, vec![("retention.ms", None)], 42),
        (
            "cfg",
            2,
            vec![("retention.ms", Some("1")), ("retention.ms", Some("2"))],
            42,
        ),
        ("missing", 2, vec![("retention.ms", Some("1"))], 3),
        // A broker config tidelog cannot change while it runs (as a cluster answers).
        ("0", 4, vec![("log.retention.ms", Some("1"))], 40),
        ("7", 4, vec![("log.retention.ms", Some("1"))], 42),
        ("cfg", 9, vec![], 42),
    ] {
        let r: AlterConfigsResponse =
            c.call(ApiKey::AlterConfigs, 1, &alter(name, rtype, &configs, true));
        assert_eq!(r.responses[0].error_code, want, "{name} {configs:?}");
        assert_eq!(r.responses[0].error_message.is_some(), want != 0);
    }
    assert_eq!(config(&mut c, "cfg", "retention.ms"), "604800000");

    // IncrementalAlterConfigs: SET, DELETE, APPEND, SUBTRACT.
    let inc = |ops: &[(&str, i8, Option<&str>)]| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("cfg"))
                .with_configs(
                    ops.iter()
                        .map(|(k, op, v)| {
                            incremental_alter_configs_request::AlterableConfig::default()
                                .with_name(s(k))
                                .with_config_operation(*op)
                                .with_value(v.map(s))
                        })
                        .collect(),
                ),
        ])
    };
    for version in 0..=1 {
        let r: IncrementalAlterConfigsResponse = c.call(
            ApiKey::IncrementalAlterConfigs,
            version,
            &inc(&[
                ("compression.type", 0, Some("zstd")),
                ("min.insync.replicas", 1, None),
            ]),
        );
        assert_eq!(
            r.responses[0].error_code, 0,
            "v{version}: {:?}",
            r.responses[0]
        );
        assert_eq!(config(&mut c, "cfg", "compression.type"), "zstd");
        assert_eq!(
            config(&mut c, "cfg", "min.insync.replicas"),
            "1",
            "deleted override"
        );
    }
    let r: IncrementalAlterConfigsResponse = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &inc(&[("cleanup.policy", 2, Some("compact"))]),
    );
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(config(&mut c, "cfg", "cleanup.policy"), "compact,delete");
    assert_eq!(
        config(&mut c, "cfg", "compression.type"),
        "zstd",
        "other overrides are kept"
    );
    let r: IncrementalAlterConfigsResponse = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &inc(&[("cleanup.policy", 3, Some("delete"))]),
    );
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(config(&mut c, "cfg", "cleanup.policy"), "compact");
    for (ops, want) in [
        (vec![("retention.ms", 2, Some("5"))], 40),
        (vec![("retention.ms", 7, Some("5"))], 42),
        (vec![("retention.ms", 0, None)], 42),
        (vec![("compression.type", 0, Some("none"))], 40),
    ] {
        let r: IncrementalAlterConfigsResponse =
            c.call(ApiKey::IncrementalAlterConfigs, 1, &inc(&ops));
        assert_eq!(r.responses[0].error_code, want, "{ops:?}");
    }
    assert_eq!(config(&mut c, "cfg", "compression.type"), "zstd");
    // The change reached the partition logs.
    let log_config = broker
        .topic("cfg")
        .unwrap()
        .partition(0)
        .unwrap()
        .log()
        .config();
    assert_eq!(log_config.compression_type.as_str(), "zstd");
    server.shutdown().unwrap();
}

#[test]
fn delete_records_advances_the_log_start_within_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let (server, broker) = serve(dir.path());
    let mut c = connect(&server);
    create(&mut c, "dr", 2, &[]);
    for _ in 0..10 {
        produce(&mut c, "dr", 0, batch(&["a", "b"], Compression::None));
    }
    let req = |parts: Vec<(&str, i32, i64)>| {
        DeleteRecordsRequest::default()
            .with_timeout_ms(1000)
            .with_topics(
                parts
                    .into_iter()
                    .map(|(t, p, o)| {
                        delete_records_request::DeleteRecordsTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(vec![
                                delete_records_request::DeleteRecordsPartition::default()
                                    .with_partition_index(p)
                                    .with_offset(o),
                            ])
                    })
                    .collect(),
            )
    };
    let partition = broker.topic("dr").unwrap().partition(0).unwrap();
    for (version, offset) in [(0, 4), (1, 6), (2, 11)] {
        let r: DeleteRecordsResponse = c.call(
            ApiKey::DeleteRecords,
            version,
            &req(vec![("dr", 0, offset)]),
        );
        let p = &r.topics[0].partitions[0];
        assert_eq!((p.error_code, p.low_watermark), (0, offset), "v{version}");
        assert_eq!(partition.log_start_offset(), offset);
    }
    let r: DeleteRecordsResponse = c.call(
        ApiKey::DeleteRecords,
        2,
        &req(vec![
            ("dr", 0, 21),
            ("dr", 0, -5),
            ("dr", 7, 1),
            ("nope", 0, 1),
            ("__consumer_offsets", 0, 0),
        ]),
    );
    let got: Vec<(i16, i64)> = r
        .topics
        .iter()
        .map(|t| (t.partitions[0].error_code, t.partitions[0].low_watermark))
        .collect();
    assert_eq!(got, vec![(1, -1), (1, -1), (3, -1), (3, -1), (17, -1)]);
    // -1 is the high watermark.
    let r: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, 2, &req(vec![("dr", 0, -1)]));
    assert_eq!(r.topics[0].partitions[0].low_watermark, 20);
    assert_eq!(partition.log_start_offset(), 20);
    server.shutdown().unwrap();
}

#[test]
fn describe_cluster_lists_this_node_at_its_advertised_address() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _broker) = serve(dir.path());
    let addr: SocketAddr = server.local_addr();
    let mut c = connect(&server);
    for version in 0..=2 {
        let r: DescribeClusterResponse = c.call(
            ApiKey::DescribeCluster,
            version,
            &DescribeClusterRequest::default().with_endpoint_type(1),
        );
        assert_eq!(r.error_code, 0, "v{version}");
        assert!(r.cluster_id.as_str().starts_with("tidelog-"));
        assert_eq!(r.controller_id, BrokerId(0));
        assert_eq!(r.brokers.len(), 1);
        assert_eq!(r.brokers[0].broker_id, BrokerId(0));
        assert_eq!(r.brokers[0].host.as_str(), addr.ip().to_string());
        assert_eq!(r.brokers[0].port, i32::from(addr.port()));
    }
    let r: DescribeClusterResponse = c.call(
        ApiKey::DescribeCluster,
        1,
        &DescribeClusterRequest::default().with_endpoint_type(2),
    );
    assert_eq!(r.error_code, 115);
    assert!(r.brokers.is_empty());
    server.shutdown().unwrap();
}

#[test]
fn produce_honours_the_topic_compression_type_and_checks_compressed_records() {
    let dir = tempfile::tempdir().unwrap();
    let (server, broker) = serve(dir.path());
    let mut c = connect(&server);
    create(&mut c, "as-sent", 1, &[]);
    create(&mut c, "zstd", 1, &[("compression.type", "zstd")]);
    create(&mut c, "plain", 1, &[("compression.type", "uncompressed")]);
    for (topic, sent, want) in [
        ("as-sent", Compression::Gzip, Compression::Gzip),
        ("as-sent", Compression::None, Compression::None),
        ("zstd", Compression::None, Compression::Zstd),
        ("zstd", Compression::Snappy, Compression::Zstd),
        ("zstd", Compression::Zstd, Compression::Zstd),
        ("plain", Compression::Lz4, Compression::None),
    ] {
        let (code, _) = produce(&mut c, topic, 0, batch(&["one", "two"], sent));
        assert_eq!(code, 0, "{topic} {sent}");
        let (codecs, values) = stored(&broker, topic);
        assert_eq!(codecs.last(), Some(&want), "{topic} {sent}");
        assert_eq!(&values[values.len() - 2..], ["one", "two"]);
    }
    // Two batches in one request, the second rewritten: offsets stay consecutive.
    let two = [
        batch(&["a"], Compression::Zstd),
        batch(&["b", "c"], Compression::Gzip),
    ]
    .concat();
    let (code, base) = produce(&mut c, "zstd", 0, two);
    assert_eq!((code, base), (0, 6));
    let (codecs, values) = stored(&broker, "zstd");
    assert_eq!(codecs, vec![Compression::Zstd; 5]);
    assert_eq!(&values[6..], ["a", "b", "c"]);
    // A compressed batch whose stream is damaged (CRC recomputed, as a buggy client
    // would send it) is CORRUPT_MESSAGE, and nothing is appended.
    let mut bad = batch(&["x"; 50], Compression::Gzip);
    let n = bad.len();
    bad[70..n - 8].fill(0x55);
    let crc = crate::record::crc32c(&bad[21..]);
    bad[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(produce(&mut c, "as-sent", 0, bad).0, 2);
    assert_eq!(stored(&broker, "as-sent").1.len(), 4);
    server.shutdown().unwrap();
}

#[test]
fn auto_created_topics_get_the_broker_default_partition_count() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::builder(dir.path())
        .default_partitions(3)
        .auto_create_topics(true)
        .open()
        .unwrap();
    let server = Server::builder(broker)
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let mut c = connect(&server);
    // Produce to a topic nobody created: Kafka answers UNKNOWN_TOPIC_OR_PARTITION.
    assert_eq!(
        produce(&mut c, "fresh", 0, batch(&["x"], Compression::None)).0,
        3
    );
    let req = MetadataRequest::default()
        .with_topics(Some(vec![
            metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("fresh"))),
        ]))
        .with_allow_auto_topic_creation(true);
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 8, &req);
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(resp.topics[0].partitions.len(), 3);
    assert_eq!(
        produce(&mut c, "fresh", 2, batch(&["x"], Compression::None)),
        (0, 0)
    );
    // CreateTopics with -1 partitions gets the default too.
    create(&mut c, "defaulted", -1, &[]);
    assert_eq!(partition_count(&mut c, "defaulted"), 3);
    server.shutdown().unwrap();
}

#[test]
fn message_format_version_is_accepted_ignored_and_described_at_kafkas_default() {
    let dir = tempfile::tempdir().unwrap();
    let (server, broker) = serve(dir.path());
    let mut c = connect(&server);
    // CreateTopics with it (as Kafka 3.x, accepted and ignored).
    create(
        &mut c,
        "fmt",
        1,
        &[("message.format.version", "2.8"), ("retention.ms", "60000")],
    );
    assert_eq!(config(&mut c, "fmt", "retention.ms"), "60000");
    assert_eq!(config(&mut c, "fmt", "message.format.version"), "3.0-IV1");
    // AlterConfigs, every version.
    for version in 0..=2 {
        let req = AlterConfigsRequest::default().with_resources(vec![
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("fmt"))
                .with_configs(vec![
                    alter_configs_request::AlterableConfig::default()
                        .with_name(s("message.format.version"))
                        .with_value(Some(s("0.10.2"))),
                    alter_configs_request::AlterableConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("70000"))),
                ]),
        ]);
        let r: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, version, &req);
        assert_eq!(
            r.responses[0].error_code, 0,
            "v{version}: {:?}",
            r.responses[0]
        );
    }
    assert_eq!(config(&mut c, "fmt", "retention.ms"), "70000");
    // IncrementalAlterConfigs SET and DELETE, every version.
    for (version, op) in [(0, 0), (1, 0), (1, 1)] {
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
            incremental_alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("fmt"))
                .with_configs(vec![
                    incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(s("message.format.version"))
                        .with_config_operation(op)
                        .with_value((op == 0).then(|| s("2.1"))),
                ]),
        ]);
        let r: IncrementalAlterConfigsResponse =
            c.call(ApiKey::IncrementalAlterConfigs, version, &req);
        assert_eq!(
            r.responses[0].error_code, 0,
            "v{version} op {op}: {:?}",
            r.responses[0]
        );
    }
    // Ignored: described at Kafka's default, as a default, and not stored.
    assert_eq!(config(&mut c, "fmt", "message.format.version"), "3.0-IV1");
    assert_eq!(config(&mut c, "fmt", "retention.ms"), "70000", "kept");
    let r: DescribeConfigsResponse = c.call(
        ApiKey::DescribeConfigs,
        3,
        &DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("fmt"))
                .with_configuration_keys(Some(vec![s("message.format.version")])),
        ]),
    );
    assert_eq!(r.results[0].configs.len(), 1);
    assert_eq!(r.results[0].configs[0].config_source, 5, "DEFAULT_CONFIG");
    assert_eq!(
        broker
            .topic("fmt")
            .unwrap()
            .config()
            .get("message.format.version"),
        None
    );
    server.shutdown().unwrap();
}

#[test]
fn keyless_records_on_a_compacted_topic_are_refused_naming_each_record() {
    let dir = tempfile::tempdir().unwrap();
    let (server, broker) = serve(dir.path());
    let mut c = connect(&server);
    create(&mut c, "keyed", 1, &[("cleanup.policy", "compact")]);
    for codec in [Compression::None, Compression::Zstd] {
        let mut b = BatchBuilder::new().compression(codec);
        b.push(1_000, Some(b"k0"), Some(b"v0"), &[]);
        b.push(1_001, None, Some(b"v1"), &[]);
        b.push(1_002, Some(b"k2"), Some(b"v2"), &[]);
        b.push(1_003, None, Some(b"v3"), &[]);
        let records = Bytes::from(b.finish());
        for version in [3, 7, 8] {
            let req = ProduceRequest::default()
                .with_acks(1)
                .with_timeout_ms(1000)
                .with_topic_data(vec![
                    produce_request::TopicProduceData::default()
                        .with_name(topic_name("keyed"))
                        .with_partition_data(vec![
                            produce_request::PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(records.clone())),
                        ]),
                ]);
            let resp: ProduceResponse = c.call(ApiKey::Produce, version, &req);
            let p = &resp.responses[0].partition_responses[0];
            assert_eq!(
                p.error_code, 87,
                "{codec:?} v{version}: INVALID_RECORD {p:?}"
            );
            assert_eq!(p.base_offset, -1);
            if version >= 8 {
                let indexes: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
                assert_eq!(indexes, [1, 3], "{p:?}");
                assert!(
                    p.record_errors
                        .iter()
                        .all(|e| e.batch_index_error_message.is_some())
                );
                let message = p.error_message.as_ref().expect("error_message").to_string();
                assert!(message.contains("without a key"), "{message}");
            }
        }
    }
    // Keyed records are taken; nothing of the refused batches was stored.
    let mut b = BatchBuilder::new();
    b.push(1_000, Some(b"k"), Some(b"v"), &[]);
    assert_eq!(produce(&mut c, "keyed", 0, b.finish()), (0, 0));
    assert_eq!(
        broker
            .topic("keyed")
            .unwrap()
            .partition(0)
            .unwrap()
            .log()
            .log_end_offset(),
        1
    );
    // A topic that is not compacted takes keyless records.
    create(&mut c, "plain", 1, &[]);
    assert_eq!(
        produce(&mut c, "plain", 0, batch(&["a", "b"], Compression::None)).0,
        0
    );
    server.shutdown().unwrap();
}
