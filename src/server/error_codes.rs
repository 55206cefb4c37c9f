//! Kafka's numeric error codes of the typed refusals of the layers below the server:
//! the one place they are mapped (the layers below never see a number).

use crate::coordinator::GroupError;
use crate::error::Error;

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
            GroupError::Journal(e) => match &**e {
                // A replicated journal that lost its leadership: the coordinator moved.
                Error::Closed(_) => 16,
                Error::Timeout(_) => 7,
                _ => 56,
            },
        }
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
}
