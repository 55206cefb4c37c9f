//! A single node's dynamic broker configs over a real socket (BROKER resources of
//! DescribeConfigs, IncrementalAlterConfigs and AlterConfigs), as a cluster node answers
//! them: the dynamic keys described with their sources, set for the node's id or as the
//! cluster-wide default (""), kept across a restart; the pace of moves between log
//! directories follows them; keys that are not dynamic, bad values, other broker ids and
//! names that are no broker id refused with Kafka's codes and a message.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::tests_api::Client;
use super::*;

const BROKER: i8 = 4;
const LEADER_RATE: &str = "leader.replication.throttled.rate";
const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
const MOVE_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";
/// Kafka's default of the three (`Long.MAX_VALUE`).
const UNLIMITED: &str = "9223372036854775807";
/// DescribeConfigs `config_source`s.
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const DEFAULT_CONFIG: i8 = 5;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A single node on `dir` whose moves between log directories are paced at 5,000 B/s
/// when no dynamic config says otherwise (as `serve`'s flag sets it).
fn node(dir: &std::path::Path) -> (ServerHandle, crate::broker::Broker) {
    let broker = crate::broker::Broker::open(dir).unwrap();
    broker.set_log_dir_move_rate(Some(5_000));
    let server = Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .start()
        .unwrap();
    (server, broker)
}

/// Each key with its value and source.
type Described = Vec<(String, String, i8)>;

/// DescribeConfigs v3 of broker resource `name`: its configs, or the error code and
/// message.
fn describe(c: &mut Client, name: &str) -> Result<Described, (i16, String)> {
    let req = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s(name))
            .with_configuration_keys(None),
    ]);
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 3, &req);
    let r = &r.results[0];
    if r.error_code != 0 {
        return Err((
            r.error_code,
            r.error_message.as_deref().unwrap_or("").to_string(),
        ));
    }
    Ok(r.configs
        .iter()
        .map(|c| {
            assert!(!c.read_only, "{c:?}");
            (
                c.name.to_string(),
                c.value.as_deref().unwrap_or("").to_string(),
                c.config_source,
            )
        })
        .collect())
}

/// The value and source of `key` of broker resource `name`.
fn value(c: &mut Client, name: &str, key: &str) -> (String, i8) {
    let all = describe(c, name).unwrap();
    let (_, v, source) = all.into_iter().find(|(k, _, _)| k == key).unwrap();
    (v, source)
}

/// IncrementalAlterConfigs v1 of broker resource `name` (SET with a value, DELETE
/// without): the error code and message.
fn alter(
    c: &mut Client,
    name: &str,
    changes: &[(&str, Option<&str>)],
    validate_only: bool,
) -> (i16, String) {
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(BROKER)
                .with_resource_name(s(name))
                .with_configs(
                    changes
                        .iter()
                        .map(|(k, v)| {
                            AlterableConfig::default()
                                .with_name(s(k))
                                .with_config_operation(if v.is_some() { 0 } else { 1 })
                                .with_value(v.map(s))
                        })
                        .collect(),
                ),
        ]);
    let r: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let r = &r.responses[0];
    (
        r.error_code,
        r.error_message.as_deref().unwrap_or("").to_string(),
    )
}

