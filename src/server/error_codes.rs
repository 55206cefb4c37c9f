//! Kafka's numeric error codes of the typed refusals of the layers below the server:
//! the one place they are mapped (the layers below never see a number).

use crate::coordinator::GroupError;
use crate::error::{Error, ShareError};
use crate::transaction::TxnError;

/// A typed refusal with Kafka's numeric error code on the wire.
pub(crate) trait KafkaCode {
    /// Kafka's numeric error code.
    fn code(&self) -> i16;
}

impl KafkaCode for GroupError {
    fn code(&self) -> i16 {
        match self {
            GroupError::NotCoordinator => 16,
            GroupError::CoordinatorNotAvailable => 15,
            GroupError::InvalidGroupId(_) => 24,
            GroupError::UnknownMemberId(_) => 25,
            GroupError::MemberIdRequired { .. } => 79,
            GroupError::IllegalGeneration { .. } => 22,
            GroupError::InconsistentGroupProtocol(_) => 23,
            GroupError::InvalidSessionTimeout(_) => 26,
            GroupError::RebalanceInProgress => 27,
            GroupError::FencedInstanceId(_) => 82,
            GroupError::GroupMaxSizeReached(_) => 81,
            GroupError::NonEmptyGroup => 68,
            GroupError::GroupIdNotFound => 69,
            GroupError::GroupSubscribedToTopic(_) => 86,
            GroupError::OffsetMetadataTooLarge { .. } => 12,
            GroupError::UnknownTopicOrPartition { .. } => 3,
            GroupError::RequestTimedOut => 7,
            GroupError::UnstableOffsetCommit { .. } => 88,
            GroupError::InvalidProducerEpoch { .. } => 47,
            GroupError::InvalidProducerIdMapping { .. } => 49,
            GroupError::FencedMemberEpoch { .. } => 110,
            GroupError::UnreleasedInstanceId(_) => 111,
            GroupError::UnsupportedAssignor(_) => 112,
            GroupError::StaleMemberEpoch { .. } => 113,
            GroupError::InvalidRegularExpression { .. } => 128,
            GroupError::InvalidRequest(_) => 42,
            GroupError::Journal(e) => match &**e {
                // A replicated journal that lost its leadership: the coordinator moved.
                Error::Closed(_) => 16,
                Error::Timeout(_) => 7,
                _ => 56,
            },
        }
    }
}

impl KafkaCode for ShareError {
    fn code(&self) -> i16 {
        match self {
            ShareError::InvalidRecordState { .. } => 121,
            ShareError::UnknownMember(_) => 25,
            ShareError::FencedMemberEpoch { .. } => 110,
            // Kafka's coordinator: "group ... is not a share group" (GROUP_ID_NOT_FOUND).
            ShareError::NotShareGroup => 69,
            ShareError::InvalidRequest(_) => 42,
            ShareError::ShareSessionNotFound(_) => 122,
            ShareError::InvalidShareSessionEpoch { .. } => 123,
            ShareError::GroupMaxSizeReached(_) => 81,
            ShareError::ShareSessionLimitReached(_) => 133,
            ShareError::GroupIdNotFound => 69,
            ShareError::NonEmptyGroup(_) => 68,
            // Kafka's ShareFetch has no code of its own for a share-partition that
            // cannot start yet: NOT_LEADER_OR_FOLLOWER is the retriable one of those
            // it lists, which Kafka's share consumer answers with a metadata refresh
            // and the next fetch (its coordinator's codes are not among them, and the
            // consumer fails on a code it does not expect).
            ShareError::StartUnknown(_) => 6,
        }
    }
}

impl KafkaCode for TxnError {
    fn code(&self) -> i16 {
        match self {
            TxnError::InvalidRequest(_) => 42,
            TxnError::NotCoordinator => 16,
            TxnError::CoordinatorNotAvailable { .. } => 15,
            TxnError::CoordinatorLoadInProgress => 14,
            TxnError::ProducerFenced { .. } => 90,
            TxnError::InvalidProducerIdMapping { .. } => 49,
            TxnError::InvalidTxnState { .. } => 48,
            TxnError::ConcurrentTransactions => 51,
            TxnError::InvalidTransactionTimeout { .. } => 50,
            TxnError::TransactionalIdNotFound => 105,
            TxnError::TransactionAbortable { .. } => 120,
            TxnError::AuthorizationFailed { code, .. } => code.code(),
        }
    }
}

