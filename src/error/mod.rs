//! The one error type of the crate.
//!
//! Every message is a sentence that names what failed and where: the file and byte
//! position, or the topic, partition and offset. Corruption is its own variant so that a
//! caller can tell "the disk holds bad bytes" apart from "the disk is unreachable".

#[cfg(feature = "client")]
mod admin;
#[cfg(feature = "client")]
mod api;
#[cfg(feature = "client")]
mod authorization;
mod group;
mod share;
mod transaction;

#[cfg(feature = "client")]
pub(crate) use admin::error_name;
#[cfg(feature = "client")]
pub use admin::{AdminError, ErrorCode, Resource, TopicPartition};
#[cfg(feature = "client")]
pub use api::ApiError;
#[cfg(feature = "client")]
pub(crate) use api::api_name;
#[cfg(feature = "client")]
pub use authorization::{AclOperation, AclPermission, PatternType, ResourceType};
pub use group::GroupError;
pub use share::{RecordState, ShareError};
pub use transaction::{TxnError, TxnState};

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// `Result` with tidelog's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in tidelog.
///
/// Cheap to clone (the operating system's error is shared behind an `Arc`), so one
/// failure can be handed to every caller waiting on it, such as every record of a
/// batch that failed to append, keeping its variant.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O operation on a file or directory failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("open", "fsync", "rename", ...).
        op: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The operating system's error (shared: see [`Error`]).
        #[source]
        source: Arc<io::Error>,
    },

    /// Bytes on disk or received from outside are not a valid record batch, index or
    /// checkpoint.
    #[error("corrupt data in {location} at byte {position}: {reason}")]
    Corrupt {
        /// The file (or "input" for bytes handed in by a caller or client).
        location: String,
        /// Byte position of the bad data inside `location`.
        position: u64,
        /// What is wrong.
        reason: String,
    },

    /// A read asked for an offset outside the log's valid range `[start, end)`.
    #[error("offset {offset} is out of range for {partition}: valid offsets are {start}..{end}")]
    OffsetOutOfRange {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The offset that was asked for.
        offset: i64,
        /// The log start offset (first readable offset).
        start: i64,
        /// The log end offset (next offset to be written).
        end: i64,
    },

    /// A batch is larger than `max_message_bytes`.
    #[error("batch of {size} bytes for {partition} exceeds max_message_bytes = {max}")]
    MessageTooLarge {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The batch size in bytes.
        size: usize,
        /// The configured limit.
        max: usize,
    },

    /// A batch handed in by a caller or client is malformed (not corruption on disk).
    #[error("invalid record batch: {0}")]
    InvalidBatch(String),

    /// The log, partition, producer, consumer or broker was closed.
    #[error("{0} is closed")]
    Closed(String),

    /// An earlier fsync failed, so the page cache state is unknown and the partition
    /// refuses writes until it is reopened.
    #[error("{partition} refuses writes after an earlier failure: {reason}; reopen the broker")]
    Poisoned {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The failure that poisoned it.
        reason: String,
    },

    /// Another process (or another `Broker` in this process) holds the data directory.
    #[error("data directory {0} is in use by another tidelog instance")]
    DirectoryLocked(PathBuf),

    /// The data directory was opened read-only (`Broker::open_read_only`): this process
    /// never writes it.
    #[error("data directory {0} is opened read-only: this process does not write it")]
    ReadOnly(PathBuf),

    /// No topic of that name exists.
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),

    /// The topic exists but has no such partition.
    #[error("unknown partition {partition} of topic {topic:?} (it has {count} partitions)")]
    UnknownPartition {
        /// Topic name.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// How many partitions the topic has.
        count: i32,
    },

    /// A topic of that name already exists.
    #[error("topic {0:?} already exists")]
    TopicExists(String),

    /// A topic name breaks Kafka's naming rules.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName {
        /// The name given.
        name: String,
        /// The rule it breaks.
        reason: String,
    },

    /// A configuration key or value is not valid.
    #[error("invalid configuration {key}: {reason}")]
    InvalidConfig {
        /// The setting's name.
        key: String,
        /// Why the value was rejected.
        reason: String,
    },

    /// A consumer group operation was refused (unknown member, stale generation,
    /// rebalance in progress, ...).
    #[error("consumer group {group:?}: {source}")]
    Group {
        /// The group id.
        group: String,
        /// The coordinator's refusal.
        #[source]
        source: GroupError,
    },

    /// A transaction coordinator refused a request of a transactional producer (fenced
    /// epoch, a transaction still completing, a bad timeout, ...).
    #[error("transactional id {transactional_id:?}: {source}")]
    Transaction {
        /// The transactional id.
        transactional_id: String,
        /// The coordinator's refusal.
        #[source]
        source: TxnError,
    },

    /// A share group (KIP-932) refused an operation on one of its share-partitions:
    /// an acknowledgement of a record the member does not hold, an unknown member.
    #[error("share group {group:?}, {topic}-{partition}: {source}")]
    Share {
        /// The share group id.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The refusal.
        #[source]
        source: ShareError,
    },

    /// A newer instance of a transactional producer (the same `transactional.id`,
    /// initialized later) fenced this one (Kafka's ProducerFencedException): fatal for
    /// this producer, which must be dropped.
    #[error(
        "transactional id {transactional_id:?}: producer {producer_id} epoch {epoch} is fenced by a newer instance of the producer"
    )]
    ProducerFenced {
        /// The transactional id.
        transactional_id: String,
        /// The producer id this instance had.
        producer_id: i64,
        /// The epoch this instance had.
        epoch: i16,
    },

    /// A transactional producer was asked to do something its state does not allow
    /// (Kafka's IllegalStateException): a send outside a transaction,
    /// `begin_transaction` before `init_transactions`, a commit after an abortable
    /// error, ...
    #[error("transactional id {transactional_id:?}: cannot {operation} {state}")]
    InvalidProducerState {
        /// The transactional id.
        transactional_id: String,
        /// What was asked ("send", "commit the transaction", ...).
        operation: &'static str,
        /// Why not ("outside a transaction", "before init_transactions", ...).
        state: &'static str,
    },

    /// An error the open transaction cannot go on from (a failed append, a refused
    /// offset commit): `abort_transaction` and begin a new one
    /// (Kafka's TransactionAbortableException).
    #[error("transactional id {transactional_id:?}: the transaction must be aborted: {source}")]
    TransactionAbortable {
        /// The transactional id.
        transactional_id: String,
        /// What failed.
        #[source]
        source: Box<Error>,
    },

    /// A committed offset is no longer in the log and `auto_offset_reset` is `none`.
    #[error(
        "no valid position for {partition}: offset {offset} is outside {start}..{end} and auto_offset_reset is none"
    )]
    NoOffsetForPartition {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The committed or requested offset.
        offset: i64,
        /// The log start offset.
        start: i64,
        /// The log end offset.
        end: i64,
    },

    /// An operation did not complete in the time allowed.
    #[error("timed out: {0}")]
    Timeout(String),

    /// A follower's append (`PartitionLog::append_replica`) holds a batch whose offset
    /// does not follow the log end or the batch before it (Kafka's
    /// UnexpectedAppendOffsetException).
    #[error(
        "replica append to {partition}: a batch at offset {offset} does not follow the log, whose next offset must be at least {expected}"
    )]
    UnexpectedAppendOffset {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The batch's base offset.
        offset: i64,
        /// The smallest base offset the batch could have had.
        expected: i64,
    },

    /// An idempotent producer's batch repeats sequence numbers the partition already
    /// holds but is not one of the producer's last batches it remembers, or is a
    /// duplicate among several batches (Kafka's DUPLICATE_SEQUENCE_NUMBER).
    #[error("{partition}: producer {producer_id} sequence {sequence} was already appended")]
    DuplicateSequence {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The producer id.
        producer_id: i64,
        /// The batch's first sequence.
        sequence: i32,
    },

    /// An idempotent producer's batch does not follow its last one
    /// (OUT_OF_ORDER_SEQUENCE_NUMBER).
    #[error(
        "{partition}: producer {producer_id} (epoch {epoch}) sent sequence {sequence} where {expected} was next"
    )]
    OutOfOrderSequence {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The producer id.
        producer_id: i64,
        /// The batch's producer epoch.
        epoch: i16,
        /// The batch's first sequence.
        sequence: i32,
        /// The sequence the batch had to start with.
        expected: i32,
    },

    /// An idempotent producer's batch carries an epoch older than the producer's
    /// current one: a newer instance of the producer fenced it; or a transaction
    /// version 2 marker is not newer than it: a delayed marker of an earlier
    /// transaction (INVALID_PRODUCER_EPOCH).
    #[error(
        "{partition}: producer {producer_id} epoch {epoch} is stale, its current epoch is {current}"
    )]
    InvalidProducerEpoch {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The producer id.
        producer_id: i64,
        /// The batch's producer epoch.
        epoch: i16,
        /// The producer's current epoch.
        current: i16,
    },

    /// A transaction marker from an older transaction coordinator than the one that
    /// last wrote a marker of the producer (Kafka's TRANSACTION_COORDINATOR_FENCED):
    /// the coordinator moved.
    #[error(
        "{partition}: transaction marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, older than {current}: the coordinator is fenced"
    )]
    TransactionCoordinatorFenced {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The producer id.
        producer_id: i64,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The coordinator epoch of the producer's last marker.
        current: i32,
    },

    /// A leader epoch older than one the log already holds (epochs never go back).
    #[error("{partition}: leader epoch {epoch} is older than the log's latest epoch {latest}")]
    StaleLeaderEpoch {
        /// The partition, as `topic-partition`.
        partition: String,
        /// The epoch given.
        epoch: i32,
        /// The latest epoch in the log's leader-epoch cache.
        latest: i32,
    },

    /// A replication factor below 1 or above the number of available brokers.
    #[error("invalid replication factor for topic {topic:?}: {reason}")]
    InvalidReplicationFactor {
        /// Topic name.
        topic: String,
        /// Why.
        reason: String,
    },

    /// A replica assignment that names unknown brokers, repeats one, or is uneven.
    #[error("invalid replica assignment for topic {topic:?}: {reason}")]
    InvalidReplicaAssignment {
        /// Topic name.
        topic: String,
        /// Why.
        reason: String,
    },

    /// A partition count that is not valid for the topic (below 1, or not a growth).
    #[error("invalid partition count for topic {topic:?}: {reason}")]
    InvalidPartitions {
        /// Topic name.
        topic: String,
        /// Why.
        reason: String,
    },

    /// This cluster node does not lead the partition: the client refreshes its metadata
    /// and goes to the leader.
    #[error("{partition}: not the leader on this node: {reason}")]
    NotLeaderOrFollower {
        /// The partition, as `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },

    /// A change computed at an older leader epoch, or by a broker that is not the leader.
    #[error("{partition}: fenced leader epoch: {reason}")]
    FencedLeaderEpoch {
        /// The partition, as `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },

    /// A share-partition state write made against a state an admin has replaced since
    /// (an older state epoch; Kafka's FENCED_STATE_EPOCH).
    #[error("{partition}: fenced state epoch: {reason}")]
    FencedStateEpoch {
        /// The partition of `__share_group_state`, as `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },

    /// A change computed from an older partition epoch.
    #[error("{partition}: stale partition epoch: {reason}")]
    InvalidUpdateVersion {
        /// The partition, as `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },

    /// An ISR change naming a replica that cannot be in sync (not a replica, fenced, or
    /// leaving the leader out).
    #[error("{partition}: ineligible replica: {reason}")]
    IneligibleReplica {
        /// The partition, as `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },

    /// A request named a leader epoch newer than this node knows (its metadata lags):
    /// the client retries.
    #[error("{partition}: unknown leader epoch: {reason}")]
    UnknownLeaderEpoch {
        /// The partition, as `topic-partition`.
        partition: String,
        /// Why.
        reason: String,
    },

    /// An `acks=all` write refused before it was appended: the partition has fewer
    /// in-sync replicas than its `min.insync.replicas`.
    #[error(
        "{partition}: {isr} in-sync replicas, min.insync.replicas is {min}: nothing was appended"
    )]
    NotEnoughReplicas {
        /// The partition, as `topic-partition`.
        partition: String,
        /// Size of the ISR.
        isr: usize,
        /// The partition's `min.insync.replicas`.
        min: i32,
    },

    /// An `acks=all` write that was appended but whose partition's ISR fell below
    /// `min.insync.replicas` before it was committed: it may or may not be kept.
    #[error(
        "{partition}: appended, but the ISR shrank to {isr} (min.insync.replicas {min}) before it was committed"
    )]
    NotEnoughReplicasAfterAppend {
        /// The partition, as `topic-partition`.
        partition: String,
        /// Size of the ISR.
        isr: usize,
        /// The partition's `min.insync.replicas`.
        min: i32,
    },

    /// A Kafka broker refused a request of the admin client
    /// ([`AdminClient`](crate::admin::AdminClient)): the topic, partition or group, Kafka's
    /// error code (its name is displayed) and the broker's message.
    #[cfg(feature = "client")]
    #[error(transparent)]
    Admin(Box<AdminError>),

    /// A broker refused a request of the network client ([`Cluster`](crate::Cluster),
    /// and the producer and consumers over it): the API and version, the broker, the
    /// topic or partition, Kafka's error code and the broker's message.
    #[cfg(feature = "client")]
    #[error(transparent)]
    Api(Box<ApiError>),
    /// A broker does not answer any version of an API that this client can speak (its
    /// ApiVersions answer lists none in common), or does not answer the API at all.
    #[cfg(feature = "client")]
    #[error("{broker} cannot answer {api}: {reason}")]
    UnsupportedApi {
        /// The broker's `host:port`.
        broker: String,
        /// The API, as `Produce`.
        api: String,
        /// The versions each side speaks.
        reason: String,
    },

    /// A cluster request from a broker that is not registered or whose broker epoch is
    /// not its current one.
    #[error("broker {broker}: stale broker epoch: {reason}")]
    StaleBrokerEpoch {
        /// Node id.
        broker: i32,
        /// Why.
        reason: String,
    },
    /// A broker refused this client's SASL authentication (a wrong password, an
    /// unknown user, a mechanism it does not enable) or its proof of the credential; on
    /// the wire Kafka's SASL_AUTHENTICATION_FAILED.
    #[cfg(feature = "client")]
    #[error("authentication with {broker} failed: {reason}")]
    AuthenticationFailed {
        /// The broker's `host:port`.
        broker: String,
        /// Why, with the broker's message when it sent one.
        reason: String,
    },
    /// A network client's principal may not do an operation on a resource (the
    /// server's ACLs, `--authorizer`); on the wire Kafka's TOPIC_, GROUP_, CLUSTER_ or
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, by resource type.
    #[cfg(feature = "client")]
    #[error("{principal} is not authorized to {operation} {resource_type} {name:?}")]
    AuthorizationFailed {
        /// The principal refused, e.g. `User:alice`.
        principal: String,
        /// The operation refused.
        operation: AclOperation,
        /// The type of the resource.
        resource_type: ResourceType,
        /// The resource's name.
        name: String,
    },
    /// An incremental Fetch named a fetch session (KIP-227) the broker does not hold:
    /// never made, evicted from the session cache or closed. On the wire Kafka's
    /// FETCH_SESSION_ID_NOT_FOUND; the client starts again with a full fetch.
    #[cfg(feature = "server")]
    #[error(
        "fetch session {session_id} not found (evicted, closed or never made): send a full fetch"
    )]
    FetchSessionIdNotFound {
        /// The session id the fetch named.
        session_id: i32,
    },
    /// An incremental Fetch's session epoch is not the one its session expects next
    /// (a fetch lost or sent twice). On the wire Kafka's INVALID_FETCH_SESSION_EPOCH.
    #[cfg(feature = "server")]
    #[error("fetch session {session_id} expects epoch {expected}, not {epoch}")]
    InvalidFetchSessionEpoch {
        /// The session.
        session_id: i32,
        /// The epoch the session expects next.
        expected: i32,
        /// The epoch the fetch carried.
        epoch: i32,
    },
}

impl Error {
    /// An [`Error::Io`]: the operating system's `source` error while doing `op` to
    /// `path`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// An [`Error::Corrupt`] at `position` of `location`.
    pub(crate) fn corrupt(
        location: impl std::fmt::Display,
        position: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corrupt {
            location: location.to_string(),
            position,
            reason: reason.into(),
        }
    }

    /// True for errors that mean the bytes are bad (as opposed to unreachable).
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }
}

/// Attach a path and an operation name to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|e| Error::io(op, path, e))
    }
}
