//! The transaction coordinator's state machine: every transactional id of one
//! `__transaction_state` partition and the transitions of Kafka's coordinator.
//!
//! No threads, clocks or I/O: each operation takes the request and the time `now_ms`,
//! changes the metadata and returns a [`TxnOutcome`] (the record the shell writes to
//! `__transaction_state` before it answers, the markers it sends, the answer) or a
//! [`TxnError`] (nothing changed). The shell handles one request of a transactional id
//! at a time and writes an outcome's record before it hands the coordinator the next
//! one; if the write fails, it reloads the partition ([`TxnCoordinator::replay`]), so
//! the metadata is again what the log holds.

use std::collections::{BTreeMap, BTreeSet};

use super::log::{self, TransactionLogValue};
use crate::error::{Result, TxnError, TxnState};

/// No producer id (Kafka's `RecordBatch.NO_PRODUCER_ID`).
pub const NO_PRODUCER_ID: i64 = -1;

/// No producer epoch (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// The internal topic of committed offsets, whose partition AddOffsetsToTxn adds.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's default `transaction.max.timeout.ms`: 15 minutes.
pub const DEFAULT_MAX_TIMEOUT_MS: i32 = 900_000;

/// Kafka's default `transactional.id.expiration.ms`: 7 days.
pub const DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS: i64 = 604_800_000;

/// The transaction version from which the epoch is bumped at the end of every
/// transaction (KIP-890 part 2, `transaction.version` 2).
pub const EPOCH_BUMP_TRANSACTION_VERSION: i16 = 2;

/// An epoch at which the producer id's epochs are used up: the coordinator keeps
/// `i16::MAX` for fencing, so a producer never gets an epoch above `i16::MAX - 1`.
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// A partition of a topic, as (topic, partition).
pub type TopicPartition = (String, i32);

/// The answer of [`TxnCoordinator::verify_partitions`] for each partition: fine, or
/// TRANSACTION_ABORTABLE.
pub type PartitionVerdicts = BTreeMap<TopicPartition, Result<(), TxnError>>;

/// A producer id and its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdAndEpoch {
    /// The producer id.
    pub producer_id: i64,
    /// The epoch.
    pub epoch: i16,
}

/// How a transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnResult {
    /// Commit: the COMMIT marker makes the transaction's records visible.
    Commit,
    /// Abort: the ABORT marker makes read_committed consumers skip them.
    Abort,
}

impl TxnResult {
    fn operation(self) -> &'static str {
        match self {
            TxnResult::Commit => "commit",
            TxnResult::Abort => "abort",
        }
    }
}

/// What the coordinator remembers of one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransactionMetadata {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id before the last transition that changed it (-1: none).
    pub previous_producer_id: i64,
    /// KIP-890: the producer id to move to when the current transaction completes
    /// (-1: none).
    pub next_producer_id: i64,
    /// The current producer epoch.
    pub producer_epoch: i16,
    /// The epoch before the last bump, so that a retried InitProducerId or EndTxn is
    /// recognized (-1: none; not in the log, so -1 after a reload, as in Kafka).
    pub last_producer_epoch: i16,
    /// The transaction timeout in milliseconds.
    pub timeout_ms: i32,
    /// The state.
    pub state: TxnState,
    /// The partitions of the open transaction, as (topic, partition). Offsets added with
    /// AddOffsetsToTxn show as their [`OFFSETS_TOPIC`] partition.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the transaction started (its first partition was added), or -1.
    pub txn_start_ms: i64,
    /// When the metadata last changed.
    pub last_update_ms: i64,
    /// The transaction version of the client's last request (2 and above: KIP-890's
    /// epoch bump at the end of every transaction).
    pub client_transaction_version: i16,
}

