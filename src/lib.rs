//! tidelog: an embeddable, Kafka-compatible commit log.
//!
//! Durable topics split into partitions, producers and consumer groups between the
//! threads of one process:
//!
//! ```
//! use std::time::Duration;
//! use tidelog::{Broker, ConsumerGroup, GroupConfig, OffsetReset, Producer, ProducerRecord, TopicConfig};
//! # let dir = tempfile::tempdir().unwrap();
//! let broker = Broker::open(dir.path())?;
//! broker.create_topic("events", 3, TopicConfig::new())?;
//! let producer = Producer::new(&broker)?;
//! producer.send("events", ProducerRecord::keyed(b"user-1", b"signed up"))?;
//! let group = GroupConfig::new("mailer", &["events"]).auto_offset_reset(OffsetReset::Earliest);
//! let mut consumer = ConsumerGroup::join(&broker, group)?;
//! for record in consumer.poll(Duration::from_secs(5))?.iter() {
//!     assert_eq!(record?.value, Some(&b"signed up"[..]));
//! }
//! # Ok::<(), tidelog::Error>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod broker;
mod config;
mod consumer;
mod error;
mod producer;
pub mod record;
#[cfg(feature = "server")]
mod server;
pub mod storage;
mod topic;

pub use broker::{Broker, BrokerBuilder, OFFSETS_TOPIC};
pub use config::{BrokerConfig, TopicConfig, validate_topic_name};
pub use consumer::coordinator::codes as group_codes;
pub use consumer::{
    Assignment, Assignor, CommitOffset, Consumer, ConsumerConfig, ConsumerGroup, ConsumerRecord,
    ConsumerRecords, ConsumerRecordsIter, CooperativeStickyAssignor, CoordinatorConfig,
    FetchedOffset, GroupConfig, GroupCoordinator, GroupDescription, GroupState, JoinGroupMember,
    JoinGroupRequest, JoinGroupResponse, JoinStart, JoinTicket, LeaveGroupResponse, LeavingMember,
    ListedGroup, MemberDescription, OffsetCommitRequest, OffsetCommitResult, OffsetFetchResponse,
    OffsetReset, RangeAssignor, RebalanceContext, RebalanceListener, RoundRobinAssignor,
    Subscription, SyncGroupRequest, SyncGroupResponse,
};
pub use error::{Error, Result};
pub use producer::{
    Acks, DefaultPartitioner, DeliveryReceipt, Durability, Partitioner, Producer, ProducerBuilder,
    ProducerConfig, ProducerRecord, RecordMetadata, RoundRobinPartitioner, murmur2,
    partition_for_key, to_positive,
};
pub use record::{Batch, BatchBuilder, Compression, Headers, Record};
#[cfg(feature = "server")]
#[doc(hidden)]
pub use server::fuzz_decode_request;
#[cfg(feature = "server")]
pub use server::{Server, ServerBuilder, ServerHandle, sendfile_bytes_sent};
pub use storage::{
    AppendInfo, CleanupOutcome, CleanupPolicy, CompressionType, LogConfig, LogManager, LogSlice,
    PartitionLog, RecoveryReport,
};
pub use topic::{Partition, PartitionDescription, Topic, TopicDescription};
