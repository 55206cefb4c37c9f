//! Unit tests of the transaction coordinator's transitions.

use super::*;
use std::collections::BTreeSet;

const ID: &str = "tx";

fn init(
    c: &mut TxnCoordinator,
    now: i64,
    pid: i64,
) -> Result<TxnOutcome<InitProducerIdAnswer>, TxnError> {
    let req = InitProducerIdRequest {
        transactional_id: ID.into(),
        timeout_ms: 1_000,
        expected: None,
    };
    c.init_producer_id(&req, now, || pid)
}

fn ready(o: TxnOutcome<InitProducerIdAnswer>) -> ProducerIdAndEpoch {
    match o.answer {
        InitProducerIdAnswer::Ready(p) => p,
        InitProducerIdAnswer::Fencing => panic!("expected Ready, got Fencing"),
    }
}

fn parts(ps: &[(&str, i32)]) -> BTreeSet<(String, i32)> {
    ps.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

fn add(
    c: &mut TxnCoordinator,
    p: ProducerIdAndEpoch,
    ps: &[(&str, i32)],
    tv: i16,
) -> Result<TxnOutcome<()>, TxnError> {
    let req = AddPartitionsRequest {
        transactional_id: ID.into(),
        producer_id: p.producer_id,
        producer_epoch: p.epoch,
        partitions: parts(ps),
        client_transaction_version: tv,
    };
    c.add_partitions(&req, 10)
}

fn end(
    c: &mut TxnCoordinator,
    p: ProducerIdAndEpoch,
    result: TxnResult,
    tv: i16,
) -> Result<TxnOutcome<ProducerIdAndEpoch>, TxnError> {
    let req = EndTxnRequest {
        transactional_id: ID.into(),
        producer_id: p.producer_id,
        producer_epoch: p.epoch,
        result,
        client_transaction_version: tv,
    };
    c.end_txn(&req, 20, || 99)
}

#[test]
fn offsets_topic_is_the_brokers() {
    assert_eq!(OFFSETS_TOPIC, crate::OFFSETS_TOPIC);
}

#[test]
fn a_new_id_gets_epoch_zero_and_a_record() {
    let mut c = TxnCoordinator::new(3, DEFAULT_MAX_TIMEOUT_MS);
    let o = init(&mut c, 5, 42).unwrap();
    let w = o.write.clone().expect("a record");
    assert_eq!(
        ready(o),
        ProducerIdAndEpoch {
            producer_id: 42,
            epoch: 0
        }
    );
    let v = w.value.unwrap();
    assert_eq!(
        (v.state, v.producer_id, v.producer_epoch, v.timeout_ms),
        (TxnState::Empty, 42, 0, 1_000)
    );
    // Again: the epoch is bumped, the producer id kept.
    assert_eq!(
        ready(init(&mut c, 6, 43).unwrap()),
        ProducerIdAndEpoch {
            producer_id: 42,
            epoch: 1
        }
    );
}

#[test]
fn bad_timeouts_and_ids_are_refused() {
    let mut c = TxnCoordinator::new(0, 10_000);
    for timeout_ms in [0, -1, 10_001] {
        let req = InitProducerIdRequest {
            transactional_id: ID.into(),
            timeout_ms,
            expected: None,
        };
        assert_eq!(
            c.init_producer_id(&req, 0, || 1).unwrap_err(),
            TxnError::InvalidTransactionTimeout {
                timeout_ms,
                max_ms: 10_000
            }
        );
    }
    let req = InitProducerIdRequest {
        transactional_id: String::new(),
        timeout_ms: 1,
        expected: None,
    };
    assert!(matches!(
        c.init_producer_id(&req, 0, || 1),
        Err(TxnError::InvalidRequest(_))
    ));
    assert!(c.get(ID).is_none(), "refusals change nothing");
}

#[test]
fn commit_goes_through_prepare_and_complete() {
    let mut c = TxnCoordinator::new(7, DEFAULT_MAX_TIMEOUT_MS);
    let p = ready(init(&mut c, 0, 1).unwrap());
    let o = add(&mut c, p, &[("a", 0), ("b", 1)], 0).unwrap();
    assert!(o.write.is_some());
    assert_eq!(c.get(ID).unwrap().state, TxnState::Ongoing);
    assert_eq!(c.get(ID).unwrap().txn_start_ms, 10);
    // Adding a partition already in the transaction writes nothing.
    assert!(add(&mut c, p, &[("a", 0)], 0).unwrap().write.is_none());
    let o = c.add_offsets(ID, p, 4, 0, 11).unwrap();
    assert!(o.write.is_some());
    assert_eq!(
        c.get(ID).unwrap().offsets_partitions().collect::<Vec<_>>(),
        [4]
    );

    let o = end(&mut c, p, TxnResult::Commit, 0).unwrap();
    assert_eq!(o.answer, p, "transaction version 0: no bump");
    let m = o.markers.unwrap();
    assert_eq!(
        (
            m.result,
            m.producer_id,
            m.producer_epoch,
            m.coordinator_epoch
        ),
        (TxnResult::Commit, 1, 0, 7)
    );
    assert_eq!(
        m.partitions,
        parts(&[("__consumer_offsets", 4), ("a", 0), ("b", 1)])
    );
    assert_eq!(c.get(ID).unwrap().state, TxnState::PrepareCommit);

    // Retries: the same result waits, the other is refused, adds wait.
    assert_eq!(
        end(&mut c, p, TxnResult::Commit, 0).unwrap_err(),
        TxnError::ConcurrentTransactions
    );
    assert!(matches!(
        end(&mut c, p, TxnResult::Abort, 0),
        Err(TxnError::InvalidTxnState {
            state: TxnState::PrepareCommit,
            ..
        })
    ));
    assert_eq!(
        add(&mut c, p, &[("c", 0)], 0).unwrap_err(),
        TxnError::ConcurrentTransactions
    );
    assert_eq!(
        init(&mut c, 30, 2).unwrap_err(),
        TxnError::ConcurrentTransactions
    );

    assert_eq!(
        c.markers_written(ID, 6, 30).unwrap_err(),
        TxnError::NotCoordinator
    );
    c.markers_written(ID, 7, 30).unwrap();
    let m = c.get(ID).unwrap();
    assert_eq!(m.state, TxnState::CompleteCommit);
    assert!(m.partitions.is_empty());
    // A retry after completion answers like the first.
    let o = end(&mut c, p, TxnResult::Commit, 0).unwrap();
    assert!(o.write.is_none() && o.markers.is_none());
    assert!(matches!(
        end(&mut c, p, TxnResult::Abort, 0),
        Err(TxnError::InvalidTxnState { .. })
    ));
    // The next transaction starts from CompleteCommit.
    add(&mut c, p, &[("c", 0)], 0).unwrap();
    assert_eq!(c.get(ID).unwrap().partitions, parts(&[("c", 0)]));
}

#[test]
fn end_without_a_transaction_and_stale_producers_are_refused() {
    let mut c = TxnCoordinator::new(0, DEFAULT_MAX_TIMEOUT_MS);
    let p = ready(init(&mut c, 0, 1).unwrap());
    assert!(matches!(
        end(&mut c, p, TxnResult::Commit, 0),
        Err(TxnError::InvalidTxnState {
            state: TxnState::Empty,
            ..
        })
    ));
    let newer = ready(init(&mut c, 1, 1).unwrap());
    assert_eq!(
        add(&mut c, p, &[("a", 0)], 0).unwrap_err(),
        TxnError::ProducerFenced {
            producer_id: 1,
            epoch: 0,
            current: 1
        }
    );
    let other = ProducerIdAndEpoch {
        producer_id: 5,
        epoch: newer.epoch,
    };
    assert!(matches!(
        add(&mut c, other, &[("a", 0)], 0),
        Err(TxnError::InvalidProducerIdMapping {
            producer_id: 5,
            current: 1
        })
    ));
    let mut unknown = c.clone();
    unknown.expire_transactional_ids(i64::MAX, 0);
    assert!(matches!(
        add(&mut unknown, newer, &[("a", 0)], 0),
        Err(TxnError::InvalidProducerIdMapping { current: -1, .. })
    ));
}

#[test]
fn init_fences_an_ongoing_transaction() {
    let mut c = TxnCoordinator::new(2, DEFAULT_MAX_TIMEOUT_MS);
    let p = ready(init(&mut c, 0, 1).unwrap());
    add(&mut c, p, &[("a", 0)], 0).unwrap();
    let o = init(&mut c, 5, 9).unwrap();
    assert_eq!(o.answer, InitProducerIdAnswer::Fencing);
    let m = o.markers.unwrap();
    assert_eq!((m.result, m.producer_epoch), (TxnResult::Abort, 1));
    assert_eq!(
        o.write.unwrap().value.unwrap().state,
        TxnState::PrepareAbort
    );
    // The old producer is fenced at once; the new one waits for the abort.
    assert!(matches!(
        add(&mut c, p, &[("a", 0)], 0),
        Err(TxnError::ProducerFenced { .. })
    ));
    assert_eq!(
        init(&mut c, 6, 9).unwrap_err(),
        TxnError::ConcurrentTransactions
    );
    c.markers_written(ID, 2, 7).unwrap();
    assert_eq!(c.get(ID).unwrap().state, TxnState::CompleteAbort);
    assert_eq!(
        ready(init(&mut c, 8, 9).unwrap()),
        ProducerIdAndEpoch {
            producer_id: 1,
            epoch: 2
        }
    );
}

#[test]
fn timeouts_abort_and_fence() {
    let mut c = TxnCoordinator::new(0, DEFAULT_MAX_TIMEOUT_MS);
    let p = ready(init(&mut c, 0, 1).unwrap());
    add(&mut c, p, &[("a", 0)], 0).unwrap(); // starts at 10, timeout 1000
    assert!(
        c.expire_timed_out(1_010).is_empty(),
        "not past the timeout yet"
    );
    let out = c.expire_timed_out(1_011);
    assert_eq!(out.len(), 1);
    let m = out[0].markers.clone().unwrap();
    assert_eq!((m.result, m.producer_epoch), (TxnResult::Abort, 1));
    assert_eq!(c.get(ID).unwrap().state, TxnState::PrepareAbort);
    assert!(matches!(
        end(&mut c, p, TxnResult::Commit, 0),
        Err(TxnError::ProducerFenced { .. })
    ));
    assert!(
        c.expire_timed_out(10_000).is_empty(),
        "only Ongoing transactions time out"
    );
}

#[test]
fn idle_ids_expire_with_a_tombstone() {
    let mut c = TxnCoordinator::new(0, DEFAULT_MAX_TIMEOUT_MS);
    let p = ready(init(&mut c, 100, 1).unwrap());
    add(&mut c, p, &[("a", 0)], 0).unwrap();
    assert!(
        c.expire_transactional_ids(1_000_000, 10).is_empty(),
        "Ongoing ids never expire"
    );
    end(&mut c, p, TxnResult::Abort, 0).unwrap();
    c.markers_written(ID, 0, 500).unwrap();
    assert!(c.expire_transactional_ids(509, 10).is_empty());
    let w = c.expire_transactional_ids(510, 10);
    assert_eq!(
        w,
        [TxnLogWrite {
            transactional_id: ID.into(),
            value: None
        }]
    );
    assert_eq!(w[0].value_bytes(), None);
    assert!(c.get(ID).is_none());
    assert_eq!(
        c.describe(ID).unwrap_err(),
        TxnError::TransactionalIdNotFound
    );
}

#[test]
fn kip_890_bumps_the_epoch_at_every_end() {
    let mut c = TxnCoordinator::new(0, DEFAULT_MAX_TIMEOUT_MS);
    let p = ready(init(&mut c, 0, 1).unwrap());
    add(&mut c, p, &[("a", 0)], 2).unwrap();
    let o = end(&mut c, p, TxnResult::Commit, 2).unwrap();
    let bumped = ProducerIdAndEpoch {
        producer_id: 1,
        epoch: 1,
    };
    assert_eq!(o.answer, bumped);
    assert_eq!(
        o.markers.unwrap().producer_epoch,
        1,
        "markers carry the bumped epoch"
    );
    // The retry (with the old epoch) waits, then succeeds.
    assert_eq!(
        end(&mut c, p, TxnResult::Commit, 2).unwrap_err(),
        TxnError::ConcurrentTransactions
    );
    c.markers_written(ID, 0, 30).unwrap();
    assert_eq!(end(&mut c, p, TxnResult::Commit, 2).unwrap().answer, bumped);
    // The old epoch can start no transaction; the bumped one can.
    assert!(matches!(
        add(&mut c, p, &[("a", 0)], 2),
        Err(TxnError::ProducerFenced { .. })
    ));
    add(&mut c, bumped, &[("a", 0)], 2).unwrap();
    // With the bumped epoch, an EndTxn at the old one is fenced.
    assert!(matches!(
        end(&mut c, p, TxnResult::Commit, 2),
        Err(TxnError::ProducerFenced { .. })
    ));
}

#[test]
fn kip_890_aborts_a_transaction_no_partition_of_which_was_added() {
    let mut c = TxnCoordinator::new(0, DEFAULT_MAX_TIMEOUT_MS);
    let at = |epoch| ProducerIdAndEpoch {
        producer_id: 1,
        epoch,
    };
    let p = ready(init(&mut c, 0, 1).unwrap());
    // Empty: a commit is refused, an abort bumps the epoch with no partition to mark.
    assert!(matches!(
        end(&mut c, p, TxnResult::Commit, 2),
        Err(TxnError::InvalidTxnState { .. })
    ));
    let o = end(&mut c, p, TxnResult::Abort, 2).unwrap();
    assert_eq!(o.answer, at(1));
    assert!(o.write.is_some(), "PrepareAbort is recorded");
    assert!(o.markers.unwrap().partitions.is_empty());
    assert_eq!(c.get(ID).unwrap().state, TxnState::PrepareAbort);
    c.markers_written(ID, 0, 30).unwrap();
    assert_eq!(c.get(ID).unwrap().state, TxnState::CompleteAbort);
    // CompleteAbort: the retry (the old epoch) is answered as before; an abort at the
    // current epoch ends the next, empty transaction; a commit is refused either way.
    assert_eq!(end(&mut c, p, TxnResult::Abort, 2).unwrap().answer, at(1));
    assert!(matches!(
        end(&mut c, at(1), TxnResult::Commit, 2),
        Err(TxnError::InvalidTxnState { .. })
    ));
    assert_eq!(
        end(&mut c, at(1), TxnResult::Abort, 2).unwrap().answer,
        at(2)
    );
    c.markers_written(ID, 0, 40).unwrap();
    // CompleteCommit: a commit at the current epoch is refused; an abort ends the next
    // transaction, and so does it while the commit's markers are still written, once
    // they are (asked again meanwhile, not fenced).
    add(&mut c, at(2), &[("a", 0)], 2).unwrap();
    assert_eq!(
        end(&mut c, at(2), TxnResult::Commit, 2).unwrap().answer,
        at(3)
    );
    assert_eq!(
        end(&mut c, at(3), TxnResult::Abort, 2).unwrap_err(),
        TxnError::ConcurrentTransactions
    );
    c.markers_written(ID, 0, 50).unwrap();
    assert!(matches!(
        end(&mut c, at(3), TxnResult::Commit, 2),
        Err(TxnError::InvalidTxnState { .. })
    ));
    assert!(matches!(
        end(&mut c, at(2), TxnResult::Abort, 2),
        Err(TxnError::InvalidTxnState { .. })
    ));
    let o = end(&mut c, at(3), TxnResult::Abort, 2).unwrap();
    assert_eq!(o.answer, at(4));
    assert_eq!(o.markers.unwrap().result, TxnResult::Abort);
    // Its retry is answered; an epoch lower still is fenced.
    c.markers_written(ID, 0, 60).unwrap();
    assert_eq!(
        end(&mut c, at(3), TxnResult::Abort, 2).unwrap().answer,
        at(4)
    );
    assert!(matches!(
        end(&mut c, at(1), TxnResult::Abort, 2),
        Err(TxnError::ProducerFenced { .. })
    ));
}

#[test]
fn exhausted_epochs_move_to_a_new_producer_id() {
    let mut c = TxnCoordinator::new(0, DEFAULT_MAX_TIMEOUT_MS);
    ready(init(&mut c, 0, 1).unwrap());
    // Load metadata at the last usable epoch.
    let mut m = c.get(ID).unwrap().clone();
    m.producer_epoch = i16::MAX - 1;
    let w = TxnLogWrite {
        transactional_id: ID.into(),
        value: Some(m.to_log_value()),
    };
    let mut c2 = TxnCoordinator::loading(0, DEFAULT_MAX_TIMEOUT_MS);
    assert_eq!(
        init(&mut c2, 0, 5).unwrap_err(),
        TxnError::CoordinatorLoadInProgress
    );
    c2.replay(&w.key_bytes(), w.value_bytes().as_deref())
        .unwrap();
    assert!(c2.finish_loading().is_empty());
    // InitProducerId: a new producer id at epoch 0.
    let mut c_init = c2.clone();
    assert_eq!(
        ready(init(&mut c_init, 1, 5).unwrap()),
        ProducerIdAndEpoch {
            producer_id: 5,
            epoch: 0
        }
    );
    assert_eq!(c_init.get(ID).unwrap().previous_producer_id, 1);
    // KIP-890: EndTxn answers the next producer id, used from the completion on.
    let p = ProducerIdAndEpoch {
        producer_id: 1,
        epoch: i16::MAX - 1,
    };
    add(&mut c2, p, &[("a", 0)], 2).unwrap();
    let o = end(&mut c2, p, TxnResult::Abort, 2).unwrap();
    assert_eq!(
        o.answer,
        ProducerIdAndEpoch {
            producer_id: 99,
            epoch: 0
        }
    );
    assert_eq!(o.markers.unwrap().producer_epoch, i16::MAX);
    c2.markers_written(ID, 0, 40).unwrap();
    let m = c2.get(ID).unwrap();
    assert_eq!(
        (m.producer_id, m.producer_epoch, m.previous_producer_id),
        (99, 0, 1)
    );
    // A retry of the EndTxn with the old producer id is answered, not fenced.
    assert_eq!(
        end(&mut c2, p, TxnResult::Abort, 2).unwrap().answer,
        ProducerIdAndEpoch {
            producer_id: 99,
            epoch: 0
        }
    );
}

#[test]
fn kip_360_recovery_and_retries() {
    let mut c = TxnCoordinator::new(0, DEFAULT_MAX_TIMEOUT_MS);
    let p0 = ready(init(&mut c, 0, 1).unwrap());
    let recover = |c: &mut TxnCoordinator, e: ProducerIdAndEpoch| {
        let req = InitProducerIdRequest {
            transactional_id: ID.into(),
            timeout_ms: 1_000,
            expected: Some(e),
        };
        c.init_producer_id(&req, 1, || 7)
    };
    let p1 = ready(recover(&mut c, p0).unwrap());
    assert_eq!(
        p1,
        ProducerIdAndEpoch {
            producer_id: 1,
            epoch: 1
        }
    );
    // The response was lost: the retry with the same expected epoch gets the same.
    assert_eq!(ready(recover(&mut c, p0).unwrap()), p1);
    // Another producer id or an older epoch is fenced.
    assert!(matches!(
        recover(
            &mut c,
            ProducerIdAndEpoch {
                producer_id: 3,
                epoch: 1
            }
        ),
        Err(TxnError::ProducerFenced { .. })
    ));
    let p2 = ready(init(&mut c, 2, 7).unwrap());
    assert!(matches!(
        recover(&mut c, p0),
        Err(TxnError::ProducerFenced { .. })
    ));
    assert_eq!(ready(recover(&mut c, p2).unwrap()).epoch, 3);
}

#[test]
fn loading_rebuilds_the_state_and_resends_markers() {
    let mut c = TxnCoordinator::new(4, DEFAULT_MAX_TIMEOUT_MS);
    let mut log = Vec::new();
    let mut keep = |w: Option<TxnLogWrite>| {
        if let Some(w) = w {
            log.push((w.key_bytes(), w.value_bytes()));
        }
    };
    let p = ready({
        let o = init(&mut c, 0, 1).unwrap();
        keep(o.write.clone());
        o
    });
    keep(add(&mut c, p, &[("a", 0)], 0).unwrap().write);
    keep(end(&mut c, p, TxnResult::Commit, 0).unwrap().write);
    let mut again = TxnCoordinator::loading(5, DEFAULT_MAX_TIMEOUT_MS);
    for (k, v) in &log {
        again.replay(k, v.as_deref()).unwrap();
    }
    let markers = again.finish_loading();
    assert_eq!(markers.len(), 1);
    assert_eq!(
        (markers[0].result, markers[0].coordinator_epoch),
        (TxnResult::Commit, 5)
    );
    assert_eq!(
        again.get(ID).unwrap().to_log_value(),
        c.get(ID).unwrap().to_log_value()
    );
    assert!(
        again.replay(&[0, 0, 0, 9], None).is_err(),
        "a truncated key is refused"
    );
}

#[test]
fn verify_only_names_partitions_outside_the_transaction() {
    let mut c = TxnCoordinator::new(0, DEFAULT_MAX_TIMEOUT_MS);
    let p = ready(init(&mut c, 0, 1).unwrap());
    add(&mut c, p, &[("a", 0)], 0).unwrap();
    let r = c
        .verify_partitions(ID, p, &parts(&[("a", 0), ("b", 0)]))
        .unwrap();
    assert_eq!(r[&("a".to_string(), 0)], Ok(()));
    assert_eq!(
        r[&("b".to_string(), 0)],
        Err(TxnError::TransactionAbortable {
            topic: "b".into(),
            partition: 0
        })
    );
    let stale = ProducerIdAndEpoch {
        producer_id: 1,
        epoch: 5,
    };
    assert!(matches!(
        c.verify_partitions(ID, stale, &parts(&[("a", 0)])),
        Err(TxnError::ProducerFenced { .. })
    ));
}
