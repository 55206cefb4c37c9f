//! The transaction coordinator (KIP-98, with KIP-890's fixes): a pure state machine of
//! the transactional ids of one `__transaction_state` partition, and the format of that
//! topic's records.
//!
//! [`TxnCoordinator`] holds each transactional id's [`TransactionMetadata`] and moves
//! it through Kafka's [`TxnState`]s: InitProducerId ([`TxnCoordinator::init_producer_id`]),
//! AddPartitionsToTxn and AddOffsetsToTxn, EndTxn, the completion of the markers,
//! timeouts and the expiration of idle ids. It reads no clock and does no I/O: every
//! operation returns a [`TxnOutcome`] naming the record to write to
//! `__transaction_state` ([`log`] encodes it as Kafka does), the markers to send and
//! the answer, or a [`TxnError`].
//!
//! [`TransactionCoordinator`] is its shell: one [`TxnCoordinator`] per led partition of
//! `__transaction_state`, each outcome's record written ([`TxnStateLog`]) before the
//! answer, a reload from the log when a write fails, markers sent through a
//! [`MarkerWriter`] and retried until written, and a timer that aborts timed-out
//! transactions and expires idle ids. The broker owns one and the network server serves
//! it. docs/design.md ("Transactions") describes the states, the records and the shell.

pub(crate) mod events;
pub mod log;
mod shell;
mod state;

pub use crate::config::TransactionConfig;
pub use crate::error::{TxnError, TxnState};
pub use shell::{MarkerWriter, MarkersDone, RecordVisitor, TransactionCoordinator, TxnStateLog};
pub(crate) use shell::{fail_batch, write_markers_as_batch};
pub use state::{
    AddPartitionsRequest, DEFAULT_MAX_TIMEOUT_MS, DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
    EPOCH_BUMP_TRANSACTION_VERSION, EndTxnRequest, InitProducerIdAnswer, InitProducerIdRequest,
    NO_PRODUCER_EPOCH, NO_PRODUCER_ID, OFFSETS_TOPIC, PartitionVerdicts, ProducerIdAndEpoch,
    TopicPartition, TransactionMetadata, TxnCoordinator, TxnLogWrite, TxnMarkers, TxnOutcome,
    TxnResult, is_epoch_exhausted,
};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_shell;
