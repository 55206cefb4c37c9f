//! Why the transaction coordinator refused a request, and the states it names.

use std::fmt;

/// The state of one transactional id at its coordinator, as Kafka names and numbers it
/// (the number is the `TransactionStatus` byte of a `__transaction_state` record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction is open: the producer id was initialized (or a transaction ended
    /// long ago and the id was re-initialized).
    Empty,
    /// A transaction is open: partitions were added and no EndTxn has come yet.
    Ongoing,
    /// EndTxn(commit) was accepted and recorded; the COMMIT markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing InitProducerId was recorded; the ABORT
    /// markers are being written.
    PrepareAbort,
    /// Every COMMIT marker was written.
    CompleteCommit,
    /// Every ABORT marker was written.
    CompleteAbort,
    /// The transactional id expired and is being removed (a tombstone is written).
    Dead,
    /// An InitProducerId or a timeout fences the producer of an ongoing transaction:
    /// the epoch is bumped and the transaction aborted. Never written to the log.
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in the order of their numbers.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// Kafka's number of the state (the `TransactionStatus` byte of the log value).
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state numbered `id`, if there is one.
    pub fn from_id(id: i8) -> Option<TxnState> {
        usize::try_from(id)
            .ok()
            .and_then(|i| TxnState::ALL.get(i).copied())
    }

    /// Kafka's name of the state, as DescribeTransactions and ListTransactions show it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The states a transactional id may be in just before it enters `self` (Kafka's
    /// `validPreviousStates`).
    pub fn valid_previous_states(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            // Empty and Complete*: a transaction-version-2 abort of a transaction none
            // of whose partitions was added (KIP-890).
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteCommit, CompleteAbort],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether a transactional id in state `self` may move to `next`.
    pub fn can_transition_to(self, next: TxnState) -> bool {
        next.valid_previous_states().contains(&self)
    }
}

impl fmt::Display for TxnState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A refusal of the transaction coordinator, named as Kafka names it. The network server
/// turns it into Kafka's numeric code; in-process callers match on the variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TxnError {
    /// The request is malformed (an empty transactional id).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// This node is not (or no longer) the coordinator of the transactional id: find
    /// the coordinator again and retry.
    #[error("this node is not the transaction coordinator of the transactional id")]
    NotCoordinator,
    /// The coordinator cannot serve the transactional id now (its `__transaction_state`
    /// partition could not be made or written): retry after a backoff.
    #[error("the transaction coordinator is not available: {reason}")]
    CoordinatorNotAvailable {
        /// Why.
        reason: String,
    },
    /// The coordinator is still loading its `__transaction_state` partition: retry.
    #[error("the transaction coordinator is loading its state")]
    CoordinatorLoadInProgress,
    /// A newer instance of the producer (a higher epoch of the transactional id) fenced
    /// this one.
    #[error("producer {producer_id} epoch {epoch} is fenced: the current epoch is {current}")]
    ProducerFenced {
        /// The producer id of the request.
        producer_id: i64,
        /// The epoch of the request.
        epoch: i16,
        /// The transactional id's current epoch.
        current: i16,
    },
    /// The producer id of the request is not the one the transactional id uses (or the
    /// transactional id is unknown).
    #[error("producer id {producer_id} is not the transactional id's producer id {current}")]
    InvalidProducerIdMapping {
        /// The producer id of the request.
        producer_id: i64,
        /// The transactional id's producer id (-1 when the id is unknown).
        current: i64,
    },
    /// The operation is not allowed in the transaction's state (EndTxn(abort) after a
    /// commit was prepared, EndTxn with no transaction open, ...).
    #[error("cannot {operation} in transaction state {state}")]
    InvalidTxnState {
        /// The transaction's state.
        state: TxnState,
        /// What was asked ("commit", "abort", ...).
        operation: &'static str,
    },
    /// A previous transaction of the id is still completing (its markers are being
    /// written): retry after a backoff.
    #[error("a previous transaction of the transactional id is still completing")]
    ConcurrentTransactions,
    /// The transaction timeout is not positive or exceeds `transaction.max.timeout.ms`.
    #[error("transaction timeout {timeout_ms} ms is outside 1..={max_ms} ms")]
    InvalidTransactionTimeout {
        /// The timeout asked for.
        timeout_ms: i32,
        /// The coordinator's `transaction.max.timeout.ms`.
        max_ms: i32,
    },
    /// DescribeTransactions: the coordinator knows no such transactional id.
    #[error("transactional id not found")]
    TransactionalIdNotFound,
    /// The coordinator refused a node's request on behalf of an in-process producer for
    /// lack of an ACL of the node's principal: Write on the transactional id
    /// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Write on a topic added to the
    /// transaction (TOPIC_AUTHORIZATION_FAILED), Read on a group
    /// (GROUP_AUTHORIZATION_FAILED), ...
    #[cfg(feature = "client")]
    #[error("not authorized: the transaction coordinator answered {code} to {request}")]
    AuthorizationFailed {
        /// The request refused ("InitProducerId", "AddPartitionsToTxn of t-0", ...).
        request: String,
        /// Kafka's authorization code.
        code: super::ErrorCode,
    },
    /// KIP-890: a partition written to was not added to the transaction; the producer
    /// can abort the transaction and go on with the same transactional id.
    #[error("partition {topic}-{partition} is not part of the ongoing transaction")]
    TransactionAbortable {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
}

impl TxnError {
    /// True for refusals after which the producer retries the same request later
    /// (after finding the coordinator again for [`TxnError::NotCoordinator`]).
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            TxnError::NotCoordinator
                | TxnError::CoordinatorNotAvailable { .. }
                | TxnError::CoordinatorLoadInProgress
                | TxnError::ConcurrentTransactions
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_ids_round_trip_and_names_are_kafkas() {
        for (i, s) in TxnState::ALL.iter().enumerate() {
            assert_eq!(s.id() as usize, i);
            assert_eq!(TxnState::from_id(s.id()), Some(*s));
            assert_eq!(s.to_string(), format!("{s:?}"));
        }
        assert_eq!(TxnState::from_id(8), None);
        assert_eq!(TxnState::from_id(-1), None);
    }

    #[test]
    fn transitions_are_kafkas() {
        use TxnState::*;
        assert!(Ongoing.can_transition_to(PrepareCommit));
        assert!(PrepareEpochFence.can_transition_to(PrepareAbort));
        assert!(!PrepareCommit.can_transition_to(PrepareAbort));
        assert!(!PrepareCommit.can_transition_to(CompleteAbort));
        assert!(!Ongoing.can_transition_to(Empty));
        assert!(!Ongoing.can_transition_to(Dead));
        assert!(CompleteAbort.can_transition_to(Dead));
        // Nothing leaves Dead.
        assert!(TxnState::ALL.iter().all(|s| !Dead.can_transition_to(*s)));
    }
}
