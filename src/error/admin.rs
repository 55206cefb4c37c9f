//! What a broker's refusal looks like to a client (the admin client, a group member): Kafka's error code (kept, so a
//! program can match it and a person can read its name) and the resource it is about.

use kafka_protocol::ResponseError;

/// One of Kafka's error codes, as a broker answered it (`UNKNOWN_TOPIC_OR_PARTITION`
/// is 3). Compare with the constants, read [`name`](ErrorCode::name) for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(i16);

macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $variant:ident;)*) => {
        impl ErrorCode {
            $(
                $(#[$doc])*
                pub const $name: ErrorCode = ErrorCode(ResponseError::$variant.code());
            )*
        }
    };
}

codes! {
    /// The broker failed in a way it could not name (-1).
    UNKNOWN_SERVER_ERROR = UnknownServerError;
    /// The fetch offset is not in the partition's log (1).
    OFFSET_OUT_OF_RANGE = OffsetOutOfRange;
    /// The member's generation is not the group's (22).
    ILLEGAL_GENERATION = IllegalGeneration;
    /// A new member must join again with the member id the coordinator gave (79).
    MEMBER_ID_REQUIRED = MemberIdRequired;
    /// No topic of that name, or no such partition (3).
    UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartition;
    /// The partition has no leader for now, e.g. during an election (5).
    LEADER_NOT_AVAILABLE = LeaderNotAvailable;
    /// The broker asked does not lead the partition (6).
    NOT_LEADER_OR_FOLLOWER = NotLeaderOrFollower;
    /// The broker did not complete the request in time (7).
    REQUEST_TIMED_OUT = RequestTimedOut;
    /// The group coordinator is loading its offsets (14).
    COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgress;
    /// No group coordinator is available yet (15).
    COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailable;
    /// The broker asked is not the group's coordinator (16).
    NOT_COORDINATOR = NotCoordinator;
    /// A topic name breaks Kafka's rules (17).
    INVALID_TOPIC_EXCEPTION = InvalidTopicException;
    /// The member is not known to the group (25).
    UNKNOWN_MEMBER_ID = UnknownMemberId;
    /// The group is rebalancing (27).
    REBALANCE_IN_PROGRESS = RebalanceInProgress;
    /// The principal may not act on the topic (29).
    TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationFailed;
    /// The principal may not act on the group (30).
    GROUP_AUTHORIZATION_FAILED = GroupAuthorizationFailed;
    /// The principal may not act on the cluster (31).
    CLUSTER_AUTHORIZATION_FAILED = ClusterAuthorizationFailed;
    /// The principal may not act as the transactional id (53).
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = TransactionalIdAuthorizationFailed;
    /// The broker has no authorizer, so no ACLs (54).
    SECURITY_DISABLED = SecurityDisabled;
    /// The user or ACL asked about does not exist (91).
    RESOURCE_NOT_FOUND = ResourceNotFound;
    /// The same user credential twice in one request (92).
    DUPLICATE_RESOURCE = DuplicateResource;
    /// A credential the broker will not store (93).
    UNACCEPTABLE_CREDENTIAL = UnacceptableCredential;
    /// The broker does not answer this request version (35).
    UNSUPPORTED_VERSION = UnsupportedVersion;
    /// A topic of that name exists already (36).
    TOPIC_ALREADY_EXISTS = TopicAlreadyExists;
    /// A partition count below 1, or not a growth (37).
    INVALID_PARTITIONS = InvalidPartitions;
    /// A replication factor below 1 or above the number of brokers (38).
    INVALID_REPLICATION_FACTOR = InvalidReplicationFactor;
    /// A replica assignment the controller cannot use (39).
    INVALID_REPLICA_ASSIGNMENT = InvalidReplicaAssignment;
    /// A configuration key or value the broker refuses (40).
    INVALID_CONFIG = InvalidConfig;
    /// The broker asked is not the controller (41).
    NOT_CONTROLLER = NotController;
    /// The broker found the request malformed or inconsistent (42).
    INVALID_REQUEST = InvalidRequest;
    /// The group has members, so the operation is refused (68).
    NON_EMPTY_GROUP = NonEmptyGroup;
    /// No group of that id (69).
    GROUP_ID_NOT_FOUND = GroupIdNotFound;
    /// The request's leader epoch is older than the broker's (74).
    FENCED_LEADER_EPOCH = FencedLeaderEpoch;
    /// The request's leader epoch is newer than the broker knows (75).
    UNKNOWN_LEADER_EPOCH = UnknownLeaderEpoch;
    /// The preferred replica cannot lead: it is down or out of sync (80).
    PREFERRED_LEADER_NOT_AVAILABLE = PreferredLeaderNotAvailable;
    /// No replica is alive to lead the partition (83).
    ELIGIBLE_LEADERS_NOT_AVAILABLE = EligibleLeadersNotAvailable;
    /// The partition is led as the election would lead it already (84).
    ELECTION_NOT_NEEDED = ElectionNotNeeded;
    /// No reassignment of the partition is in progress (85).
    NO_REASSIGNMENT_IN_PROGRESS = NoReassignmentInProgress;
    /// No broker of that id is registered (102).
    BROKER_ID_NOT_REGISTERED = BrokerIdNotRegistered;
    /// A feature level the controller refuses: a node does not support it, or a
    /// downgrade without a downgrade type (95).
    INVALID_UPDATE_VERSION = InvalidUpdateVersion;
    /// The log directory is offline, or the partition is in one that is (56).
    KAFKA_STORAGE_ERROR = KafkaStorageError;
    /// The path is not one of the broker's log directories (57).
    LOG_DIR_NOT_FOUND = LogDirNotFound;
}

