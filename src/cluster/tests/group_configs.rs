//! Group configs are cluster metadata: set through one node (IncrementalAlterConfigs of
//! a GROUP resource, as any admin client sends it), every node's image has them,
//! DescribeConfigs on another node answers them, and they outlive a controller change
//! (altered again through the new controller).

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::failover::addr;
use super::*;
use crate::cluster::client::Client;

/// Longer than a proposal may wait for a controller.
const CALL: Duration = Duration::from_secs(40);
/// The GROUP resource type of DescribeConfigs and IncrementalAlterConfigs.
const GROUP: i8 = 32;
const SESSION: &str = "consumer.session.timeout.ms";
const LOCK: &str = "share.record.lock.duration.ms";

/// IncrementalAlterConfigs of group `group` through node `i`: SET (or DELETE, `None`)
/// each key; the error code and message.
pub(super) fn alter(
    c: &TestCluster,
    i: usize,
    group: &str,
    changes: &[(&str, Option<&str>)],
) -> (i16, Option<String>) {
    let configs = changes
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_config_operation(if v.is_some() { 0 } else { 1 })
                .with_value(v.map(|v| StrBytes::from_string(v.to_string())))
        })
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(GROUP)
            .with_resource_name(StrBytes::from_string(group.to_string()))
            .with_configs(configs),
    ]);
    let mut client = Client::new(addr(c, i).to_string(), "group-configs-test");
    let r: IncrementalAlterConfigsResponse = client.call(&request, 1, CALL).unwrap();
    let r = &r.responses[0];
    (
        r.error_code,
        r.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// DescribeConfigs of group `group` on node `i`: each setting's value and source.
fn describe(c: &TestCluster, i: usize, group: &str) -> Vec<(String, String, i8)> {
    let request = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(GROUP)
            .with_resource_name(StrBytes::from_string(group.to_string()))
            .with_configuration_keys(None),
    ]);
    let mut client = Client::new(addr(c, i).to_string(), "group-configs-test");
    let r: DescribeConfigsResponse = client.call(&request, 4, CALL).unwrap();
    let r = &r.results[0];
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.configs
        .iter()
        .map(|e| {
            let value = e.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
            (e.name.to_string(), value, e.config_source)
        })
        .collect()
}

/// The value and source of `key` in a description.
fn entry(described: &[(String, String, i8)], key: &str) -> (String, i8) {
    let e = described.iter().find(|e| e.0 == key).expect(key);
    (e.1.clone(), e.2)
}

/// Config source of a group's own setting (Kafka's GROUP_CONFIG) and of a broker default.
const GROUP_CONFIG: i8 = 8;
const DEFAULT_CONFIG: i8 = 5;

#[test]
fn a_group_config_set_through_one_node_is_described_by_another_and_survives_a_controller_change() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();

    // Out of Kafka's bounds: INVALID_CONFIG, and no record.
    let (code, message) = alter(&c, 0, "g", &[(SESSION, Some("1000"))]);
    assert_eq!(code, 40, "{message:?}");
    assert!(message.unwrap().contains("\"g\""));

    assert_eq!(alter(&c, 0, "g", &[(SESSION, Some("50000"))]), (0, None));
    for i in 0..3 {
        wait_until("the group config applied on every node", || {
            c.node(i)
                .image()
                .group_configs
                .get("g")
                .is_some_and(|o| o.get(SESSION).map(String::as_str) == Some("50000"))
        });
    }
    let described = describe(&c, 2, "g");
    assert_eq!(entry(&described, SESSION), ("50000".into(), GROUP_CONFIG));
    assert_eq!(entry(&described, LOCK), ("30000".into(), DEFAULT_CONFIG));
    assert_eq!(
        entry(&describe(&c, 1, "other"), SESSION),
        ("45000".into(), DEFAULT_CONFIG)
    );

    // The controller stops; another is elected and the setting stays, and is altered
    // through the new controller.
    let controller = c.node(0).controller_id().unwrap();
    let stopped = (controller - 1) as usize;
    c.halt(stopped);
    let alive: Vec<usize> = c.running();
    wait_until("a new controller", || {
        alive
            .iter()
            .all(|&i| c.node(i).controller_id().is_some_and(|id| id != controller))
    });
    let (a, b) = (alive[0], alive[1]);
    assert_eq!(
        entry(&describe(&c, a, "g"), SESSION),
        ("50000".into(), GROUP_CONFIG)
    );
    let mut altered = (-1, None);
    wait_until("the new controller to take the change", || {
        altered = alter(&c, b, "g", &[(SESSION, None), (LOCK, Some("20000"))]);
        altered.0 == 0
    });
    wait_until("the change applied on the other node", || {
        c.node(a)
            .image()
            .group_configs
            .get("g")
            .is_some_and(|o| o.get(SESSION).is_none())
    });
    let described = describe(&c, a, "g");
    assert_eq!(entry(&described, SESSION), ("45000".into(), DEFAULT_CONFIG));
    assert_eq!(entry(&described, LOCK), ("20000".into(), GROUP_CONFIG));

    // The stopped node comes back with what changed while it was away.
    c.restart(stopped);
    wait_until("the restarted node to catch up", || {
        c.node(stopped)
            .image()
            .group_configs
            .get("g")
            .is_some_and(|o| {
                o.get(LOCK).map(String::as_str) == Some("20000") && o.get(SESSION).is_none()
            })
    });
    assert_eq!(describe(&c, stopped, "g"), described);
    c.shutdown();
}
