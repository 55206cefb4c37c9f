//! Consumers, group members and the group coordinator they share with the network
//! server.
//!
//! - `standalone`: [`Consumer`], a consumer of partitions it is given (Kafka's
//!   `assign()`), and the records both kinds of consumer return;
//! - `member`: [`GroupConsumer`], a member of a consumer group (Kafka's `subscribe()`);
//! - `coordinator`: the group coordinator, a pure state machine and its concurrent
//!   shell (public as `tidelog::coordinator`);
//! - `offsets`: the records of `__consumer_offsets`.

mod assignor;
mod member;
mod standalone;

pub use assignor::{
    Assignment, Assignor, CooperativeStickyAssignor, RangeAssignor, RoundRobinAssignor,
    Subscription,
};
#[allow(deprecated)]
pub use member::ConsumerGroup;
pub use member::{GroupConfig, GroupConsumer, RebalanceContext, RebalanceListener};
pub use standalone::{
    Consumer, ConsumerConfig, ConsumerRecord, ConsumerRecords, ConsumerRecordsIter, OffsetReset,
};
