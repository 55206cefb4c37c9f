//! Where a [`Producer`](super::Producer) sends: a [`Broker`] in this process, or a
//! cluster over the network. The network side lives in a layer above this one
//! (`tidelog::Cluster`, feature `client`): it implements [`RemoteLog`] and
//! [`RemoteProducer`], and converts into a [`Destination`], so that `Producer::new` and
//! `Producer::builder` take `&cluster` exactly where they take `&broker`.
//!
//! The choice is made once, when the producer is built: an in-process producer keeps
//! its send path as it is (a match on the backend per call, no allocation and no
//! dynamic dispatch per record).

use std::sync::Arc;

use super::accumulator::{Appended, BatchSlot};
use super::{
    ConsumerGroupMetadata, DeliveryReceipt, ProducerConfig, ProducerRecord, RecordMetadata,
};
use crate::broker::Broker;
use crate::error::Result;

/// What a [`Producer`](super::Producer) is opened on: a [`Broker`] in this process
/// (`&broker`), or, with the `client` feature, a `tidelog::Cluster` over the network
/// (`&cluster`). `Producer::new`, `Producer::builder` and the consumers take anything
/// that converts into one, so application code differs only in the line that opens
/// the log.
#[derive(Clone)]
pub struct Destination(pub(crate) Target);

impl std::fmt::Debug for Destination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Target::Local(b) => f.debug_tuple("Local").field(&b.dir()).finish(),
            Target::Remote(r) => f.debug_tuple("Remote").field(&r.describe()).finish(),
        }
    }
}

// Without the `client` feature nothing builds a `Remote` target.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
#[derive(Clone)]
pub(crate) enum Target {
    Local(Broker),
    Remote(Arc<dyn RemoteLog>),
}

#[cfg_attr(not(feature = "client"), allow(dead_code))]
impl Destination {
    /// A destination over the network.
    pub(crate) fn remote(log: Arc<dyn RemoteLog>) -> Destination {
        Destination(Target::Remote(log))
    }
}

impl From<&Broker> for Destination {
    fn from(broker: &Broker) -> Destination {
        Destination(Target::Local(broker.clone()))
    }
}

/// A log over the network that producers can be opened on.
pub(crate) trait RemoteLog: Send + Sync {
    /// A producer of `config` on it.
    fn producer(&self, config: ProducerConfig) -> Result<Arc<dyn RemoteProducer>>;
    /// What it is, for `Debug`: the bootstrap addresses.
    fn describe(&self) -> String;
}

/// A producer over the network: the calls a [`Producer`](super::Producer) hands on,
/// once per call.
pub(crate) trait RemoteProducer: Send + Sync {
    fn config(&self) -> &ProducerConfig;
    /// The producer id and epoch its batches are numbered with now (None: not
    /// idempotent, or none obtained yet).
    fn producer_id(&self) -> Option<(i64, i16)>;
    /// Puts the record in its partition's batch; the receipt completes when the
    /// batch is acknowledged (at once, offset -1, with acks 0).
    fn send_async(&self, topic: &str, record: &ProducerRecord<'_>) -> Result<DeliveryReceipt>;
    /// Sends every open batch and waits for their acknowledgements; the first error
    /// since the last flush of a record nobody waited on.
    fn flush(&self) -> Result<()>;
    /// Flushes and refuses further sends.
    fn close(&self) -> Result<()>;
    /// The transactional calls of a producer with a `transactional.id`, with the
    /// semantics of [`Producer::init_transactions`](super::Producer::init_transactions)
    /// and the calls after it.
    fn init_transactions(&self) -> Result<()>;
    fn begin_transaction(&self) -> Result<()>;
    fn send_offsets_to_transaction(
        &self,
        offsets: &[(String, i32, i64)],
        group: &ConsumerGroupMetadata,
    ) -> Result<()>;
    fn commit_transaction(&self) -> Result<()>;
    fn abort_transaction(&self) -> Result<()>;
}

/// The completion of one batch sent over the network, shared by its records' receipts.
#[cfg_attr(not(feature = "client"), allow(dead_code))]
#[derive(Debug, Clone, Default)]
pub(crate) struct RemoteSlot(Arc<BatchSlot>);

#[cfg_attr(not(feature = "client"), allow(dead_code))]
impl RemoteSlot {
    /// The receipt of the record at `index` of this batch, in `partition`, stamped
    /// `timestamp`.
    pub(crate) fn receipt(&self, index: i32, partition: i32, timestamp: i64) -> DeliveryReceipt {
        DeliveryReceipt {
            slot: self.0.clone(),
            index,
            partition,
            timestamp,
            committed: None,
        }
    }

    /// The batch was acknowledged at `base_offset` (-1 with acks 0), with the broker's
    /// LogAppendTime if the topic keeps it (-1 otherwise).
    pub(crate) fn acknowledged(&self, base_offset: i64, log_append_time: i64) {
        self.0.complete(Ok(Appended {
            base_offset,
            log_append_time: (log_append_time >= 0).then_some(log_append_time),
            epoch: Default::default(),
        }));
    }

    /// The batch failed for good.
    pub(crate) fn failed(&self, error: crate::error::Error) {
        self.0.complete(Err(error));
    }
}

/// The metadata of a record sent with acks 0: its partition and timestamp, offset -1.
pub(crate) fn unacknowledged(receipt: &DeliveryReceipt) -> RecordMetadata {
    RecordMetadata {
        partition: receipt.partition,
        offset: -1,
        timestamp: receipt.timestamp,
    }
}