impl ErrorCode {
    /// The error of a nonzero Kafka code (any code: ones without a constant here keep
    /// their number and name).
    pub const fn from_code(code: i16) -> ErrorCode {
        ErrorCode(code)
    }

    /// Kafka's number of the error.
    pub const fn code(self) -> i16 {
        self.0
    }

    /// Kafka's name of the error, as its tools and logs print it:
    /// `TOPIC_ALREADY_EXISTS`; `UNKNOWN_CODE_N` for a code Kafka does not define.
    pub fn name(self) -> String {
        error_name(self.0)
    }

    /// True for the errors that mean "ask again, maybe elsewhere": the answer depends
    /// on where leaders, the controller or a group's coordinator are right now, which
    /// fresh metadata or FindCoordinator tells. The admin client retries these a bounded
    /// number of times ([`AdminClientBuilder::retries`](crate::admin::AdminClientBuilder::retries)).
    pub fn is_retriable(self) -> bool {
        matches!(
            self,
            ErrorCode::LEADER_NOT_AVAILABLE
                | ErrorCode::NOT_LEADER_OR_FOLLOWER
                | ErrorCode::COORDINATOR_LOAD_IN_PROGRESS
                | ErrorCode::COORDINATOR_NOT_AVAILABLE
                | ErrorCode::NOT_COORDINATOR
                | ErrorCode::NOT_CONTROLLER
                | ErrorCode::UNKNOWN_LEADER_EPOCH
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// What an [`AdminError`] is about.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resource {
    /// A topic.
    Topic(String),
    /// One partition of a topic.
    Partition(TopicPartition),
    /// A consumer group.
    Group(String),
    /// A broker, by node id.
    Broker(i32),
    /// The cluster as a whole (metadata, listing groups).
    Cluster,
    /// A user's SCRAM credentials.
    User(String),
    /// An ACL binding, as `tidelog acls` prints it.
    Acl(String),
    /// A transactional id (its transaction coordinator's answers).
    TransactionalId(String),
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Topic(t) => write!(f, "topic {t:?}"),
            Resource::Partition(tp) => write!(f, "partition {tp}"),
            Resource::Group(g) => write!(f, "consumer group {g:?}"),
            Resource::Broker(id) => write!(f, "broker {id}"),
            Resource::Cluster => f.write_str("the cluster"),
            Resource::User(u) => write!(f, "user {u:?}"),
            Resource::Acl(b) => write!(f, "ACL {b}"),
            Resource::TransactionalId(t) => write!(f, "transactional id {t:?}"),
        }
    }
}

