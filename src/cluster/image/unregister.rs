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
        self.partitions_where(|p| p.hosts(broker))
            .map(|(topic, i, _)| pname(topic, i as usize))
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

#[cfg(test)]
mod tests {
    use super::super::*;

    fn apply(img: &mut MetadataImage, record: MetadataRecord) -> Outcome {
        let at = img.index + 1;
        img.apply(at, &record)
    }

    fn unregister(img: &mut MetadataImage, broker_id: i32) -> Outcome {
        apply(img, MetadataRecord::UnregisterBroker { broker_id })
    }

    /// The reason of a `StaleBroker` rejection.
    fn reason(o: Outcome) -> String {
        match o {
            Err(Rejected::StaleBroker { reason, .. }) => reason,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn only_a_fenced_broker_holding_no_replica_is_unregistered() {
        let mut img = MetadataImage::default();
        for id in 1..=4 {
            let r = MetadataRecord::RegisterBroker {
                broker_id: id,
                incarnation: id as u64,
                listener: format!("h:{id}"),
                clean_shutdown_epoch: None,
                replication_listener: None,
                endpoints: vec![],
                rack: None,
                features: vec![],
            };
            apply(&mut img, r).unwrap();
            let broker_epoch = img.brokers[&id].epoch;
            apply(
                &mut img,
                MetadataRecord::BrokerReady {
                    broker_id: id,
                    broker_epoch,
                },
            )
            .unwrap();
        }
        img.directories.insert(4, "dir-4".into());
        let create = MetadataRecord::CreateTopic(CreateTopic {
            name: "t".into(),
            topic_id: [1; 16],
            partitions: -1,
            replication_factor: -1,
            assignment: Some(vec![vec![1, 2, 3]]),
            configs: vec![],
            internal: false,
        });
        apply(&mut img, create).unwrap();
        let t0 = PartitionRef {
            topic: "t".into(),
            topic_id: [1; 16],
            partition: 0,
        };
        // Node 4 joins t-0 through a move in progress.
        let target = Some(vec![4, 1, 2]);
        apply(
            &mut img,
            MetadataRecord::AlterPartitionReassignment {
                partition: t0.clone(),
                target,
            },
        )
        .unwrap();
        assert_eq!(img.replicas_of(4), vec!["t-0".to_string()]);
        assert!(reason(unregister(&mut img, 4)).contains("running"));
        let broker_epoch = img.brokers[&4].epoch;
        apply(
            &mut img,
            MetadataRecord::FenceBroker {
                broker_id: 4,
                broker_epoch,
            },
        )
        .unwrap();
        let before = img.clone();
        assert!(reason(unregister(&mut img, 4)).contains("t-0"));
        assert_eq!(img.brokers, before.brokers, "a refusal changes nothing");
        // Cancelled: node 4 holds nothing and goes, with its directory id.
        apply(
            &mut img,
            MetadataRecord::AlterPartitionReassignment {
                partition: t0,
                target: None,
            },
        )
        .unwrap();
        assert!(img.replicas_of(4).is_empty());
        unregister(&mut img, 4).unwrap();
        assert!(!img.brokers.contains_key(&4));
        assert!(!img.directories.contains_key(&4));
        assert!(reason(unregister(&mut img, 4)).contains("not registered"));
    }
}
