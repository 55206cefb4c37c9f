//! Consumers and consumer group members.
//!
//! The consumers themselves are at the crate root; this module also holds what a group
//! member is configured with:
//!
//! - [`Consumer`], a consumer of partitions it is given (Kafka's `assign()`), and the
//!   records both kinds of consumer return ([`ConsumerRecords`], [`ConsumerRecord`]);
//! - [`GroupConsumer`], a member of a consumer group (Kafka's `subscribe()`), configured
//!   by [`GroupConfig`], with a [`RebalanceListener`] told of the partitions it gains and
//!   loses;
//! - the partition assignors a group's leader member runs ([`Assignor`]:
//!   [`RangeAssignor`], [`RoundRobinAssignor`], [`CooperativeStickyAssignor`]) and the
//!   [`Subscription`] and [`Assignment`] they exchange through the coordinator (Kafka's
//!   `ConsumerProtocol`).
//!
//! - [`ShareConsumer`], a member of a share group (KIP-932, "queues for Kafka"):
//!   any number of them read the same partitions, each record acquired by one of them
//!   at a time and acknowledged on its own ([`ShareConsumerConfig`], [`ShareRecord`]).
//!
//! The group coordinator the members talk to is [`crate::coordinator`].

mod assignor;
mod member;
mod share;
mod source;
mod standalone;

pub use assignor::{
    Assignment, Assignor, CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor,
    Subscription,
};
#[allow(deprecated)]
pub use member::ConsumerGroup;
pub use member::{GroupConfig, GroupConsumer, GroupProtocol, RebalanceContext, RebalanceListener};
// Implemented by the network client (feature `client`); unused without it.
pub use share::{ShareConsumer, ShareConsumerConfig, ShareRecord};
pub use source::Source;
#[cfg_attr(not(feature = "client"), allow(unused_imports))]
pub(crate) use source::{RemoteConsumer, RemoteMember, RemoteRebalance, RemoteSource, SeekSpec};
// What a network member calls back with (feature `client`).
#[cfg_attr(not(feature = "client"), allow(unused_imports))]
pub(crate) use member::OffsetCommitCallback;
pub use standalone::{
    Consumer, ConsumerConfig, ConsumerRecord, ConsumerRecords, ConsumerRecordsIter, IsolationLevel,
    OffsetReset,
};