/// A broker refused an admin request for one resource: Kafka's error code, and the
/// broker's message when it sent one. Reaches callers as
/// [`Error::Admin`](crate::Error::Admin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminError {
    /// The topic, partition, group or broker the refusal is about.
    pub resource: Resource,
    /// Kafka's error code.
    pub code: ErrorCode,
    /// The broker's explanation, if it gave one.
    pub message: Option<String>,
}

impl AdminError {
    /// The refusal `code` (a nonzero Kafka code) for `resource`, with the broker's
    /// `message` (an empty one counts as none).
    pub fn new(resource: Resource, code: ErrorCode, message: Option<String>) -> AdminError {
        AdminError {
            resource,
            code,
            message: message.filter(|m| !m.trim().is_empty()),
        }
    }
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.resource, self.code)?;
        if let Some(m) = &self.message {
            write!(f, " ({m})")?;
        }
        Ok(())
    }
}

impl std::error::Error for AdminError {}

impl From<AdminError> for crate::error::Error {
    fn from(e: AdminError) -> crate::error::Error {
        crate::error::Error::Admin(Box::new(e))
    }
}

/// A partition of a topic: `events-2`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// Partition `partition` of `topic`.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Kafka's name of an error code: `UNKNOWN_TOPIC_OR_PARTITION` for 3.
pub(crate) fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_CODE_{c}"),
        Some(e) => {
            let camel = format!("{e:?}");
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(56), "KAFKA_STORAGE_ERROR");
        assert_eq!(error_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(error_name(9999), "UNKNOWN_CODE_9999");
    }

    #[test]
    fn codes_have_kafkas_numbers_and_names() {
        assert_eq!(ErrorCode::TOPIC_ALREADY_EXISTS.code(), 36);
        assert_eq!(
            ErrorCode::TOPIC_ALREADY_EXISTS.name(),
            "TOPIC_ALREADY_EXISTS"
        );
        assert_eq!(ErrorCode::NOT_CONTROLLER.code(), 41);
        assert_eq!(ErrorCode::GROUP_ID_NOT_FOUND.code(), 69);
        assert_eq!(
            ErrorCode::from_code(3),
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION
        );
        assert_eq!(ErrorCode::from_code(9999).name(), "UNKNOWN_CODE_9999");
        assert!(ErrorCode::NOT_COORDINATOR.is_retriable());
        assert!(!ErrorCode::TOPIC_ALREADY_EXISTS.is_retriable());
    }

    #[test]
    fn an_error_names_its_resource_code_and_message() {
        let e = AdminError::new(
            Resource::Topic("events".into()),
            ErrorCode::TOPIC_ALREADY_EXISTS,
            Some("topic \"events\" already exists".into()),
        );
        assert_eq!(
            e.to_string(),
            "topic \"events\": TOPIC_ALREADY_EXISTS (topic \"events\" already exists)"
        );
        let e = AdminError::new(
            Resource::Partition(TopicPartition::new("events", 2)),
            ErrorCode::LEADER_NOT_AVAILABLE,
            Some(" ".into()),
        );
        assert_eq!(e.to_string(), "partition events-2: LEADER_NOT_AVAILABLE");
        let e: crate::error::Error = e.into();
        assert!(
            matches!(&e, crate::error::Error::Admin(a) if a.code == ErrorCode::LEADER_NOT_AVAILABLE)
        );
    }
}
