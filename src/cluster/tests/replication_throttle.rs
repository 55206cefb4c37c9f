//! KIP-73 on an in-process cluster: dynamic broker configs set and described through
//! the admin client over the wire, seen alike by every node (each also listing its own
//! read-only configs), and a reassignment under a
//! small replication throttle that moves its data at a bounded rate and completes.

use kafka_protocol::messages::AlterConfigsRequest;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::protocol::StrBytes;

use super::acked_writes::bootstrap;
use super::failover::addr;
use super::reassignment::create_on;
use super::replication::{broker, part};
use super::*;
use crate::admin::{AdminClient, AlterConfigOp, ConfigSource, ErrorCode, TopicPartition};
use crate::cluster::image::{FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE};
use crate::error::Error;
use crate::producer::{Acks, Producer, ProducerRecord};

fn refusal(r: crate::error::Result<()>) -> Option<ErrorCode> {
    match r {
        Err(Error::Admin(e)) => Some(e.code),
        _ => None,
    }
}

#[test]
fn broker_throttle_rates_are_set_per_broker_and_cluster_wide_and_described_by_every_node() {
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    let set = |k: &str, v: &str| AlterConfigOp::Set(k.into(), v.into());
    admin
        .alter_broker_configs(Some(2), &[set(LEADER_THROTTLED_RATE, "1000")])
        .unwrap();
    admin
        .alter_broker_configs(None, &[set(FOLLOWER_THROTTLED_RATE, "2000")])
        .unwrap();
    c.wait_same_image();
    for id in 1..=3 {
        let configs = admin.describe_broker_configs(id).unwrap();
        let get = |k: &str| {
            let e = configs.iter().find(|e| e.name == k).unwrap();
            (e.value.clone().unwrap(), e.source)
        };
        let leader = if id == 2 {
            ("1000".to_string(), ConfigSource::DynamicBroker)
        } else {
            (i64::MAX.to_string(), ConfigSource::Default)
        };
        assert_eq!(get(LEADER_THROTTLED_RATE), leader, "broker {id}");
        assert_eq!(
            get(FOLLOWER_THROTTLED_RATE),
            ("2000".to_string(), ConfigSource::DynamicDefaultBroker),
            "broker {id}"
        );
        // Each node lists its own read-only configs beside the dynamic ones.
        assert_eq!(
            get("node.id"),
            (id.to_string(), ConfigSource::StaticBroker),
            "broker {id}"
        );
        assert_eq!(
            get("process.roles"),
            ("broker,controller".to_string(), ConfigSource::StaticBroker),
            "broker {id}: a voter"
        );
        // The cluster's settings, the one the test node set too.
        assert_eq!(
            get("default.replication.factor"),
            ("1".to_string(), ConfigSource::Default),
            "broker {id}"
        );
        assert_eq!(
            get("broker.session.timeout.ms"),
            (SESSION.as_millis().to_string(), ConfigSource::StaticBroker),
            "broker {id}"
        );
        let read_only = |k: &str| configs.iter().find(|e| e.name == k).unwrap().read_only;
        assert!(read_only("default.replication.factor") && read_only("broker.rack"));
        assert!(read_only("node.id") && read_only("log.dirs") && read_only("listeners"));
        assert!(!read_only(LEADER_THROTTLED_RATE));
    }
    // Not a dynamic broker config, a bad rate, a list operation: INVALID_CONFIG, and
    // nothing changes.
    for bad in [
        vec![set("log.retention.ms", "1")],
        vec![set(LEADER_THROTTLED_RATE, "-5")],
        vec![AlterConfigOp::Append(
            LEADER_THROTTLED_RATE.into(),
            "1".into(),
        )],
    ] {
        assert_eq!(
            refusal(admin.alter_broker_configs(Some(1), &bad)),
            Some(ErrorCode::INVALID_CONFIG),
            "{bad:?}"
        );
    }
    admin
        .alter_broker_configs(
            Some(2),
            &[AlterConfigOp::Delete(LEADER_THROTTLED_RATE.into())],
        )
        .unwrap();
    let img = c.wait_same_image();
    assert_eq!(img.broker_configs.rate(2, LEADER_THROTTLED_RATE), i64::MAX);
    assert_eq!(img.broker_configs.rate(1, FOLLOWER_THROTTLED_RATE), 2000);
    // AlterConfigs (not incremental) replaces the resource's settings: the default's
    // follower rate goes, its leader rate is set.
    let mut client = crate::client::Client::new(addr(&c, 0).to_string(), "test");
    let request = AlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str(""))
            .with_configs(vec![
                AlterableConfig::default()
                    .with_name(StrBytes::from_static_str(LEADER_THROTTLED_RATE))
                    .with_value(Some(StrBytes::from_static_str("3000"))),
            ]),
    ]);
    let response = client.call(&request, 2, WAIT).unwrap();
    assert_eq!(response.responses[0].error_code, 0, "{response:?}");
    let img = c.wait_same_image();
    assert_eq!(img.broker_configs.rate(1, LEADER_THROTTLED_RATE), 3000);
    assert_eq!(
        img.broker_configs.rate(1, FOLLOWER_THROTTLED_RATE),
        i64::MAX
    );
    c.shutdown();
}

