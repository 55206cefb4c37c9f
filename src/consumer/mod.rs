//! Consumers, consumer groups and the group coordinator they share with the network
//! server.

mod assignor;
#[allow(clippy::module_inception)]
mod consumer;
pub mod coordinator;
mod group;
pub(crate) mod offsets;
mod wire;

pub use assignor::{
    Assignment, Assignor, CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor,
    Subscription,
};
pub use consumer::{Consumer, ConsumerConfig, ConsumerRecord, ConsumerRecords, OffsetReset};
pub use coordinator::{
    CommitOffset, CoordinatorConfig, FetchedOffset, GroupCoordinator, GroupDescription, GroupState,
    JoinGroupMember, JoinGroupRequest, JoinGroupResponse, JoinStart, JoinTicket,
    LeaveGroupResponse, LeavingMember, ListedGroup, MemberDescription, OffsetCommitRequest,
    OffsetCommitResult, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
};
pub use group::{ConsumerGroup, GroupConfig, RebalanceContext, RebalanceListener};
