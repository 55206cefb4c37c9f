//! Model test of the transaction coordinator's state machine ([`TxnCoordinator`]),
//! driven directly: no threads, an explicit clock. Random sequences of InitProducerId
//! (plain and KIP-360 recovery), AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (commit and
//! abort, with the producer's current or an older handle), completed markers (at the
//! current or a stale coordinator epoch), time passing (transaction timeouts and id
//! expiration) and coordinator restarts (the partition rebuilt from the records it
//! wrote, decoded from their bytes), by a client of transaction version 0 or 2
//! (KIP-890's epoch bump at every end), optionally starting near the end of its epochs.
//!
//! A small model predicts the state after every step (what Kafka allows); after every
//! step the test also checks:
//!
//! - an epoch that was fenced (by an InitProducerId or a timeout) never succeeds again
//!   in AddPartitionsToTxn or EndTxn;
//! - every transaction's partitions get exactly one marker kind, and the markers cover
//!   exactly the transaction's partitions;
//! - PrepareCommit never turns into an abort;
//! - the state rebuilt from the written records equals the live state;
//! - per producer id, epochs only go up.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use tidelog::transaction::{
    AddPartitionsRequest, EndTxnRequest, InitProducerIdAnswer, InitProducerIdRequest,
    ProducerIdAndEpoch, TransactionMetadata, TxnCoordinator, TxnError, TxnLogWrite, TxnMarkers,
    TxnOutcome, TxnResult, TxnState,
};

const ID: &str = "tx";
const MAX_TIMEOUT: i32 = 60_000;
const TIMEOUT: i32 = 1_000;
const EXPIRATION: i64 = 50_000;

#[derive(Debug, Clone)]
enum Op {
    Init { recover: bool },
    Add { stale: usize, partition: i32 },
    AddOffsets { stale: usize },
    End { commit: bool, stale: usize },
    MarkersWritten { stale_coordinator: bool },
    Advance { ms: i64 },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => any::<bool>().prop_map(|recover| Op::Init { recover }),
        4 => (0..3usize, 0..4i32).prop_map(|(stale, partition)| Op::Add { stale, partition }),
        1 => (0..3usize).prop_map(|stale| Op::AddOffsets { stale }),
        3 => (any::<bool>(), 0..3usize).prop_map(|(commit, stale)| Op::End { commit, stale }),
        3 => any::<bool>().prop_map(|stale_coordinator| Op::MarkersWritten { stale_coordinator }),
        2 => prop_oneof![Just(10i64), Just(1_500), Just(60_000)].prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Restart),
    ]
}

/// One transaction, as the test sees it.
#[derive(Default)]
struct Txn {
    partitions: BTreeSet<(String, i32)>,
    result: Option<TxnResult>,
}

struct World {
    coordinator: TxnCoordinator,
    coordinator_epoch: i32,
    /// Every record written, as bytes, in order.
    log: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    now: i64,
    next_pid: i64,
    tv: i16,
    /// The producer's handles, newest last.
    handles: Vec<ProducerIdAndEpoch>,
    /// Per producer id, the lowest epoch not fenced.
    fenced_below: BTreeMap<i64, i16>,
    /// Per producer id, the highest epoch the metadata held.
    max_epoch: BTreeMap<i64, i16>,
    /// Transactions by number; `current` is the open or completing one.
    txns: Vec<Txn>,
    current: Option<usize>,
    /// The model's prediction of the state (None: the id is unknown).
    model: Option<TxnState>,
}

