//! The network client of any Kafka-API cluster (feature `client`): [`Cluster`], opened
//! with [`ClientConfig`] (Kafka's client setting names), stands where a [`Broker`](crate::Broker)
//! stands in process.
//!
//! A `Cluster` bootstraps from `bootstrap.servers`, negotiates the versions of every
//! API with each broker it connects to (ApiVersions: the highest version both sides
//! speak), learns the brokers and partition leaders from Metadata, sends each
//! partition's requests to its leader, and when a broker answers that it no longer
//! leads (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, LEADER_NOT_AVAILABLE), a request
//! times out or a broker cannot be reached (it restarts), asks for fresh metadata and
//! repeats the request after a pause (`retry.backoff.ms`, doubling up to
//! `retry.backoff.max.ms`) until `delivery.timeout.ms` has passed. TLS and SASL
//! (`security.protocol`, `ssl.*`, `sasl.*`) go through the same code as the admin
//! client's.
//!
//! Errors are the crate's [`Error`](crate::Error): a broker's refusal is
//! [`Error::Api`](crate::Error::Api), which names the API and version, the broker, and
//! the topic or partition, with Kafka's code.
//!
//! ```no_run
//! use tidelog::{ClientConfig, Cluster, TopicConfig};
//!
//! let cluster = Cluster::connect(ClientConfig::new("kafka-1:9092,kafka-2:9092"))?;
//! cluster.create_topic_if_missing("events", 3, TopicConfig::new())?;
//! assert_eq!(cluster.partition_count("events")?, 3);
//! # Ok::<(), tidelog::Error>(())
//! ```

mod cluster;
mod config;
mod consumer;
mod member;
mod partition;
mod producer;
#[cfg(feature = "server")] // the tests start a tidelog server
#[cfg(test)]
mod tests;
#[cfg(feature = "server")] // the tests start a tidelog server
#[cfg(test)]
mod tests_consumer;
#[cfg(feature = "server")] // the tests start a tidelog server
#[cfg(test)]
mod tests_producer;
#[cfg(feature = "server")] // the tests start a tidelog server
#[cfg(test)]
mod tests_transactions;
mod transaction;

pub use crate::error::ApiError;
pub use cluster::Cluster;
pub use config::{ClientConfig, SETTINGS};
pub use partition::{FetchedPartition, ListedOffset};

impl From<&Cluster> for crate::producer::Destination {
    fn from(cluster: &Cluster) -> crate::producer::Destination {
        crate::producer::Destination::remote(std::sync::Arc::new(cluster.clone()))
    }
}

impl crate::producer::RemoteLog for Cluster {
    fn producer(
        &self,
        config: crate::producer::ProducerConfig,
    ) -> crate::Result<std::sync::Arc<dyn crate::producer::RemoteProducer>> {
        Ok(std::sync::Arc::new(producer::ClusterProducer::start(
            self.clone(),
            config,
        )?))
    }

    fn describe(&self) -> String {
        self.bootstrap().join(",")
    }
}

impl From<&Cluster> for crate::consumer::Source {
    fn from(cluster: &Cluster) -> crate::consumer::Source {
        crate::consumer::Source::remote(std::sync::Arc::new(cluster.clone()))
    }
}

impl crate::consumer::RemoteSource for Cluster {
    fn consumer(
        &self,
        config: crate::consumer::ConsumerConfig,
    ) -> Box<dyn crate::consumer::RemoteConsumer> {
        Box::new(consumer::RemoteConsumer::new(
            self.with_own_connections(),
            config,
        ))
    }

    fn group_member(
        &self,
        config: crate::consumer::GroupConfig,
    ) -> crate::Result<Box<dyn crate::consumer::RemoteMember>> {
        Ok(Box::new(member::RemoteMember::new(
            self.with_own_connections(),
            config,
        )?))
    }

    fn describe(&self) -> String {
        self.bootstrap().join(",")
    }
}
