//! tidelog: an embeddable, Kafka-compatible commit log.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod consumer;
mod error;
mod producer;
pub mod record;
pub mod storage;

pub use consumer::coordinator::codes as group_codes;
pub use consumer::{
    Assignment, Assignor, CommitOffset, CoordinatorConfig, FetchedOffset, GroupCoordinator,
    GroupDescription, GroupState, JoinGroupMember, JoinGroupRequest, JoinGroupResponse, JoinStart,
    JoinTicket, LeaveGroupResponse, LeavingMember, ListedGroup, MemberDescription,
    OffsetCommitRequest, OffsetCommitResult, OffsetFetchResponse, RangeAssignor,
    RoundRobinAssignor, Subscription, SyncGroupRequest, SyncGroupResponse,
};
pub use error::{Error, Result};
pub use producer::{
    DefaultPartitioner, Partitioner, RoundRobinPartitioner, murmur2, partition_for_key, to_positive,
};
pub use record::{Batch, BatchBuilder, Headers, Record};
pub use storage::{
    AppendInfo, CleanupOutcome, CleanupPolicy, LogConfig, LogManager, LogSlice, PartitionLog,
    RecoveryReport,
};