impl World {
    fn new(tv: i16, near_exhaustion: bool) -> World {
        let mut w = World {
            coordinator: TxnCoordinator::new(0, MAX_TIMEOUT),
            coordinator_epoch: 0,
            log: Vec::new(),
            now: 1_000,
            next_pid: 100,
            tv,
            handles: Vec::new(),
            fenced_below: BTreeMap::new(),
            max_epoch: BTreeMap::new(),
            txns: Vec::new(),
            current: None,
            model: None,
        };
        if near_exhaustion {
            // The id's metadata, as a record, at three epochs before the end.
            let record = TxnLogWrite {
                transactional_id: ID.into(),
                value: Some(tidelog::transaction::log::TransactionLogValue {
                    producer_id: 7,
                    previous_producer_id: -1,
                    next_producer_id: -1,
                    producer_epoch: i16::MAX - 3,
                    timeout_ms: TIMEOUT,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    last_update_ms: w.now,
                    txn_start_ms: -1,
                    client_transaction_version: 0,
                }),
            };
            w.log.push((record.key_bytes(), record.value_bytes()));
            w.restart();
            w.handles.push(ProducerIdAndEpoch {
                producer_id: 7,
                epoch: i16::MAX - 3,
            });
            w.model = Some(TxnState::Empty);
        }
        w
    }

    fn meta(&self) -> Option<&TransactionMetadata> {
        self.coordinator.get(ID)
    }

    fn handle(&self, stale: usize) -> Option<ProducerIdAndEpoch> {
        let n = self.handles.len();
        (n > stale).then(|| self.handles[n - 1 - stale])
    }

    fn is_live(&self, h: ProducerIdAndEpoch) -> bool {
        self.meta()
            .is_some_and(|m| m.producer_id == h.producer_id && m.producer_epoch == h.epoch)
    }

    fn is_fenced(&self, h: ProducerIdAndEpoch) -> bool {
        self.fenced_below
            .get(&h.producer_id)
            .is_some_and(|below| h.epoch < *below)
    }

    /// Fences every epoch of the current producer id up to the metadata's (which was
    /// just bumped).
    fn fence_current(&mut self) {
        if let Some(m) = self.meta() {
            let (pid, epoch) = (m.producer_id, m.producer_epoch);
            self.fenced_below.insert(pid, epoch);
        }
    }

    fn record<A>(&mut self, outcome: &TxnOutcome<A>) {
        if let Some(w) = &outcome.write {
            self.log.push((w.key_bytes(), w.value_bytes()));
        }
        if let Some(m) = &outcome.markers {
            self.markers(m);
        }
    }

    fn markers(&mut self, m: &TxnMarkers) {
        if m.partitions.is_empty() {
            // A version-2 abort of a transaction none of whose partitions was added:
            // no partition to mark.
            assert_eq!(
                m.result,
                TxnResult::Abort,
                "an end with no partition aborts"
            );
            return;
        }
        let n = self.current.expect("markers outside a transaction");
        let txn = &mut self.txns[n];
        assert_eq!(
            m.partitions, txn.partitions,
            "markers cover the transaction's partitions"
        );
        if let Some(result) = txn.result {
            assert_eq!(result, m.result, "one marker kind per transaction");
        }
        txn.result = Some(m.result);
    }

    fn restart(&mut self) {
        self.coordinator_epoch += 1;
        let mut c = TxnCoordinator::loading(self.coordinator_epoch, MAX_TIMEOUT);
        for (k, v) in &self.log {
            c.replay(k, v.as_deref())
                .expect("the written records decode");
        }
        let resend = c.finish_loading();
        self.coordinator = c;
        for m in resend {
            assert_eq!(m.coordinator_epoch, self.coordinator_epoch);
            self.markers(&m);
        }
    }

