//! Where a [`Consumer`](super::Consumer) or a [`GroupConsumer`](super::GroupConsumer)
//! reads: a [`Broker`] in this process, or a cluster over the network. The network side
//! lives in a layer above this one (`tidelog::Cluster`, feature `client`): it implements
//! [`RemoteSource`], [`RemoteConsumer`] and [`RemoteMember`], and converts into a
//! [`Source`], so that `Consumer::new` and `GroupConsumer::join` take `&cluster` exactly
//! where they take `&broker` (as [`Destination`](crate::producer::Destination) does for
//! the producer).
//!
//! The choice is made once, when the consumer is made: an in-process consumer keeps its
//! zero-copy read path as it is.

use std::sync::Arc;
use std::time::Duration;

use super::member::{GroupConfig, OffsetCommitCallback, RebalanceListener};
use super::standalone::{ConsumerConfig, ConsumerRecords};
use crate::broker::Broker;
use crate::error::Result;

/// What a consumer is opened on: a [`Broker`] in this process (`&broker`), or, with the
/// `client` feature, a `tidelog::Cluster` over the network (`&cluster`).
/// [`Consumer::new`](super::Consumer::new) and
/// [`GroupConsumer::join`](super::GroupConsumer::join) take anything that converts into
/// one, so application code differs only in the line that opens the log.
#[derive(Clone)]
pub struct Source(pub(crate) Origin);

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Origin::Local(b) => f.debug_tuple("Local").field(&b.dir()).finish(),
            Origin::Remote(r) => f.debug_tuple("Remote").field(&r.describe()).finish(),
        }
    }
}

// Without the `client` feature nothing builds a `Remote` origin.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
#[derive(Clone)]
pub(crate) enum Origin {
    Local(Broker),
    Remote(Arc<dyn RemoteSource>),
}

#[cfg_attr(not(feature = "client"), allow(dead_code))]
impl Source {
    /// A source over the network.
    pub(crate) fn remote(log: Arc<dyn RemoteSource>) -> Source {
        Source(Origin::Remote(log))
    }
}

impl From<&Broker> for Source {
    fn from(broker: &Broker) -> Source {
        Source(Origin::Local(broker.clone()))
    }
}

/// A log over the network that consumers can be opened on.
pub(crate) trait RemoteSource: Send + Sync {
    /// A consumer of `config` without an assignment.
    fn consumer(&self, config: ConsumerConfig) -> Box<dyn RemoteConsumer>;
    /// A member of the group `config` names (it joins on its first poll).
    fn group_member(&self, config: GroupConfig) -> Result<Box<dyn RemoteMember>>;
    /// What it is, for `Debug`: the bootstrap addresses.
    fn describe(&self) -> String;
}

/// Where a seek goes: Kafka's ListOffsets `timestamp` (-2 the log start, -1 the end, else
/// the first record at or after it, or the end without one).
pub(crate) type SeekSpec = i64;

/// A standalone consumer over the network: the calls a [`Consumer`](super::Consumer)
/// hands on.
pub(crate) trait RemoteConsumer: Send {
    fn assign(&mut self, partitions: &[(String, i32)]) -> Result<()>;
    fn assignment(&self) -> Vec<(String, i32)>;
    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()>;
    /// Moves every assigned partition to `spec`.
    fn seek_to(&mut self, spec: SeekSpec) -> Result<()>;
    /// The first offset at or after `timestamp` of each assigned partition (None: no
    /// such record), Kafka's `offsetsForTimes`.
    fn offsets_for_times(&self, timestamp: i64) -> Result<Vec<(String, i32, Option<i64>)>>;
    fn end_offset(&self, topic: &str, partition: i32) -> Result<i64>;
    fn position(&mut self, topic: &str, partition: i32) -> Result<i64>;
    fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords>;
    /// Commits `offsets`, or the positions when None (a simple commit: generation -1).
    fn commit(&mut self, offsets: Option<&[(&str, i32, i64)]>) -> Result<()>;
    fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>>;
    fn close(&mut self);
}

/// A group member over the network: the calls a [`GroupConsumer`](super::GroupConsumer)
/// hands on. Dropping it leaves the group as `close` does.
pub(crate) trait RemoteMember: Send {
    fn set_listener(&mut self, listener: Box<dyn RebalanceListener>);
    fn member_id(&self) -> &str;
    fn generation(&self) -> i32;
    fn group_metadata(&self) -> crate::producer::ConsumerGroupMetadata;
    fn assignment(&self) -> Vec<(String, i32)>;
    fn position(&mut self, topic: &str, partition: i32) -> Result<i64>;
    fn end_offset(&self, topic: &str, partition: i32) -> Result<i64>;
    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> Result<()>;
    fn offsets_for_times(&self, timestamp: i64) -> Result<Vec<(String, i32, Option<i64>)>>;
    fn committed(&self, topic: &str, partition: i32) -> Result<Option<i64>>;
    fn poll(&mut self, timeout: Duration) -> Result<ConsumerRecords>;
    /// Commits the positions of the owned partitions and waits for the answer, after
    /// the pending asynchronous commits.
    fn commit_positions(&mut self) -> Result<()>;
    /// Sends the commit of the positions of the owned partitions and returns without
    /// waiting for the answer; `callback` gets it on a later call of this member.
    fn commit_async(&mut self, callback: Option<OffsetCommitCallback>) -> Result<()>;
    fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<()>;
    fn close(&mut self);
}

/// What a rebalance listener of a member over the network may do while partitions are
/// revoked (see [`RebalanceContext`](super::RebalanceContext)).
pub(crate) trait RemoteRebalance {
    fn positions(&self) -> Vec<(String, i32, i64)>;
    fn commit_sync(&self) -> Result<()>;
}