impl TransactionMetadata {
    /// Whether offsets were added to the open transaction (AddOffsetsToTxn), and of
    /// which [`OFFSETS_TOPIC`] partitions.
    pub fn offsets_partitions(&self) -> impl Iterator<Item = i32> + '_ {
        self.partitions
            .iter()
            .filter(|(t, _)| t == OFFSETS_TOPIC)
            .map(|(_, p)| *p)
    }

    /// Whether the client bumps the epoch at the end of every transaction (KIP-890).
    pub fn supports_epoch_bump(&self) -> bool {
        self.client_transaction_version >= EPOCH_BUMP_TRANSACTION_VERSION
    }

    /// The record value that stores this metadata.
    pub fn to_log_value(&self) -> TransactionLogValue {
        TransactionLogValue {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            last_update_ms: self.last_update_ms,
            txn_start_ms: self.txn_start_ms,
            client_transaction_version: self.client_transaction_version,
        }
    }

    /// The metadata a record value stores (the last epoch is not stored: -1).
    pub fn from_log_value(transactional_id: &str, value: TransactionLogValue) -> Self {
        TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id: value.producer_id,
            previous_producer_id: value.previous_producer_id,
            next_producer_id: value.next_producer_id,
            producer_epoch: value.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms: value.timeout_ms,
            state: value.state,
            partitions: value.partitions,
            txn_start_ms: value.txn_start_ms,
            last_update_ms: value.last_update_ms,
            client_transaction_version: value.client_transaction_version,
        }
    }

    fn ids(&self) -> ProducerIdAndEpoch {
        ProducerIdAndEpoch {
            producer_id: self.producer_id,
            epoch: self.producer_epoch,
        }
    }

    fn fenced(&self, epoch: i16) -> TxnError {
        TxnError::ProducerFenced {
            producer_id: self.producer_id,
            epoch,
            current: self.producer_epoch,
        }
    }

    fn invalid(&self, operation: &'static str) -> TxnError {
        TxnError::InvalidTxnState {
            state: self.state,
            operation,
        }
    }

    /// Moves to `next`, checking Kafka's table of transitions.
    fn transition(&mut self, next: TxnState, operation: &'static str) -> Result<(), TxnError> {
        if !self.state.can_transition_to(next) {
            return Err(self.invalid(operation));
        }
        self.state = next;
        Ok(())
    }

    /// Ongoing → PrepareEpochFence → PrepareAbort: bumps the epoch (fencing the
    /// producer) and aborts; with a KIP-890 client the abort bumps it once more. The
    /// markers carry the bumped epoch.
    fn fence_and_abort(&mut self, now_ms: i64) -> Result<(), TxnError> {
        if self.producer_epoch == i16::MAX {
            return Err(self.invalid("fence the producer epoch"));
        }
        self.transition(TxnState::PrepareEpochFence, "fence the producer epoch")?;
        self.producer_epoch += 1;
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
        self.transition(TxnState::PrepareAbort, "abort")?;
        // KIP-890: the abort bumps the epoch once more, as every end does, so that
        // the fenced epoch is not taken for a retry of an EndTxn (one below the
        // current epoch) once the abort completes. When the fence took the last epoch
        // (i16::MAX), the abort completes as a version-0 transaction instead, whose
        // EndTxn retries need the current epoch exactly.
        if self.supports_epoch_bump() {
            if self.producer_epoch < i16::MAX {
                self.last_producer_epoch = self.producer_epoch;
                self.producer_epoch += 1;
            } else {
                self.client_transaction_version = 0;
            }
        }
        self.last_update_ms = now_ms;
        Ok(())
    }
}

/// A record for `__transaction_state`: the metadata of a transactional id, or a
/// tombstone when it expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogWrite {
    /// The transactional id (the record's key).
    pub transactional_id: String,
    /// The value; `None` for a tombstone.
    pub value: Option<TransactionLogValue>,
}

impl TxnLogWrite {
    /// The record's key bytes.
    pub fn key_bytes(&self) -> Vec<u8> {
        log::encode_key(&self.transactional_id)
    }

    /// The record's value bytes (version [`log::VALUE_VERSION`]); `None` for a
    /// tombstone.
    pub fn value_bytes(&self) -> Option<Vec<u8>> {
        self.value
            .as_ref()
            .map(|v| log::encode_value(v, log::VALUE_VERSION))
    }
}