    fn step(&mut self, op: &Op) {
        let before = self.meta().cloned();
        let state = before.as_ref().map(|m| m.state);
        assert_eq!(state, self.model, "the model's state");
        let mut next_pid = self.next_pid;
        let mut alloc = || {
            next_pid += 1;
            next_pid
        };
        match *op {
            Op::Init { recover } => {
                let expected = if recover {
                    self.handles.last().copied()
                } else {
                    None
                };
                let req = InitProducerIdRequest {
                    transactional_id: ID.into(),
                    timeout_ms: TIMEOUT,
                    expected,
                };
                let r = self
                    .coordinator
                    .init_producer_id(&req, self.now, &mut alloc);
                match (state, &r) {
                    (Some(TxnState::PrepareCommit | TxnState::PrepareAbort), r) => {
                        assert_eq!(r.as_ref().unwrap_err(), &TxnError::ConcurrentTransactions);
                    }
                    (Some(TxnState::Ongoing), Ok(o)) => {
                        assert_eq!(o.answer, InitProducerIdAnswer::Fencing);
                        self.model = Some(TxnState::PrepareAbort);
                    }
                    (_, Ok(o)) => {
                        let InitProducerIdAnswer::Ready(p) = o.answer else {
                            panic!("Ready expected in {state:?}");
                        };
                        self.model = Some(TxnState::Empty);
                        self.handles.push(p);
                    }
                    (_, Err(e)) => {
                        // Only a recovery with a handle the coordinator does not know
                        // again may fail.
                        assert!(recover, "plain InitProducerId failed: {e}");
                        assert!(matches!(e, TxnError::ProducerFenced { .. }), "{e}");
                    }
                }
                if let Ok(o) = &r {
                    let o = o.clone();
                    self.fence_current();
                    self.record(&o);
                }
            }
            Op::Add { stale, partition } => {
                self.add(stale, [(format!("t{}", partition % 2), partition)].into());
            }
            Op::AddOffsets { stale } => {
                self.add(stale, [("__consumer_offsets".to_string(), 0)].into());
            }
            Op::End { commit, stale } => {
                let Some(h) = self.handle(stale) else { return };
                let result = if commit {
                    TxnResult::Commit
                } else {
                    TxnResult::Abort
                };
                let req = EndTxnRequest {
                    transactional_id: ID.into(),
                    producer_id: h.producer_id,
                    producer_epoch: h.epoch,
                    result,
                    client_transaction_version: self.tv,
                };
                let live = self.is_live(h);
                // Transaction version 2 aborts a transaction none of whose partitions
                // was added, at the current epoch (and bumps it, as every end does).
                let empty_abort = self.tv >= 2
                    && !commit
                    && matches!(
                        state,
                        Some(TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
                    );
                let r = self.coordinator.end_txn(&req, self.now, &mut alloc);
                if let Ok(o) = &r {
                    assert!(!self.is_fenced(h), "fenced epoch {h:?} ended a transaction");
                    if o.write.is_some() {
                        assert!(live && (state == Some(TxnState::Ongoing) || empty_abort));
                        self.model = Some(if commit {
                            TxnState::PrepareCommit
                        } else {
                            TxnState::PrepareAbort
                        });
                        if self.tv >= 2 {
                            self.handles.push(o.answer);
                        }
                    } else {
                        // An idempotent retry of a completed end.
                        let done = if commit {
                            TxnState::CompleteCommit
                        } else {
                            TxnState::CompleteAbort
                        };
                        assert_eq!(state, Some(done));
                    }
                    let o = o.clone();
                    self.record(&o);
                } else if live && (state == Some(TxnState::Ongoing) || empty_abort) {
                    panic!("a live EndTxn of an ongoing transaction failed: {r:?}");
                }
            }
            Op::MarkersWritten { stale_coordinator } => {
                let epoch = self.coordinator_epoch - i32::from(stale_coordinator);
                let r = self.coordinator.markers_written(ID, epoch, self.now);
                match (state, &r) {
                    (Some(s @ (TxnState::PrepareCommit | TxnState::PrepareAbort)), Ok(o))
                        if !stale_coordinator =>
                    {
                        self.model = Some(if s == TxnState::PrepareCommit {
                            TxnState::CompleteCommit
                        } else {
                            TxnState::CompleteAbort
                        });
                        let o = o.clone();
                        self.record(&o);
                        self.current = None;
                    }
                    (_, Err(_)) => {
                        let prepared = matches!(
                            state,
                            Some(TxnState::PrepareCommit | TxnState::PrepareAbort)
                        );
                        assert!(stale_coordinator || !prepared, "{r:?}");
                    }
                    (_, Ok(_)) => panic!(
                        "markers_written succeeded in {state:?} (stale: {stale_coordinator})"
                    ),
                }
            }
            Op::Advance { ms } => {
                self.now += ms;
                let due = before.as_ref().is_some_and(|m| {
                    m.state == TxnState::Ongoing
                        && m.txn_start_ms + i64::from(m.timeout_ms) < self.now
                });
                let aborted = self.coordinator.expire_timed_out(self.now);
                assert_eq!(aborted.len(), usize::from(due));
                for o in &aborted {
                    self.fence_current();
                    self.record(o);
                    self.model = Some(TxnState::PrepareAbort);
                }
                let idle = before.as_ref().is_some_and(|m| {
                    matches!(
                        m.state,
                        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                    ) && m.last_update_ms <= self.now - EXPIRATION
                });
                let dead = self
                    .coordinator
                    .expire_transactional_ids(self.now, EXPIRATION);
                assert_eq!(dead.len(), usize::from(idle));
                for w in &dead {
                    assert_eq!(w.value, None, "expiration writes a tombstone");
                    self.log.push((w.key_bytes(), w.value_bytes()));
                    self.model = None;
                }
            }
            Op::Restart => self.restart(),
        }
        self.next_pid = next_pid;
        self.check(before.as_ref());
    }

    fn add(&mut self, stale: usize, partitions: BTreeSet<(String, i32)>) {
        let Some(h) = self.handle(stale) else { return };
        let state = self.model;
        let live = self.is_live(h);
        let req = AddPartitionsRequest {
            transactional_id: ID.into(),
            producer_id: h.producer_id,
            producer_epoch: h.epoch,
            partitions: partitions.clone(),
            client_transaction_version: self.tv,
        };
        let r = self.coordinator.add_partitions(&req, self.now);
        let allowed = live
            && matches!(
                state,
                Some(
                    TxnState::Empty
                        | TxnState::Ongoing
                        | TxnState::CompleteCommit
                        | TxnState::CompleteAbort
                )
            );
        assert_eq!(
            r.is_ok(),
            allowed,
            "AddPartitions in {state:?}, live {live}: {r:?}"
        );
        if let Ok(o) = r {
            assert!(!self.is_fenced(h), "fenced epoch {h:?} added partitions");
            if state != Some(TxnState::Ongoing) {
                self.txns.push(Txn::default());
                self.current = Some(self.txns.len() - 1);
            }
            let n = self.current.expect("an open transaction");
            self.txns[n].partitions.extend(partitions);
            self.record(&o);
            self.model = Some(TxnState::Ongoing);
        } else if let Err(e) = r
            && live
            && matches!(
                state,
                Some(TxnState::PrepareCommit | TxnState::PrepareAbort)
            )
        {
            assert_eq!(e, TxnError::ConcurrentTransactions);
        }
    }

    fn check(&self, before: Option<&TransactionMetadata>) {
        let after = self.meta();
        assert_eq!(after.map(|m| m.state), self.model, "the model's state");
        // PrepareCommit never turns into an abort.
        if before.is_some_and(|m| m.state == TxnState::PrepareCommit) {
            let s = after.map(|m| m.state);
            assert!(
                matches!(s, Some(TxnState::PrepareCommit | TxnState::CompleteCommit)),
                "PrepareCommit became {s:?}"
            );
        }
        // Epochs only go up per producer id.
        if let Some(m) = after {
            let max = self
                .max_epoch
                .get(&m.producer_id)
                .copied()
                .unwrap_or(i16::MIN);
            assert!(
                m.producer_epoch >= max,
                "epoch went down: {max} -> {}",
                m.producer_epoch
            );
        }
        // The state rebuilt from the records equals the live state.
        let mut rebuilt = TxnCoordinator::loading(self.coordinator_epoch, MAX_TIMEOUT);
        for (k, v) in &self.log {
            rebuilt
                .replay(k, v.as_deref())
                .expect("the written records decode");
        }
        let live: Vec<_> = self
            .coordinator
            .transactions()
            .map(|m| m.to_log_value())
            .collect();
        let from_log: Vec<_> = rebuilt.transactions().map(|m| m.to_log_value()).collect();
        assert_eq!(live, from_log, "state rebuilt from the log");
    }

    fn note_epochs(&mut self) {
        if let Some((pid, epoch)) = self.meta().map(|m| (m.producer_id, m.producer_epoch)) {
            let e = self.max_epoch.entry(pid).or_insert(epoch);
            *e = (*e).max(epoch);
        }
    }
}

fn run(tv: i16, near_exhaustion: bool, ops: &[Op]) {
    let mut w = World::new(tv, near_exhaustion);
    w.note_epochs();
    for op in ops {
        w.step(op);
        w.note_epochs();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn transactions_follow_the_model(
        tv in prop_oneof![Just(0i16), Just(2i16)],
        near_exhaustion in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        run(tv, near_exhaustion, &ops);
    }
}

#[test]
fn a_commit_survives_a_restart_between_prepare_and_complete() {
    use Op::*;
    for tv in [0, 2] {
        run(
            tv,
            false,
            &[
                Init { recover: false },
                Add {
                    stale: 0,
                    partition: 1,
                },
                End {
                    commit: true,
                    stale: 0,
                },
                Restart,
                MarkersWritten {
                    stale_coordinator: true,
                },
                MarkersWritten {
                    stale_coordinator: false,
                },
                End {
                    commit: true,
                    stale: 1,
                },
            ],
        );
    }
}

#[test]
fn a_timeout_fences_the_producer_across_a_restart() {
    use Op::*;
    run(
        0,
        true,
        &[
            Add {
                stale: 0,
                partition: 0,
            },
            Advance { ms: 1_500 },
            Restart,
            End {
                commit: true,
                stale: 0,
            },
            Add {
                stale: 0,
                partition: 0,
            },
            Init { recover: true },
            MarkersWritten {
                stale_coordinator: false,
            },
            Init { recover: false },
            Add {
                stale: 0,
                partition: 2,
            },
        ],
    );
}

#[test]
fn a_producer_fenced_by_a_timeout_cannot_pass_for_a_retry() {
    // Found by the model: with KIP-890's bump at every end, the fenced epoch must not
    // look like the retry of an EndTxn once the abort completed.
    use Op::*;
    run(
        2,
        false,
        &[
            Init { recover: false },
            Add {
                stale: 0,
                partition: 0,
            },
            Advance { ms: 1_500 },
            MarkersWritten {
                stale_coordinator: false,
            },
            End {
                commit: false,
                stale: 0,
            },
        ],
    );
}

#[test]
fn a_fence_that_takes_the_last_epoch_cannot_pass_for_a_retry() {
    // Found by the model: fencing at i16::MAX - 1 leaves no epoch for the abort's bump.
    use Op::*;
    run(
        2,
        true,
        &[
            Init { recover: false },
            Init { recover: false },
            Add {
                stale: 0,
                partition: 0,
            },
            Init { recover: false },
            MarkersWritten {
                stale_coordinator: false,
            },
            End {
                commit: false,
                stale: 0,
            },
            Init { recover: false },
            Add {
                stale: 0,
                partition: 1,
            },
            End {
                commit: true,
                stale: 0,
            },
        ],
    );
}

#[test]
fn the_next_producer_id_an_end_answered_can_recover() {
    // Found by the model: after EndTxn answered a new producer id (its epochs ran
    // out), InitProducerId with that id waits for the abort instead of being fenced.
    use Op::*;
    run(
        2,
        true,
        &[
            Init { recover: false },
            Init { recover: false },
            Add {
                stale: 0,
                partition: 0,
            },
            End {
                commit: false,
                stale: 0,
            },
            Init { recover: true },
            MarkersWritten {
                stale_coordinator: false,
            },
            Init { recover: true },
            Add {
                stale: 0,
                partition: 0,
            },
        ],
    );
}
