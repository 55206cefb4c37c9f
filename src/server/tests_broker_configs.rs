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

/// Each dynamic key with its value and source.
type Described = Vec<(String, String, i8)>;

/// DescribeConfigs v3 of broker resource `name`: its dynamic configs, or the error code
/// and message.
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
        .filter(|c| !c.read_only)
        .map(|c| {
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
    // Nothing set: the three dynamic keys at Kafka's default (by name), for the node
    // and for "".
    for name in ["0", ""] {
        assert_eq!(
            describe(&mut c, name).unwrap(),
            [FOLLOWER_RATE, LEADER_RATE, MOVE_RATE]
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

/// DescribeConfigs v4 of broker resource `name` with synonyms and documentation, only
/// `keys` if given: the result.
fn describe_all(
    c: &mut Client,
    name: &str,
    keys: Option<&[&str]>,
) -> describe_configs_response::DescribeConfigsResult {
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_include_documentation(true)
        .with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(BROKER)
                .with_resource_name(s(name))
                .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect())),
        ]);
    let r: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    r.results.into_iter().next().unwrap()
}

/// The entry of `key` in `result`.
fn entry<'a>(
    result: &'a describe_configs_response::DescribeConfigsResult,
    key: &str,
) -> &'a describe_configs_response::DescribeConfigsResourceResult {
    result
        .configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .unwrap_or_else(|| panic!("{key} missing from {result:?}"))
}

/// Each synonym's name, value and source.
fn synonyms(
    e: &describe_configs_response::DescribeConfigsResourceResult,
) -> Vec<(String, Option<String>, i8)> {
    e.synonyms
        .iter()
        .map(|s| {
            (
                s.name.to_string(),
                s.value.as_deref().map(String::from),
                s.source,
            )
        })
        .collect()
}

const STATIC_BROKER_CONFIG: i8 = 4;