/// The markers the shell sends (WriteTxnMarkers) to the leaders of a transaction's
/// partitions once its Prepare record is written; when every one is written, it calls
/// [`TxnCoordinator::markers_written`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMarkers {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id the markers carry.
    pub producer_id: i64,
    /// The producer epoch the markers carry.
    pub producer_epoch: i16,
    /// The coordinator epoch (the leader epoch of the `__transaction_state` partition).
    pub coordinator_epoch: i32,
    /// COMMIT or ABORT.
    pub result: TxnResult,
    /// The partitions to write a marker to.
    pub partitions: BTreeSet<(String, i32)>,
    /// The transaction version of the markers (WriteTxnMarkers v2's
    /// `TransactionVersion`): the client's, 2 when the transaction's end bumped the
    /// epoch (KIP-890), so a leader refuses a marker not newer than the producer's
    /// epoch there.
    pub transaction_version: i8,
}

/// What an operation asks of the shell: write `write` to `__transaction_state` (before
/// answering), then send `markers`, then answer with `answer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOutcome<A> {
    /// The record to write, if the operation changed the metadata.
    pub write: Option<TxnLogWrite>,
    /// The markers to send after the write.
    pub markers: Option<TxnMarkers>,
    /// The answer to the client.
    pub answer: A,
}

/// The answer to InitProducerId.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitProducerIdAnswer {
    /// The producer id and epoch the producer uses from now on.
    Ready(ProducerIdAndEpoch),
    /// An ongoing transaction of the id was fenced and is being aborted: answer
    /// CONCURRENT_TRANSACTIONS, the producer retries and then gets a new epoch.
    Fencing,
}

/// InitProducerId with a transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The transaction timeout asked for.
    pub timeout_ms: i32,
    /// KIP-360: the producer id and epoch the producer had, when it recovers from an
    /// error rather than starting anew.
    pub expected: Option<ProducerIdAndEpoch>,
}

/// AddPartitionsToTxn (and AddOffsetsToTxn, which adds one [`OFFSETS_TOPIC`]
/// partition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The partitions to add.
    pub partitions: BTreeSet<(String, i32)>,
    /// The client's transaction version (2: KIP-890 part 2).
    pub client_transaction_version: i16,
}

/// EndTxn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxnRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// Commit or abort.
    pub result: TxnResult,
    /// The client's transaction version (EndTxn v5 and later: 2, the epoch is bumped).
    pub client_transaction_version: i16,
}

/// The coordinator of the transactional ids of one `__transaction_state` partition.
#[derive(Debug, Clone)]
pub struct TxnCoordinator {
    coordinator_epoch: i32,
    max_timeout_ms: i32,
    loading: bool,
    txns: BTreeMap<String, TransactionMetadata>,
}

impl TxnCoordinator {
    /// A coordinator with no transactional ids, ready for requests, at
    /// `coordinator_epoch` (the partition's leader epoch), allowing timeouts up to
    /// `max_timeout_ms` (`transaction.max.timeout.ms`).
    pub fn new(coordinator_epoch: i32, max_timeout_ms: i32) -> Self {
        TxnCoordinator {
            coordinator_epoch,
            max_timeout_ms,
            loading: false,
            txns: BTreeMap::new(),
        }
    }

    /// A coordinator that loads its partition: the shell [`replay`](Self::replay)s the
    /// partition's records, then calls [`finish_loading`](Self::finish_loading); until
    /// then requests get COORDINATOR_LOAD_IN_PROGRESS.
    pub fn loading(coordinator_epoch: i32, max_timeout_ms: i32) -> Self {
        TxnCoordinator {
            loading: true,
            ..TxnCoordinator::new(coordinator_epoch, max_timeout_ms)
        }
    }

    /// The coordinator epoch.
    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// The longest transaction timeout it allows (`transaction.max.timeout.ms`).
    pub fn max_timeout_ms(&self) -> i32 {
        self.max_timeout_ms
    }

