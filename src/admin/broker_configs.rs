//! Dynamic broker configs through the admin client (Kafka's `incrementalAlterConfigs`
//! and `describeConfigs` of BROKER resources): KIP-73's replication throttle rates,
//! per broker or cluster-wide, as `kafka-configs --entity-type brokers` sets them.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};

use super::router::{Outcome, check, kstr};
use super::{
    AdminClient, AlterConfigOp, ConfigEntry, ConfigSource, DESCRIBE_CONFIGS_VERSION,
    INCREMENTAL_ALTER_CONFIGS_VERSION, Resource, alterable,
};
use crate::error::{Error, Result};

/// Resource type of a broker.
const BROKER_RESOURCE: i8 = 4;

/// One setting as DescribeConfigs answers it.
pub(super) fn config_entry(c: DescribeConfigsResourceResult) -> ConfigEntry {
    ConfigEntry {
        name: c.name.to_string(),
        value: c.value.map(|v| v.to_string()),
        source: ConfigSource::from_wire(c.config_source),
        read_only: c.read_only,
        sensitive: c.is_sensitive,
    }
}

impl AdminClient {
    /// Changes dynamic broker configs of `broker` (None: the cluster-wide default,
    /// Kafka's resource name ""), keeping the others (IncrementalAlterConfigs): all
    /// together or not at all. A tidelog cluster keeps
    /// `leader.replication.throttled.rate` and `follower.replication.throttled.rate`.
    pub fn alter_broker_configs(&self, broker: Option<i32>, ops: &[AlterConfigOp]) -> Result<()> {
        let name = broker.map_or(String::new(), |b| b.to_string());
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(BROKER_RESOURCE)
                .with_resource_name(kstr(&name))
                .with_configs(ops.iter().map(alterable).collect()),
        ]);
        let responses = self.on_any_broker(|r| {
            let response = r.call_any(&request, INCREMENTAL_ALTER_CONFIGS_VERSION)?;
            Ok(Outcome::Done(Ok(response.responses)))
        })?;
        let res = responses
            .into_iter()
            .next()
            .ok_or_else(|| Error::corrupt("an IncrementalAlterConfigs response", 0, "no answer"))?;
        let resource = || broker.map_or(Resource::Cluster, Resource::Broker);
        check(resource, res.error_code, res.error_message.as_ref()).map_err(Error::from)
    }

    /// The broker configs of `broker` as it sees them (DescribeConfigs of its BROKER
    /// resource, asked of that broker): the dynamic ones, each value with its source
    /// ([`ConfigSource::DynamicBroker`], [`ConfigSource::DynamicDefaultBroker`] or
    /// [`ConfigSource::Default`]), and the read-only ones it was started with
    /// ([`ConfigSource::StaticBroker`] or [`ConfigSource::Default`], `read_only`).
    pub fn describe_broker_configs(&self, broker: i32) -> Result<Vec<ConfigEntry>> {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(BROKER_RESOURCE)
                .with_resource_name(kstr(broker.to_string()))
                .with_configuration_keys(None),
        ]);
        let results = self.on_any_broker(|r| {
            r.refresh(Some(&[]))?;
            let Some(addr) = r.node_addr(broker) else {
                return Ok(Outcome::Done(Err(Error::InvalidConfig {
                    key: "broker".into(),
                    reason: format!("broker {broker} is not a broker of the cluster"),
                })));
            };
            let response = r.call_addr(&addr, &request, DESCRIBE_CONFIGS_VERSION)?;
            Ok(Outcome::Done(Ok(response.results)))
        })?;
        let res = results
            .into_iter()
            .next()
            .ok_or_else(|| Error::corrupt("a DescribeConfigs response", 0, "no answer"))?;
        check(
            || Resource::Broker(broker),
            res.error_code,
            res.error_message.as_ref(),
        )?;
        Ok(res.configs.into_iter().map(config_entry).collect())
    }
}
