//! tidelog: an embeddable, Kafka-compatible commit log.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod broker;
mod config;
mod consumer;
mod error;
mod producer;
pub mod record;
pub mod storage;
mod topic;

pub use broker::{Broker, BrokerBuilder, OFFSETS_TOPIC};
pub use config::{BrokerConfig, TopicConfig, validate_topic_name};
pub use consumer::coordinator::codes as group_codes;
pub use consumer::{
    Assignment, Assignor, CommitOffset, Consumer, ConsumerConfig, ConsumerGroup, ConsumerRecord,
    ConsumerRecords, CoordinatorConfig, FetchedOffset, GroupConfig, GroupCoordinator,
    GroupDescription, GroupState, JoinGroupMember, JoinGroupRequest, JoinGroupResponse, JoinStart,
    JoinTicket, LeaveGroupResponse, LeavingMember, ListedGroup, MemberDescription,
    OffsetCommitRequest, OffsetCommitResult, OffsetFetchResponse, OffsetReset, RangeAssignor,
    RebalanceContext, RebalanceListener, RoundRobinAssignor, Subscription, SyncGroupRequest,
    SyncGroupResponse,
};
pub use error::{Error, Result};
pub use producer::{
    Acks, DefaultPartitioner, DeliveryReceipt, Durability, Partitioner, Producer, ProducerBuilder,
    ProducerConfig, ProducerRecord, RecordMetadata, RoundRobinPartitioner, murmur2,
    partition_for_key, to_positive,
};
pub use record::{Batch, BatchBuilder, Headers, Record};
pub use storage::{
    AppendInfo, CleanupOutcome, CleanupPolicy, LogConfig, LogManager, LogSlice, PartitionLog,
    RecoveryReport,
};
pub use topic::{Partition, PartitionDescription, Topic, TopicDescription};