    /// Whether the coordinator is still loading.
    pub fn is_loading(&self) -> bool {
        self.loading
    }

    /// Applies one record of the partition (in log order): a value replaces the
    /// transactional id's metadata, a tombstone (or a Dead value) removes it, a key of
    /// an unknown version is skipped. Refuses bad bytes with
    /// [`Error::Corrupt`](crate::Error::Corrupt).
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let Some(id) = log::decode_key(key)? else {
            return Ok(());
        };
        match value.map(log::decode_value).transpose()? {
            Some(v) if v.state != TxnState::Dead => {
                let m = TransactionMetadata::from_log_value(&id, v);
                self.txns.insert(id, m);
            }
            _ => {
                self.txns.remove(&id);
            }
        }
        Ok(())
    }

    /// Ends loading: requests are served from now on. Returns the markers of the
    /// transactions whose Prepare record was written but not their Complete one: the
    /// shell sends them again.
    pub fn finish_loading(&mut self) -> Vec<TxnMarkers> {
        self.loading = false;
        let epoch = self.coordinator_epoch;
        self.txns
            .values()
            .filter_map(|m| {
                let result = match m.state {
                    TxnState::PrepareCommit => TxnResult::Commit,
                    TxnState::PrepareAbort => TxnResult::Abort,
                    _ => return None,
                };
                Some(markers(m, result, epoch))
            })
            .collect()
    }

    /// The metadata of `transactional_id`.
    pub fn get(&self, transactional_id: &str) -> Option<&TransactionMetadata> {
        self.txns.get(transactional_id)
    }

    /// Every transactional id's metadata, by id (ListTransactions).
    pub fn transactions(&self) -> impl Iterator<Item = &TransactionMetadata> {
        self.txns.values()
    }

    /// DescribeTransactions of one id.
    pub fn describe(&self, transactional_id: &str) -> Result<&TransactionMetadata, TxnError> {
        self.ready()?;
        self.txns
            .get(transactional_id)
            .ok_or(TxnError::TransactionalIdNotFound)
    }

    fn ready(&self) -> Result<(), TxnError> {
        if self.loading {
            Err(TxnError::CoordinatorLoadInProgress)
        } else {
            Ok(())
        }
    }

    fn known(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
    ) -> Result<&mut TransactionMetadata, TxnError> {
        self.ready()?;
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id".into()));
        }
        self.txns
            .get_mut(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping {
                producer_id,
                current: NO_PRODUCER_ID,
            })
    }

    /// InitProducerId with a transactional id. A new id gets `new_producer_id()` at
    /// epoch 0; a known one a bumped epoch (a new producer id once its epochs are
    /// used up). An ongoing transaction is fenced and aborted first
    /// ([`InitProducerIdAnswer::Fencing`]); while a previous transaction completes, the
    /// answer is CONCURRENT_TRANSACTIONS. With `expected` (KIP-360), a producer that
    /// was fenced by a newer one gets PRODUCER_FENCED, and a retry of a bump that
    /// succeeded gets the same epoch again.
    pub fn init_producer_id(
        &mut self,
        request: &InitProducerIdRequest,
        now_ms: i64,
        new_producer_id: impl FnOnce() -> i64,
    ) -> Result<TxnOutcome<InitProducerIdAnswer>, TxnError> {
        self.ready()?;
        let id = &request.transactional_id;
        if id.is_empty() {
            return Err(TxnError::InvalidRequest("empty transactional id".into()));
        }
        if request.timeout_ms <= 0 || request.timeout_ms > self.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout {
                timeout_ms: request.timeout_ms,
                max_ms: self.max_timeout_ms,
            });
        }
        let epoch = self.coordinator_epoch;
        let mut new_producer_id = Some(new_producer_id);
        let mut m = match self.txns.get(id) {
            Some(m) => m.clone(),
            None => TransactionMetadata {
                transactional_id: id.clone(),
                producer_id: new_producer_id.take().map_or(NO_PRODUCER_ID, |f| f()),
                previous_producer_id: NO_PRODUCER_ID,
                next_producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                last_producer_epoch: NO_PRODUCER_EPOCH,
                timeout_ms: request.timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                txn_start_ms: -1,
                last_update_ms: now_ms,
                client_transaction_version: 0,
            },
        };
        if let Some(expected) = request.expected {
            let valid = m.producer_epoch == NO_PRODUCER_EPOCH
                || expected.producer_id == m.producer_id
                // KIP-890: the id an EndTxn answered when the epochs ran out.
                || (m.next_producer_id != NO_PRODUCER_ID && expected.producer_id == m.next_producer_id)
                || (expected.producer_id == m.previous_producer_id
                    && is_epoch_exhausted(expected.epoch));
            if !valid {
                return Err(m.fenced(expected.epoch));
            }
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(TxnError::ConcurrentTransactions);
            }
            TxnState::Ongoing => {
                m.fence_and_abort(now_ms)?;
                let markers = markers(&m, TxnResult::Abort, epoch);
                return Ok(self.commit(m, Some(markers), InitProducerIdAnswer::Fencing));
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                return Err(m.invalid("initialize the producer id"));
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {}
        }
        let old_producer_id = m.producer_id;
        let rotate = is_epoch_exhausted(m.producer_epoch)
            && request.expected.is_none_or(|e| e.epoch == m.producer_epoch);
        let (producer_id, next_epoch, last_epoch) = if rotate {
            let last = if request.expected.is_some() {
                m.producer_epoch
            } else {
                NO_PRODUCER_EPOCH
            };
            let pid = match new_producer_id.take() {
                Some(f) => f(),
                // A new id is never exhausted (its epoch is -1).
                None => return Err(m.invalid("rotate the producer id")),
            };
            (pid, 0, last)
        } else {
            match request.expected {
                None => {
                    if is_epoch_exhausted(m.producer_epoch) {
                        return Err(m.invalid("bump the producer epoch"));
                    }
                    (m.producer_id, m.producer_epoch + 1, NO_PRODUCER_EPOCH)
                }
                Some(e) if m.producer_epoch == NO_PRODUCER_EPOCH || e.epoch == m.producer_epoch => {
                    if is_epoch_exhausted(m.producer_epoch) {
                        return Err(m.fenced(e.epoch));
                    }
                    (m.producer_id, m.producer_epoch + 1, m.producer_epoch)
                }
                // A retry of a bump that succeeded: the same epoch again.
                Some(e) if e.epoch == m.last_producer_epoch => {
                    (m.producer_id, m.producer_epoch, m.last_producer_epoch)
                }
                Some(e) => return Err(m.fenced(e.epoch)),
            }
        };
        m.transition(TxnState::Empty, "initialize the producer id")?;
        m.previous_producer_id = old_producer_id;
        m.producer_id = producer_id;
        m.producer_epoch = next_epoch;
        m.last_producer_epoch = last_epoch;
        m.next_producer_id = NO_PRODUCER_ID;
        m.timeout_ms = request.timeout_ms;
        m.partitions.clear();
        m.txn_start_ms = -1;
        m.last_update_ms = now_ms;
        m.client_transaction_version = 0;
        let answer = InitProducerIdAnswer::Ready(m.ids());
        Ok(self.commit(m, None, answer))
    }

    /// AddPartitionsToTxn: Empty or Complete* → Ongoing (the transaction starts now),
    /// Ongoing adds the partitions. While a transaction completes:
    /// CONCURRENT_TRANSACTIONS; an old epoch: PRODUCER_FENCED. Partitions already in
    /// the transaction need no write.
    pub fn add_partitions(
        &mut self,
        request: &AddPartitionsRequest,
        now_ms: i64,
    ) -> Result<TxnOutcome<()>, TxnError> {
        let m = self.known(&request.transactional_id, request.producer_id)?;
        if m.producer_id != request.producer_id {
            return Err(TxnError::InvalidProducerIdMapping {
                producer_id: request.producer_id,
                current: m.producer_id,
            });
        }
        if m.producer_epoch != request.producer_epoch {
            return Err(m.fenced(request.producer_epoch));
        }
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(TxnError::ConcurrentTransactions);
            }
            TxnState::Ongoing if request.partitions.is_subset(&m.partitions) => {
                return Ok(TxnOutcome {
                    write: None,
                    markers: None,
                    answer: (),
                });
            }
            _ => {}
        }
        let mut m = m.clone();
        if matches!(
            m.state,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        ) {
            m.txn_start_ms = now_ms;
        }
        m.transition(TxnState::Ongoing, "add partitions")?;
        m.partitions.extend(request.partitions.iter().cloned());
        m.last_update_ms = now_ms;
        m.client_transaction_version = request.client_transaction_version;
        Ok(self.commit(m, None, ()))
    }

    /// AddOffsetsToTxn: adds `offsets_partition`, the [`OFFSETS_TOPIC`] partition of
    /// the consumer group whose offsets the transaction commits (the shell maps the
    /// group to it). The group coordinator holds the offsets of TxnOffsetCommit as
    /// pending until the partition's marker arrives.
    pub fn add_offsets(
        &mut self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        offsets_partition: i32,
        client_transaction_version: i16,
        now_ms: i64,
    ) -> Result<TxnOutcome<()>, TxnError> {
        let request = AddPartitionsRequest {
            transactional_id: transactional_id.to_string(),
            producer_id: producer.producer_id,
            producer_epoch: producer.epoch,
            partitions: [(OFFSETS_TOPIC.to_string(), offsets_partition)].into(),
            client_transaction_version,
        };
        self.add_partitions(&request, now_ms)
    }

    /// KIP-890 part 1 (AddPartitionsToTxn with VerifyOnly, asked by a partition
    /// leader before it appends a transactional batch): each partition is fine if it is
    /// in the ongoing transaction, TRANSACTION_ABORTABLE otherwise. Nothing changes.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer: ProducerIdAndEpoch,
        partitions: &BTreeSet<(String, i32)>,
    ) -> Result<PartitionVerdicts, TxnError> {
        self.ready()?;
        let m = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping {
                producer_id: producer.producer_id,
                current: NO_PRODUCER_ID,
            })?;
        if m.producer_id != producer.producer_id {
            return Err(TxnError::InvalidProducerIdMapping {
                producer_id: producer.producer_id,
                current: m.producer_id,
            });
        }
        if m.producer_epoch != producer.epoch {
            return Err(m.fenced(producer.epoch));
        }
        if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|(topic, partition)| {
                let ok = if m.partitions.contains(&(topic.clone(), *partition)) {
                    Ok(())
                } else {
                    Err(TxnError::TransactionAbortable {
                        topic: topic.clone(),
                        partition: *partition,
                    })
                };
                ((topic.clone(), *partition), ok)
            })
            .collect())
    }

    /// EndTxn: Ongoing → PrepareCommit or PrepareAbort, returning the markers to send.
    /// A retry of the same EndTxn is answered CONCURRENT_TRANSACTIONS while the markers
    /// are written and like the first once they are; the other result is
    /// INVALID_TXN_STATE. With a client of transaction version 2 (KIP-890 part 2) the
    /// epoch is bumped here and answered; when it runs out, the next producer id is
    /// taken from `new_producer_id()` and answered (at epoch 0), used from the
    /// completion on. Such a client may also abort at the current epoch a transaction
    /// none of whose partitions reached the coordinator (Empty, CompleteCommit or
    /// CompleteAbort): a PrepareAbort with no partition, which bumps the epoch like
    /// any other end (Kafka's table for transaction version 2); a retry of the previous
    /// end (one epoch below) is answered as before. Such an end at the current epoch
    /// while the previous transaction's markers are written is answered
    /// CONCURRENT_TRANSACTIONS, to be asked again (where Kafka fences the producer).
    pub fn end_txn(
        &mut self,
        request: &EndTxnRequest,
        now_ms: i64,
        new_producer_id: impl FnOnce() -> i64,
    ) -> Result<TxnOutcome<ProducerIdAndEpoch>, TxnError> {
        let coordinator_epoch = self.coordinator_epoch;
        let m = self.known(&request.transactional_id, request.producer_id)?;
        let epoch = request.producer_epoch;
        let v2 = m.supports_epoch_bump();
        let bump = request.client_transaction_version >= EPOCH_BUMP_TRANSACTION_VERSION;
        let retry_on_overflow = v2
            && m.previous_producer_id == request.producer_id
            && epoch == i16::MAX - 1
            && m.producer_epoch == 0;
        let retry_on_bump = v2 && i32::from(m.producer_epoch) == i32::from(epoch) + 1;
        let retry = retry_on_bump || retry_on_overflow;
        let valid_epoch = if v2 {
            match m.state {
                // At the current epoch: the next transaction's end, come while this
                // one's markers are written (answered CONCURRENT_TRANSACTIONS below).
                TxnState::PrepareCommit | TxnState::PrepareAbort => {
                    retry_on_bump || epoch == m.producer_epoch
                }
                // At the current epoch: the next transaction's end.
                TxnState::CompleteCommit | TxnState::CompleteAbort => {
                    retry || epoch == m.producer_epoch
                }
                _ => epoch == m.producer_epoch,
            }
        } else {
            epoch == m.producer_epoch
        };
        if m.producer_id != request.producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping {
                producer_id: request.producer_id,
                current: m.producer_id,
            });
        }
        if !valid_epoch {
            return Err(m.fenced(epoch));
        }
        let op = request.result.operation();
        let done = |m: &TransactionMetadata| TxnOutcome {
            write: None,
            markers: None,
            answer: m.ids(),
        };
        let prepare = match (m.state, request.result) {
            (TxnState::Ongoing, _) => true,
            // A version-2 abort of a transaction no partition of which was added.
            (TxnState::Empty, TxnResult::Abort) => bump,
            (TxnState::CompleteCommit | TxnState::CompleteAbort, TxnResult::Abort)
                if bump && !retry =>
            {
                true
            }
            (TxnState::CompleteCommit, TxnResult::Commit)
            | (TxnState::CompleteAbort, TxnResult::Abort)
                if !bump || retry =>
            {
                return Ok(done(m));
            }
            (TxnState::PrepareCommit, TxnResult::Commit)
            | (TxnState::PrepareAbort, TxnResult::Abort) => {
                return Err(TxnError::ConcurrentTransactions);
            }
            // The next transaction's end while this one completes: asked again once
            // it has (Kafka answers PRODUCER_FENCED, fencing the live producer).
            (TxnState::PrepareCommit | TxnState::PrepareAbort, _) if v2 && !retry => {
                return Err(TxnError::ConcurrentTransactions);
            }
            _ => false,
        };
        if !prepare {
            return Err(m.invalid(op));
        }
        let mut m = m.clone();
        m.next_producer_id = if bump && is_epoch_exhausted(m.producer_epoch) {
            new_producer_id()
        } else {
            NO_PRODUCER_ID
        };
        let (next, result) = match request.result {
            TxnResult::Commit => (TxnState::PrepareCommit, TxnResult::Commit),
            TxnResult::Abort => (TxnState::PrepareAbort, TxnResult::Abort),
        };
        m.transition(next, op)?;
        if bump {
            m.last_producer_epoch = m.producer_epoch;
            m.producer_epoch += 1;
        }
        m.client_transaction_version = request.client_transaction_version;
        m.last_update_ms = now_ms;
        let answer = if m.next_producer_id != NO_PRODUCER_ID {
            ProducerIdAndEpoch {
                producer_id: m.next_producer_id,
                epoch: 0,
            }
        } else {
            m.ids()
        };
        let markers = markers(&m, result, coordinator_epoch);
        Ok(self.commit(m, Some(markers), answer))
    }

    /// Every marker of the transaction was written: PrepareCommit → CompleteCommit,
    /// PrepareAbort → CompleteAbort; the partitions are cleared. With transaction
    /// version 2 and a next producer id, the id moves to it at epoch 0. A coordinator
    /// epoch other than this coordinator's: NOT_COORDINATOR (the partition moved).
    pub fn markers_written(
        &mut self,
        transactional_id: &str,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Result<TxnOutcome<()>, TxnError> {
        self.ready()?;
        if coordinator_epoch != self.coordinator_epoch {
            return Err(TxnError::NotCoordinator);
        }
        let m = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::TransactionalIdNotFound)?;
        let mut m = m.clone();
        let next = match m.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return Err(m.invalid("complete the transaction")),
        };
        m.transition(next, "complete the transaction")?;
        if m.supports_epoch_bump() {
            m.previous_producer_id = m.producer_id;
            m.last_producer_epoch = m.producer_epoch;
            if m.next_producer_id != NO_PRODUCER_ID {
                m.producer_id = m.next_producer_id;
                m.producer_epoch = 0;
            }
            m.next_producer_id = NO_PRODUCER_ID;
        }
        m.partitions.clear();
        m.last_update_ms = now_ms;
        Ok(self.commit(m, None, ()))
    }

    /// Aborts every Ongoing transaction older than its timeout (started before
    /// `now_ms - timeout`): the epoch is bumped, fencing the producer, and the
    /// transaction moves to PrepareAbort. One outcome per transaction, with its
    /// record and ABORT markers.
    pub fn expire_timed_out(&mut self, now_ms: i64) -> Vec<TxnOutcome<()>> {
        if self.loading {
            return Vec::new();
        }
        let due: Vec<String> = self
            .txns
            .values()
            .filter(|m| {
                m.state == TxnState::Ongoing
                    && m.txn_start_ms.saturating_add(i64::from(m.timeout_ms)) < now_ms
            })
            .map(|m| m.transactional_id.clone())
            .collect();
        let epoch = self.coordinator_epoch;
        let mut out = Vec::new();
        for id in due {
            let mut m = self.txns[&id].clone();
            if m.fence_and_abort(now_ms).is_ok() {
                let markers = markers(&m, TxnResult::Abort, epoch);
                out.push(self.commit(m, Some(markers), ()));
            }
        }
        out
    }

    /// Removes every transactional id in Empty, CompleteCommit or CompleteAbort whose
    /// metadata did not change for `expiration_ms` (`transactional.id.expiration.ms`):
    /// it becomes Dead and a tombstone is written for it.
    pub fn expire_transactional_ids(
        &mut self,
        now_ms: i64,
        expiration_ms: i64,
    ) -> Vec<TxnLogWrite> {
        if self.loading {
            return Vec::new();
        }
        let dead: Vec<String> = self
            .txns
            .values()
            .filter(|m| {
                m.state.can_transition_to(TxnState::Dead)
                    && m.last_update_ms <= now_ms.saturating_sub(expiration_ms)
            })
            .map(|m| m.transactional_id.clone())
            .collect();
        dead.into_iter()
            .map(|id| {
                self.txns.remove(&id);
                TxnLogWrite {
                    transactional_id: id,
                    value: None,
                }
            })
            .collect()
    }

    /// Stores `m` and returns the outcome that writes it.
    fn commit<A>(
        &mut self,
        m: TransactionMetadata,
        markers: Option<TxnMarkers>,
        answer: A,
    ) -> TxnOutcome<A> {
        let write = TxnLogWrite {
            transactional_id: m.transactional_id.clone(),
            value: Some(m.to_log_value()),
        };
        self.txns.insert(m.transactional_id.clone(), m);
        TxnOutcome {
            write: Some(write),
            markers,
            answer,
        }
    }
}

fn markers(m: &TransactionMetadata, result: TxnResult, coordinator_epoch: i32) -> TxnMarkers {
    TxnMarkers {
        transactional_id: m.transactional_id.clone(),
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        coordinator_epoch,
        result,
        partitions: m.partitions.clone(),
        transaction_version: i8::try_from(m.client_transaction_version).unwrap_or(i8::MAX),
    }
}