/// Kafka's code of a transaction refusal for a client speaking `version` of an API
/// whose versions below `fenced_since` predate PRODUCER_FENCED (those clients get
/// INVALID_PRODUCER_EPOCH) and below `abortable_since` predate TRANSACTION_ABORTABLE
/// (those get INVALID_TXN_STATE), as Kafka answers older clients.
pub(crate) fn txn_code_for(
    e: &TxnError,
    version: i16,
    fenced_since: i16,
    abortable_since: i16,
) -> i16 {
    match e {
        TxnError::ProducerFenced { .. } if version < fenced_since => 47,
        TxnError::TransactionAbortable { .. } if version < abortable_since => 48,
        other => other.code(),
    }
}

/// The code a Produce of a transactional batch gets when the coordinator's verification
/// (KIP-890 part 1) refuses it, as Kafka's partition leader answers a client of
/// Produce v8 and below: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH,
/// TRANSACTION_ABORTABLE as INVALID_TXN_STATE, and a coordinator that is busy or
/// elsewhere as the retriable NOT_ENOUGH_REPLICAS.
pub(crate) fn produce_verification_code(e: &TxnError) -> i16 {
    match e {
        TxnError::NotCoordinator
        | TxnError::CoordinatorNotAvailable { .. }
        | TxnError::CoordinatorLoadInProgress
        | TxnError::ConcurrentTransactions => 19,
        other => txn_code_for(other, 0, 1, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn codes_are_kafkas() {
        assert_eq!(GroupError::NotCoordinator.code(), 16);
        assert_eq!(GroupError::RebalanceInProgress.code(), 27);
        assert_eq!(
            GroupError::MemberIdRequired {
                member_id: "m".into()
            }
            .code(),
            79
        );
        assert_eq!(GroupError::FencedInstanceId("i".into()).code(), 82);
        let io = Error::io("append", "x", std::io::Error::other("disk"));
        assert_eq!(GroupError::Journal(Arc::new(io)).code(), 56);
    }

    #[test]
    fn share_codes_are_kafkas() {
        use kafka_protocol::ResponseError as R;
        let cases = [
            (
                ShareError::InvalidRecordState {
                    offset: 1,
                    state: None,
                    reason: "x".into(),
                },
                R::InvalidRecordState,
            ),
            (ShareError::UnknownMember("m".into()), R::UnknownMemberId),
            (
                ShareError::FencedMemberEpoch {
                    given: 1,
                    current: 2,
                },
                R::FencedMemberEpoch,
            ),
            (ShareError::NotShareGroup, R::GroupIdNotFound),
            (ShareError::InvalidRequest("x".into()), R::InvalidRequest),
            (
                ShareError::ShareSessionNotFound("m".into()),
                R::ShareSessionNotFound,
            ),
            (
                ShareError::InvalidShareSessionEpoch {
                    given: 3,
                    expected: 2,
                },
                R::InvalidShareSessionEpoch,
            ),
            (ShareError::GroupMaxSizeReached(2), R::GroupMaxSizeReached),
            (
                ShareError::ShareSessionLimitReached(2),
                R::ShareSessionLimitReached,
            ),
            (ShareError::GroupIdNotFound, R::GroupIdNotFound),
            (ShareError::NonEmptyGroup(1), R::NonEmptyGroup),
            (ShareError::StartUnknown("x".into()), R::NotLeaderOrFollower),
        ];
        for (error, kafka) in cases {
            assert_eq!(error.code(), kafka.code(), "{error:?}");
        }
        let e = Error::Share {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            source: ShareError::UnknownMember("m".into()),
        };
        assert_eq!(crate::server::api::error_code(&e), 25);
    }

    #[test]
    fn consumer_protocol_codes_are_kafkas() {
        use kafka_protocol::ResponseError as R;
        let cases = [
            (
                GroupError::FencedMemberEpoch {
                    given: 3,
                    current: 2,
                },
                R::FencedMemberEpoch,
            ),
            (
                GroupError::StaleMemberEpoch {
                    given: 1,
                    current: 2,
                },
                R::StaleMemberEpoch,
            ),
            (
                GroupError::UnreleasedInstanceId("i".into()),
                R::UnreleasedInstanceId,
            ),
            (
                GroupError::UnsupportedAssignor("x".into()),
                R::UnsupportedAssignor,
            ),
            (
                GroupError::InvalidRegularExpression {
                    regex: "(".into(),
                    reason: "unclosed".into(),
                },
                R::InvalidRegularExpression,
            ),
            (GroupError::InvalidRequest("x".into()), R::InvalidRequest),
        ];
        for (error, kafka) in cases {
            assert_eq!(error.code(), kafka.code(), "{error:?}");
        }
    }

    #[test]
    fn transaction_codes_are_kafkas() {
        use crate::transaction::TxnState;
        use kafka_protocol::ResponseError as R;
        let cases = [
            (TxnError::InvalidRequest("empty".into()), R::InvalidRequest),
            (
                TxnError::AuthorizationFailed {
                    request: "InitProducerId".into(),
                    code: crate::error::ErrorCode::from_code(53),
                },
                R::TransactionalIdAuthorizationFailed,
            ),
            (TxnError::NotCoordinator, R::NotCoordinator),
            (
                TxnError::CoordinatorLoadInProgress,
                R::CoordinatorLoadInProgress,
            ),
            (
                TxnError::CoordinatorNotAvailable {
                    reason: "disk".into(),
                },
                R::CoordinatorNotAvailable,
            ),
            (
                TxnError::ProducerFenced {
                    producer_id: 1,
                    epoch: 0,
                    current: 1,
                },
                R::ProducerFenced,
            ),
            (
                TxnError::InvalidProducerIdMapping {
                    producer_id: 1,
                    current: 2,
                },
                R::InvalidProducerIdMapping,
            ),
            (
                TxnError::InvalidTxnState {
                    state: TxnState::Empty,
                    operation: "commit",
                },
                R::InvalidTxnState,
            ),
            (TxnError::ConcurrentTransactions, R::ConcurrentTransactions),
            (
                TxnError::InvalidTransactionTimeout {
                    timeout_ms: 0,
                    max_ms: 900_000,
                },
                R::InvalidTransactionTimeout,
            ),
            (
                TxnError::TransactionalIdNotFound,
                R::TransactionalIdNotFound,
            ),
            (
                TxnError::TransactionAbortable {
                    topic: "t".into(),
                    partition: 0,
                },
                R::TransactionAbortable,
            ),
        ];
        for (error, kafka) in cases {
            assert_eq!(error.code(), kafka.code(), "{error:?}");
        }
        assert_eq!(
            TxnError::ProducerFenced {
                producer_id: 1,
                epoch: 0,
                current: 1
            }
            .code(),
            90
        );
        assert_eq!(
            TxnError::TransactionAbortable {
                topic: "t".into(),
                partition: 0
            }
            .code(),
            120
        );
    }

    #[test]
    fn older_clients_get_the_codes_they_know() {
        let fenced = TxnError::ProducerFenced {
            producer_id: 1,
            epoch: 0,
            current: 1,
        };
        assert_eq!(txn_code_for(&fenced, 3, 4, 5), 47);
        assert_eq!(txn_code_for(&fenced, 4, 4, 5), 90);
        let abortable = TxnError::TransactionAbortable {
            topic: "t".into(),
            partition: 0,
        };
        assert_eq!(txn_code_for(&abortable, 4, 4, 5), 48);
        assert_eq!(txn_code_for(&abortable, 5, 4, 5), 120);
        assert_eq!(produce_verification_code(&abortable), 48);
        assert_eq!(produce_verification_code(&fenced), 47);
        assert_eq!(
            produce_verification_code(&TxnError::ConcurrentTransactions),
            19
        );
    }

    #[test]
    fn a_transaction_error_reaches_the_wire_with_its_code() {
        let e = Error::Transaction {
            transactional_id: "t".into(),
            source: crate::error::TxnError::ProducerFenced {
                producer_id: 7,
                epoch: 1,
                current: 2,
            },
        };
        assert_eq!(crate::server::api::error_code(&e), 90);
    }
}