#[test]
fn a_single_node_lists_its_read_only_broker_configs_as_kafka_does() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::builder(dir.path())
        .default_partitions(3)
        .open()
        .unwrap();
    let server = Server::builder(broker.clone())
        .listen("127.0.0.1:0")
        .fetch_max_bytes(2 * 1024 * 1024)
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    let all = describe_all(&mut c, "0", None);
    assert_eq!(all.error_code, 0, "{all:?}");
    let names: Vec<&str> = all.configs.iter().map(|c| c.name.as_str()).collect();
    for key in [
        "node.id",
        "broker.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "log.dirs",
        "log.retention.ms",
        "log.segment.bytes",
        "message.max.bytes",
        "socket.request.max.bytes",
        "group.initial.rebalance.delay.ms",
        "offsets.topic.num.partitions",
        "transaction.state.log.num.partitions",
        "max.request.partition.size.limit",
        LEADER_RATE,
        MOVE_RATE,
    ] {
        assert!(names.contains(&key), "{key} missing from {names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, names, "each once, by name");
    // Settings with no default: read-only, STATIC_BROKER_CONFIG, documented.
    let node_id = entry(&all, "node.id");
    assert_eq!(node_id.value.as_deref(), Some("0"));
    assert!(node_id.read_only && !node_id.is_sensitive);
    assert_eq!(node_id.config_source, STATIC_BROKER_CONFIG);
    assert_eq!(node_id.config_type, 3, "INT");
    assert!(
        node_id
            .documentation
            .as_deref()
            .is_some_and(|d| !d.is_empty())
    );
    assert_eq!(
        synonyms(node_id),
        [(
            "node.id".to_string(),
            Some("0".to_string()),
            STATIC_BROKER_CONFIG
        )]
    );
    assert_eq!(
        entry(&all, "process.roles").value.as_deref(),
        Some("broker,controller")
    );
    assert_eq!(
        entry(&all, "listeners").value.as_deref(),
        Some(format!("PLAINTEXT://{}", server.local_addr()).as_str())
    );
    assert_eq!(
        entry(&all, "log.dirs").value.as_deref(),
        Some(dir.path().display().to_string().as_str())
    );
    // Set at start: STATIC, then the default as its synonyms.
    let partitions = entry(&all, "num.partitions");
    assert_eq!(
        (partitions.value.as_deref(), partitions.config_source),
        (Some("3"), STATIC_BROKER_CONFIG)
    );
    assert_eq!(
        synonyms(partitions),
        [
            (
                "num.partitions".into(),
                Some("3".into()),
                STATIC_BROKER_CONFIG
            ),
            ("num.partitions".into(), Some("1".into()), DEFAULT_CONFIG),
        ]
    );
    let fetch = entry(&all, "fetch.max.bytes");
    assert_eq!(
        (fetch.value.as_deref(), fetch.config_source),
        (Some("2097152"), STATIC_BROKER_CONFIG)
    );
    // At the default: DEFAULT_CONFIG, in Kafka's units.
    let segment = entry(&all, "log.segment.bytes");
    assert_eq!(
        (segment.value.as_deref(), segment.config_source),
        (Some("1073741824"), DEFAULT_CONFIG)
    );
    assert!(segment.read_only);
    assert_eq!(
        entry(&all, "log.retention.ms").value.as_deref(),
        Some("604800000")
    );
    assert_eq!(
        entry(&all, "group.initial.rebalance.delay.ms")
            .value
            .as_deref(),
        Some("3000")
    );
    // The dynamic ones are not read-only, with their default as synonym.
    let leader = entry(&all, LEADER_RATE);
    assert!(!leader.read_only);
    assert_eq!(
        synonyms(leader),
        [(LEADER_RATE.into(), Some(UNLIMITED.into()), DEFAULT_CONFIG)]
    );
    // config_names filters; synonyms and documentation only when asked.
    let some = describe_all(&mut c, "0", Some(&["node.id", LEADER_RATE, "nope"]));
    let names: Vec<&str> = some.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["leader.replication.throttled.rate", "node.id"]);
    let plain = describe_configs_request::DescribeConfigsResource::default()
        .with_resource_type(BROKER)
        .with_resource_name(s("0"))
        .with_configuration_keys(Some(vec![s("node.id")]));
    let r: DescribeConfigsResponse = c.call(
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest::default().with_resources(vec![plain]),
    );
    let e = &r.results[0].configs[0];
    assert!(e.synonyms.is_empty() && e.documentation.is_none(), "{e:?}");
    // The cluster-wide default level ("") has no read-only configs.
    let default_level = describe_all(&mut c, "", None);
    assert!(
        default_level.configs.iter().all(|c| !c.read_only),
        "{default_level:?}"
    );
    // A read-only one cannot be changed, as Kafka says it.
    for key in ["node.id", "num.partitions"] {
        let (code, message) = alter(&mut c, "0", &[(key, Some("3"))], false);
        assert_eq!(code, ResponseError::InvalidConfig.code(), "{message}");
        assert!(
            message.contains(&format!("Cannot update these configs dynamically: {key}")),
            "{message}"
        );
    }
    assert_eq!(
        entry(&describe_all(&mut c, "0", None), "num.partitions")
            .value
            .as_deref(),
        Some("3")
    );
    server.shutdown().unwrap();
}

#[test]
fn a_nodes_tls_key_is_listed_as_kafka_lists_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::broker::Broker::open(dir.path()).unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/tls");
    let server = Server::builder(broker)
        .listen("127.0.0.1:0")
        .tls(crate::security::TlsSettings::from_pem_files(
            fixture.join("server.pem"),
            fixture.join("server.key"),
        ))
        .start()
        .unwrap();
    let mut c = Client::connect(server.local_addr());
    let all = describe_all(&mut c, "0", None);
    let key = entry(&all, "ssl.keystore.key");
    assert!(key.is_sensitive && key.read_only, "{key:?}");
    assert_eq!(key.value, None);
    assert_eq!(key.config_source, STATIC_BROKER_CONFIG);
    assert_eq!(key.config_type, 9, "PASSWORD");
    assert_eq!(
        synonyms(key),
        [("ssl.keystore.key".to_string(), None, STATIC_BROKER_CONFIG)]
    );
    server.shutdown().unwrap();
}