#[test]
fn a_reassignment_throttled_by_its_leader_moves_its_data_at_a_bounded_rate_and_completes() {
    throttled_move(LEADER_THROTTLED_RATE);
}

#[test]
fn a_reassignment_throttled_by_its_follower_moves_its_data_at_a_bounded_rate_and_completes() {
    throttled_move(FOLLOWER_THROTTLED_RATE);
}

/// Moves a 1 MB partition from node 1 to nodes 1 and 2 with the rate `key` (of the
/// leader, node 1, or of the follower, node 2) at 200 KB/s on both nodes: the copy is
/// bounded by the rate, completes, and shows in the throttled node's metrics.
fn throttled_move(key: &str) {
    const RATE: i64 = 200_000;
    let c = TestCluster::new(3, 1024);
    c.wait_settled();
    create_on(&c, "slow", vec![1], Vec::new());
    let producer = Producer::builder(&broker(&c, 0))
        .acks(Acks::All)
        .build()
        .unwrap();
    // 1 MB: five seconds at the rate.
    let value = vec![7u8; 10_000];
    for _ in 0..100 {
        producer
            .send("slow", ProducerRecord::new(value.as_slice()).partition(0))
            .unwrap();
    }
    producer.close().unwrap();
    let end = part(&c, 0, "slow", 0).log_end_offset();
    assert_eq!(end, 100);
    let admin = AdminClient::connect(&bootstrap(&c)).unwrap();
    let rate = RATE.to_string();
    for id in [1, 2] {
        admin
            .alter_broker_configs(Some(id), &[AlterConfigOp::Set(key.into(), rate.clone())])
            .unwrap();
    }
    // A bad entry is refused at alter time, naming the topic and the entry.
    let out = admin
        .alter_configs(&[(
            "slow",
            vec![AlterConfigOp::Set(
                "leader.replication.throttled.replicas".into(),
                "0:1,0:x".into(),
            )],
        )])
        .unwrap();
    let refused = format!("{:?}", out["slow"]);
    assert!(
        refused.contains("topic slow") && refused.contains("0:x"),
        "{refused}"
    );
    let out = admin
        .alter_configs(&[(
            "slow",
            vec![
                AlterConfigOp::Set("leader.replication.throttled.replicas".into(), "0:1".into()),
                AlterConfigOp::Set(
                    "follower.replication.throttled.replicas".into(),
                    "0:2".into(),
                ),
            ],
        )])
        .unwrap();
    assert!(out.values().all(|r| r.is_ok()), "{out:?}");
    c.wait_same_image();
    let slow0 = TopicPartition::new("slow", 0);
    let started = Instant::now();
    let out = admin
        .alter_partition_reassignments(&[(slow0.clone(), Some(vec![1, 2]))])
        .unwrap();
    assert!(matches!(out[&slow0], Ok(())), "{out:?}");
    // At 200 KB/s, with one second of burst on each side, the new replica copies at
    // most RATE * (elapsed + 2 s): after 1.5 s about 70 of the 100 records. Unthrottled
    // it copies them all within milliseconds.
    let copied = || {
        broker(&c, 1)
            .topic("slow")
            .ok()
            .and_then(|t| t.partition(0).ok())
            .map_or(0, |p| p.log_end_offset())
    };
    std::thread::sleep(Duration::from_millis(1500));
    let early = copied();
    let elapsed = started.elapsed();
    let bound = RATE as f64 * (elapsed.as_secs_f64() + 2.0);
    assert!(
        early as f64 * value.len() as f64 <= bound,
        "the throttled replica copied {early} of {end} records of 10 kB in {elapsed:?}"
    );
    wait_until("the throttled reassignment to complete", || {
        admin.list_partition_reassignments(None).unwrap().is_empty() && {
            let img = c.node(0).image();
            let p = &img.topic("slow").unwrap().partitions[0];
            p.replicas == vec![1, 2] && p.isr.contains(&2)
        }
    });
    assert_eq!(copied(), end);
    // The throttled side shows the bytes it moved and the time its quota held the
    // replica back (Kafka's byte-rate and throttle-time); the other side shows none.
    let (throttled, other) = if key == LEADER_THROTTLED_RATE {
        (0, 1)
    } else {
        (1, 0)
    };
    let side = |node: usize| {
        let r = broker(&c, node)
            .metrics()
            .replication
            .expect("a cluster node's");
        if key == LEADER_THROTTLED_RATE {
            r.leader
        } else {
            r.follower
        }
    };
    let t = side(throttled);
    assert!(
        t.throttled_bytes >= (end as u64 - 1) * value.len() as u64,
        "{t:?}"
    );
    assert!(t.byte_rate > 0.0, "{t:?}");
    assert!(t.throttle_time_seconds > 0.5, "{t:?}");
    assert_eq!(side(other).throttled_bytes, 0);
    assert_eq!(side(other).throttle_time_seconds, 0.0);
    c.shutdown();
}
