//! Consumers, consumer groups and the group coordinator they share with the network
//! server.

mod assignor;
pub mod coordinator;
mod offsets;

pub use assignor::{Assignment, Assignor, RangeAssignor, RoundRobinAssignor, Subscription};
pub use coordinator::{
    CommitOffset, CoordinatorConfig, FetchedOffset, GroupCoordinator, GroupDescription, GroupState,
    JoinGroupMember, JoinGroupRequest, JoinGroupResponse, JoinStart, JoinTicket,
    LeaveGroupResponse, LeavingMember, ListedGroup, MemberDescription, OffsetCommitRequest,
    OffsetCommitResult, OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
};
