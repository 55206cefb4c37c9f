//! Retiring a broker (Kafka's UnregisterBroker), as applied to the image: the broker's
//! registration and directory id are removed, so it is listed nowhere and its id may be
//! taken by a new node. Refused while the broker is unfenced (a running node would
//! register again at once: stop it first) or still holds a replica, of a partition's
//! replica set or of a reassignment in progress (drain it first: move its replicas
//! away with reassignments).

use super::{Applied, MetadataImage, Outcome, Rejected, pname};

impl MetadataImage {
    /// The partitions (`topic-partition`, sorted) of which `broker` holds a replica,
    /// counting reassignments in progress.
    pub(crate) fn replicas_of(&self, broker: i32) -> Vec<String> {
        self.topics
            .values()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .enumerate()
                    .filter(move |(_, p)| p.hosts(broker))
                    .map(|(i, _)| pname(&t.name, i))
            })
            .collect()
    }

    /// `UnregisterBroker`: removes the broker's registration and directory id.
    pub(super) fn unregister_broker(&mut self, broker_id: i32) -> Outcome {
        let refused = |reason: String| {
            Err(Rejected::StaleBroker {
                broker: broker_id,
                reason,
            })
        };
        let Some(b) = self.brokers.get(&broker_id) else {
            return refused("it is not registered".into());
        };
        if !b.fenced {
            return refused(
                "it is running (unfenced): stop it first, or it registers again".into(),
            );
        }
        let held = self.replicas_of(broker_id);
        if let Some(first) = held.first() {
            return refused(format!(
                "it still holds {} replica(s) ({first}, ...): drain it first",
                held.len()
            ));
        }
        self.brokers.remove(&broker_id);
        self.directories.remove(&broker_id);
        Ok(Applied::Done)
    }
}
