//! Why a share-partition (KIP-932) refused an acknowledgement, and the states its
//! records go through.

/// The delivery state of one record of a share-partition (Kafka's `RecordState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordState {
    /// Not held by anyone: the next fetch of the group may acquire it.
    Available,
    /// Held by one member until it acknowledges it or its acquisition lock expires.
    Acquired,
    /// Accepted: processed, never delivered again.
    Acknowledged,
    /// Rejected, or released or expired once the delivery count limit was reached:
    /// never delivered again.
    Archived,
}

impl RecordState {
    /// Kafka's number of the state (`DeliveryState` of `__share_group_state`):
    /// 0 available, 1 acquired, 2 acknowledged, 4 archived.
    pub fn id(self) -> i8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    /// The state of Kafka's number, `None` for a number Kafka does not define.
    pub fn from_id(id: i8) -> Option<RecordState> {
        match id {
            0 => Some(RecordState::Available),
            1 => Some(RecordState::Acquired),
            2 => Some(RecordState::Acknowledged),
            4 => Some(RecordState::Archived),
            _ => None,
        }
    }

    /// True for the states a record never leaves (acknowledged, archived).
    pub fn is_final(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// A refusal of a share-partition, named as Kafka names it. The network server turns it
/// into Kafka's numeric code; in-process callers match on the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShareError {
    /// The record is not acquired by this member: never delivered, already
    /// acknowledged, or its acquisition lock expired (Kafka's INVALID_RECORD_STATE).
    #[error("record at offset {offset} cannot be acknowledged by this member: {reason}")]
    InvalidRecordState {
        /// The record's offset.
        offset: i64,
        /// Its state as the share-partition knows it, or `None` when it is not in
        /// flight (before the start offset, or never fetched).
        state: Option<RecordState>,
        /// Why, in words.
        reason: String,
    },
    /// The member is not a member of the share group (Kafka's UNKNOWN_MEMBER_ID).
    #[error("unknown share group member {0:?}")]
    UnknownMember(String),
    /// The member's epoch is not the one the coordinator has (FENCED_MEMBER_EPOCH).
    #[error("member epoch {given} is not the member's current epoch {current}")]
    FencedMemberEpoch {
        /// The epoch the member sent.
        given: i32,
        /// The member's epoch at the coordinator.
        current: i32,
    },
    /// The group id names a group of another type (a classic or consumer group).
    #[error("the group is not a share group")]
    NotShareGroup,
    /// A malformed request (Kafka's INVALID_REQUEST).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The member has no share session (Kafka's SHARE_SESSION_NOT_FOUND): it must open
    /// one with session epoch 0.
    #[error("member {0:?} has no share session")]
    ShareSessionNotFound(String),
    /// The share session epoch is not the one the session expects next (Kafka's
    /// INVALID_SHARE_SESSION_EPOCH).
    #[error("share session epoch {given} is not the expected {expected}")]
    InvalidShareSessionEpoch {
        /// The epoch the member sent.
        given: i32,
        /// The epoch the session expects.
        expected: i32,
    },
    /// The share group has `group.share.max.size` members already (Kafka's
    /// GROUP_MAX_SIZE_REACHED).
    #[error("the share group has its maximum of {0} members")]
    GroupMaxSizeReached(usize),
    /// The node holds `group.share.max.share.sessions` share sessions already (Kafka's
    /// SHARE_SESSION_LIMIT_REACHED, retriable: a session may close meanwhile).
    #[error("the node holds its maximum of {0} share sessions")]
    ShareSessionLimitReached(usize),
    /// No share group of this id is known: it has no members and no share-partition
    /// state (Kafka's GROUP_ID_NOT_FOUND).
    #[error("no share group of this id")]
    GroupIdNotFound,
    /// A share-partition read for the first time, with no state stored, whose start
    /// (the group's `share.auto.offset.reset`) is not known yet: this node could not
    /// bring its group configs up to date with a change another node may have made
    /// (a cluster node's metadata lags, and the read barrier failed). Retriable: it is
    /// not started at a guess.
    #[error("where the share-partition starts is not known yet: {0}")]
    StartUnknown(String),
    /// The share group has active members: its start offsets cannot be set or
    /// deleted (Kafka's NON_EMPTY_GROUP).
    #[error("the share group has {0} active member(s)")]
    NonEmptyGroup(usize),
}
