//! Adding and removing voters of the metadata quorum online (Kafka's KIP-853,
//! `AddRaftVoter`/`RemoveRaftVoter`): what a caller asks of the Raft loop and why the
//! controller refuses, with Kafka's error codes.

use crossbeam_channel::Sender;

/// Kafka's `NOT_CONTROLLER`.
const NOT_CONTROLLER: i16 = 41;
/// Kafka's `INVALID_REQUEST`.
const INVALID_REQUEST: i16 = 42;
/// Kafka's `REQUEST_TIMED_OUT`.
const REQUEST_TIMED_OUT: i16 = 7;
/// Kafka's `INVALID_VOTER_KEY`.
const INVALID_VOTER_KEY: i16 = 125;
/// Kafka's `DUPLICATE_VOTER`.
const DUPLICATE_VOTER: i16 = 126;
/// Kafka's `VOTER_NOT_FOUND`.
const VOTER_NOT_FOUND: i16 = 127;
/// Kafka's `UNKNOWN_SERVER_ERROR`.
const UNKNOWN_SERVER_ERROR: i16 = -1;

/// A change of the voters asked of the controller.
#[derive(Debug)]
pub(crate) struct VoterChange {
    /// True to add `node` as a voter, false to remove it.
    pub add: bool,
    /// The node.
    pub node: i32,
    /// The directory id the caller knows the node by (Kafka's voter directory id);
    /// None accepts the one the quorum recorded.
    pub directory_id: Option<String>,
    /// Where the Raft loop answers: the change was proposed, or why not.
    pub reply: Sender<Result<(), QuorumRefusal>>,
}

/// Why a voter change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QuorumRefusal {
    /// This node is not the controller; `leader` is (-1 if unknown).
    NotController { leader: i32 },
    /// The node to add is a voter already.
    DuplicateVoter { node: i32 },
    /// The node to remove is not a voter.
    VoterNotFound { node: i32 },
    /// The directory id given is not the one the quorum recorded for the node.
    InvalidVoterKey {
        node: i32,
        known: Option<String>,
        given: String,
    },
    /// The node to add does not follow the metadata log (it is not running as a broker
    /// that joined the cluster).
    NotFollowing { node: i32 },
    /// The node to add lags the log by `behind` entries.
    NotCaughtUp { node: i32, behind: u64 },
    /// Another configuration change is not committed yet.
    ChangeInProgress,
    /// The change would leave no voter.
    LastVoter { node: i32 },
    /// The change was proposed but not seen applied in time, or the node stopped.
    Failed { reason: String },
}

impl QuorumRefusal {
    /// Kafka's error code for it.
    pub(crate) fn code(&self) -> i16 {
        match self {
            QuorumRefusal::NotController { .. } => NOT_CONTROLLER,
            QuorumRefusal::DuplicateVoter { .. } => DUPLICATE_VOTER,
            QuorumRefusal::VoterNotFound { .. } => VOTER_NOT_FOUND,
            QuorumRefusal::InvalidVoterKey { .. } => INVALID_VOTER_KEY,
            QuorumRefusal::NotFollowing { .. } | QuorumRefusal::LastVoter { .. } => INVALID_REQUEST,
            QuorumRefusal::NotCaughtUp { .. } | QuorumRefusal::ChangeInProgress => {
                REQUEST_TIMED_OUT
            }
            QuorumRefusal::Failed { .. } => UNKNOWN_SERVER_ERROR,
        }
    }
}

impl std::fmt::Display for QuorumRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuorumRefusal::NotController { leader } if *leader >= 0 => {
                write!(f, "this node is not the controller; node {leader} is")
            }
            QuorumRefusal::NotController { .. } => {
                write!(f, "this node is not the controller, and none is known")
            }
            QuorumRefusal::DuplicateVoter { node } => write!(f, "node {node} is a voter already"),
            QuorumRefusal::VoterNotFound { node } => write!(f, "node {node} is not a voter"),
            QuorumRefusal::InvalidVoterKey { node, known, given } => match known {
                Some(known) => write!(
                    f,
                    "node {node} is known by directory id {known}, not {given}"
                ),
                None => write!(
                    f,
                    "the quorum knows no directory id for node {node} (it has not registered), not {given}"
                ),
            },
            QuorumRefusal::NotFollowing { node } => write!(
                f,
                "node {node} does not follow the metadata log: start it as a broker (its --node-id and the --quorum) first"
            ),
            QuorumRefusal::NotCaughtUp { node, behind } => write!(
                f,
                "node {node} is {behind} entries behind the metadata log; retry once it caught up"
            ),
            QuorumRefusal::ChangeInProgress => {
                write!(f, "another quorum change is in progress; retry")
            }
            QuorumRefusal::LastVoter { node } => {
                write!(f, "node {node} is the last voter; a quorum needs one")
            }
            QuorumRefusal::Failed { reason } => write!(f, "{reason}"),
        }
    }
}

impl std::error::Error for QuorumRefusal {}