#[test]
fn a_single_node_describes_and_alters_its_dynamic_broker_configs_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let (server, broker) = node(dir.path());
    let mut c = Client::connect(server.local_addr());
    // Nothing set: the three dynamic keys at Kafka's default, for the node and for "".
    for name in ["0", ""] {
        assert_eq!(
            describe(&mut c, name).unwrap(),
            [LEADER_RATE, FOLLOWER_RATE, MOVE_RATE]
                .map(|k| (k.to_string(), UNLIMITED.to_string(), DEFAULT_CONFIG))
                .to_vec(),
        );
    }
    // The cluster-wide default, then the node's own value, which wins.
    assert_eq!(alter(&mut c, "", &[(MOVE_RATE, Some("1000"))], false).0, 0);
    assert_eq!(broker.log_dir_move_rate(), Some(1_000));
    assert_eq!(
        value(&mut c, "0", MOVE_RATE),
        ("1000".into(), DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    let set = [(MOVE_RATE, Some("2000")), (LEADER_RATE, Some("300"))];
    assert_eq!(alter(&mut c, "0", &set, false).0, 0);
    assert_eq!(broker.log_dir_move_rate(), Some(2_000));
    assert_eq!(
        value(&mut c, "0", MOVE_RATE),
        ("2000".into(), DYNAMIC_BROKER_CONFIG)
    );
    assert_eq!(
        value(&mut c, "", MOVE_RATE),
        ("1000".into(), DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    // validate_only changes nothing.
    assert_eq!(alter(&mut c, "0", &[(LEADER_RATE, Some("1"))], true).0, 0);
    assert_eq!(
        value(&mut c, "0", LEADER_RATE),
        ("300".into(), DYNAMIC_BROKER_CONFIG)
    );
    // AlterConfigs replaces the resource's settings: the ones not given are removed.
    let req = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(BROKER)
            .with_resource_name(s("0"))
            .with_configs(vec![
                alter_configs_request::AlterableConfig::default()
                    .with_name(s(FOLLOWER_RATE))
                    .with_value(Some(s("400"))),
            ]),
    ]);
    let r: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &req);
    assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0]);
    assert_eq!(
        value(&mut c, "0", LEADER_RATE),
        (UNLIMITED.into(), DEFAULT_CONFIG)
    );
    assert_eq!(
        value(&mut c, "0", FOLLOWER_RATE),
        ("400".into(), DYNAMIC_BROKER_CONFIG)
    );
    assert_eq!(
        broker.log_dir_move_rate(),
        Some(1_000),
        "back to the default's"
    );
    let kept = describe(&mut c, "0").unwrap();
    drop(c);
    server.shutdown().unwrap();
    broker.close().unwrap();

    // A restart keeps them, and paces moves by them again.
    let (server, broker) = node(dir.path());
    let mut c = Client::connect(server.local_addr());
    assert_eq!(describe(&mut c, "0").unwrap(), kept);
    assert_eq!(broker.log_dir_move_rate(), Some(1_000));
    // Both removed: the pace the broker was opened with.
    assert_eq!(alter(&mut c, "", &[(MOVE_RATE, None)], false).0, 0);
    assert_eq!(broker.log_dir_move_rate(), Some(5_000));
    server.shutdown().unwrap();
}

#[test]
fn a_single_node_refuses_what_a_cluster_refuses_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let (server, broker) = node(dir.path());
    let mut c = Client::connect(server.local_addr());
    let invalid_config = ResponseError::InvalidConfig.code();
    let invalid_request = ResponseError::InvalidRequest.code();
    // A broker config that is not dynamic, and a value that is no rate.
    let (code, message) = alter(&mut c, "0", &[("num.partitions", Some("3"))], false);
    assert_eq!(code, invalid_config, "{message}");
    assert!(message.contains("num.partitions"), "{message}");
    assert!(
        message.contains(MOVE_RATE),
        "names the dynamic ones: {message}"
    );
    let (code, message) = alter(&mut c, "", &[(LEADER_RATE, Some("-1"))], false);
    assert_eq!(code, invalid_config, "{message}");
    assert!(message.contains("-1"), "{message}");
    // All or none: a good change beside a bad one is not applied.
    let both = [(MOVE_RATE, Some("10")), (LEADER_RATE, Some("fast"))];
    assert_eq!(alter(&mut c, "0", &both, false).0, invalid_config);
    assert_eq!(broker.log_dir_move_rate(), Some(5_000));
    // Another broker's id, and a name that is no broker id.
    for name in ["7", "x"] {
        let (code, message) = alter(&mut c, name, &[(MOVE_RATE, Some("10"))], false);
        assert_eq!(code, invalid_request, "{name}: {message}");
        assert!(message.contains(name), "{message}");
        let (code, message) = describe(&mut c, name).unwrap_err();
        assert_eq!(code, invalid_request, "{name}: {message}");
    }
    assert_eq!(
        value(&mut c, "0", MOVE_RATE),
        (UNLIMITED.into(), DEFAULT_CONFIG)
    );
    server.shutdown().unwrap();
}
