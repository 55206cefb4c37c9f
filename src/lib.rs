//! tidelog: an embeddable, Kafka-compatible commit log.
//!
//! Durable topics split into partitions, producers and consumer groups between the
//! threads of one process:
//!
//! ```
//! use std::time::Duration;
//! use tidelog::{Broker, GroupConsumer, GroupConfig, OffsetReset, Producer, ProducerRecord, TopicConfig};
//! # let dir = tempfile::tempdir().unwrap();
//! # for run in 0..2 {
//! let broker = Broker::open(dir.path())?;
//! broker.create_topic_if_missing("events", 3, TopicConfig::new())?;
//! let producer = Producer::new(&broker)?;
//! producer.send("events", ProducerRecord::keyed(b"user-1", b"signed up"))?;
//! let group = GroupConfig::new("mailer", &["events"]).auto_offset_reset(OffsetReset::Earliest);
//! let mut consumer = GroupConsumer::join(&broker, group)?;
//! let records = consumer.poll(Duration::from_secs(5))?;
//! for record in records.iter() {
//!     assert_eq!(record?.value, Some(&b"signed up"[..]));
//! }
//! # // The second run on the same directory gets the record it sent, not the first's.
//! # assert_eq!(records.count(), 1, "run {run}");
//! # }
//! # Ok::<(), tidelog::Error>(())
//! ```
//!
//! Run again on the same data directory, this gets the topic the first run created and
//! the record it sent itself: the group continues from the offset the first run
//! committed when its consumer was dropped.
//!
//! The crate root holds what an application uses: the broker and its topics, the
//! producer, consumers and consumer groups, records, configurations and the error type
//! (and, with the `server` feature, the Kafka protocol server). The rest is in modules:
//! [`storage`] (one partition's log, usable alone), [`record`] (the RecordBatch v2
//! format), [`producer`] (also Kafka's partitioning functions), [`consumer`] (also the
//! partition assignors and rebalance listeners of consumer groups), [`coordinator`]
//! (the group coordinator, its states and errors) and [`metrics`]. The `testing`
//! feature adds hooks for tidelog's own tests and fuzz targets, not a stable API.
//!
//! Every Rust example of README.md and of the guides in docs/ runs as a doctest too.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "client")]
pub mod admin;
mod broker;
#[cfg(feature = "client")]
mod client;
#[cfg(feature = "server")]
mod cluster;
mod config;
pub mod consumer;
pub mod coordinator;
mod error;
#[cfg(feature = "client")]
pub mod forward;
pub mod metrics;
pub mod producer;
pub mod record;
#[cfg(feature = "client")]
pub mod remote;
mod replica;
#[cfg(feature = "client")]
pub mod security;
#[cfg(feature = "server")]
mod server;
pub mod storage;
#[cfg(feature = "testing")]
pub mod testing;
mod topic;
pub mod transaction;

pub use broker::{Broker, BrokerBuilder, OFFSETS_TOPIC, TopicAdmin};
#[cfg(feature = "server")]
pub use cluster::format::{FormattedNode, NodeFormat, format_node};
#[cfg(feature = "server")]
pub use cluster::image::stored::ClusterNodeMetadata;
pub use config::{BrokerConfig, TopicConfig, validate_topic_name};
pub use consumer::{
    Consumer, ConsumerConfig, ConsumerRecord, ConsumerRecords, ConsumerRecordsIter, GroupConfig,
    GroupConsumer, IsolationLevel, OffsetReset, ShareConsumer, ShareConsumerConfig, ShareRecord,
};
pub use coordinator::AcknowledgeType;
pub use error::{Error, Result};
pub use producer::{
    Acks, ConsumerGroupMetadata, DeliveryReceipt, Durability, Producer, ProducerBuilder,
    ProducerConfig, ProducerRecord, RecordMetadata,
};
pub use record::{Batch, BatchBuilder, Compression, Headers, Record};
#[cfg(feature = "client")]
pub use remote::{ClientConfig, Cluster};
#[cfg(feature = "server")]
pub use server::{Server, ServerBuilder, ServerHandle};
pub use storage::{CleanupPolicy, LogConfig};
pub use topic::{Partition, PartitionDescription, Topic, TopicDescription};

/// The examples of README.md, compiled and run as doctests so that they keep working
/// as written (in the package directory, where they write `./tidelog-data`,
/// `./tidelog-storage`, `./tidelog-txn`, `./tidelog-edge` and `./tidelog-remote-node`;
/// all are in `.gitignore`).
#[cfg(all(doctest, feature = "server"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The Rust examples of docs/server.md (serving from a program), compiled as doctests
/// in the same way as README.md's, so that the guide keeps compiling as written.
#[cfg(all(doctest, feature = "server"))]
#[doc = include_str!("../docs/server.md")]
pub struct DocsServerDoctests;
