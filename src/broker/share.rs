//! The broker's side of share groups (KIP-932): its share coordinator, and the internal
//! topic `__share_group_state` made on first use (as Kafka does).

use super::{Broker, BrokerBuilder};
use crate::config::{ShareConfig, TopicConfig};
use crate::coordinator::{SHARE_GROUP_STATE_TOPIC, ShareCoordinator};
use crate::error::{Error, Result};
use crate::storage::CleanupPolicy;

impl BrokerBuilder {
    /// Share group settings (Kafka's `group.share.*` and `share.coordinator.*`).
    /// Default: [`ShareConfig::default`], Kafka's defaults.
    pub fn share(mut self, config: ShareConfig) -> Self {
        self.config.share = config;
        self
    }
}

impl Broker {
    /// The share coordinator, with `__share_group_state` made and loaded unless done
    /// (what the first share consumer of a data directory does).
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let broker = tidelog::Broker::open(dir.path())?;
    /// let share = broker.share_coordinator()?;
    /// assert!(share.list_groups().is_empty());
    /// assert!(broker.topic("__share_group_state").is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn share_coordinator(&self) -> Result<&ShareCoordinator> {
        self.ensure_share_state()?;
        Ok(&self.inner.share)
    }

    /// The share coordinator as it is (nothing made or loaded).
    #[cfg(feature = "server")]
    pub(crate) fn share_state(&self) -> &ShareCoordinator {
        &self.inner.share
    }

    /// Deletes the share state of every share-partition of `topic` (a topic deleted), so
    /// a topic made again with its name starts afresh in every share group. A failure
    /// is logged (the topic is deleted all the same, as in Kafka): nothing to do before
    /// share groups are used.
    pub(crate) fn delete_share_states_of(&self, topic: &str) {
        let share = &self.inner.share;
        if !share.is_loaded() {
            return;
        }
        let deleted = share.delete_topic_states(topic);
        #[cfg(feature = "server")]
        match deleted {
            Ok(0) => {}
            Ok(n) => tracing::info!(topic, share_partitions = n, "share state deleted"),
            Err(e) => {
                tracing::warn!(topic, error = %e, "the share state of a deleted topic was not deleted")
            }
        }
        // Without a server there is no log to tell.
        #[cfg(not(feature = "server"))]
        drop(deleted);
    }

    /// Makes `__share_group_state` (`share.coordinator.state.topic.num.partitions`
    /// partitions; cleanup policy `delete` with no retention: the coordinator deletes
    /// what no share-partition needs any more) unless it exists, and loads it into the
    /// share coordinator. Cheap once done.
    pub(crate) fn ensure_share_state(&self) -> Result<()> {
        let share = &self.inner.share;
        if share.is_loaded() {
            return Ok(());
        }
        if self.is_cluster_node() {
            // A cluster node's store is set when the node starts.
            return Err(Error::Closed(
                "the share coordinator (this cluster node has not started yet)".into(),
            ));
        }
        let _once = self.inner.share_setup.lock();
        if share.is_loaded() {
            return Ok(());
        }
        let topic = match self.registered_topic(SHARE_GROUP_STATE_TOPIC) {
            Ok(t) => t,
            Err(_) => self.create_topic_inner(
                SHARE_GROUP_STATE_TOPIC,
                self.inner.config.share.state_topic_partitions.max(1),
                TopicConfig::new()
                    .cleanup_policy(CleanupPolicy::Delete)
                    .retention(None)
                    .retention_bytes(None),
                true,
            )?,
        };
        share.load(&topic.partitions())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::coordinator::AcknowledgeType::{Accept, Reject, Release};
    use crate::error::RecordState;

    fn open(dir: &std::path::Path, per_snapshot: u32) -> Broker {
        Broker::builder(dir)
            .share(ShareConfig {
                state_topic_partitions: 3,
                snapshot_update_records_per_snapshot: per_snapshot,
                record_lock_duration: Duration::from_secs(60),
                ..ShareConfig::default()
            })
            .open()
            .unwrap()
    }

    /// Acquires offsets 0..10 of t-0 for `member` and acknowledges: 0..4 accepted,
    /// 4 rejected, 5 released, the rest held.
    fn work(share: &ShareCoordinator, member: &str) {
        let now = Instant::now();
        assert_eq!(
            share
                .fetch_offset("g", "t", 0, 0, 0, Instant::now())
                .unwrap(),
            0
        );
        let all: Vec<i64> = (0..10).collect();
        let got = share
            .acquire("g", member, "t", 0, &all, 10, 100, now)
            .unwrap();
        assert_eq!(got.len(), 10);
        let mut acks: Vec<(i64, crate::coordinator::AcknowledgeType)> =
            (0..4).map(|o| (o, Accept)).collect();
        acks.push((4, Reject));
        acks.push((5, Release));
        for (_, r) in share.acknowledge("g", member, "t", 0, &acks, now).unwrap() {
            r.unwrap();
        }
        assert_eq!(share.start_offset("g", "t", 0), Some(5));
    }

    fn check_reloaded(share: &ShareCoordinator) {
        assert_eq!(share.start_offset("g", "t", 0), Some(5));
        assert_eq!(share.record_state("g", "t", 0, 3), None, "complete");
        assert_eq!(
            share.record_state("g", "t", 0, 5),
            Some((RecordState::Available, 1))
        );
        // Held when the broker stopped: available again, delivered once.
        assert_eq!(
            share.record_state("g", "t", 0, 9),
            Some((RecordState::Available, 1))
        );
        assert_eq!(
            share
                .fetch_offset("g", "t", 0, 0, 0, Instant::now())
                .unwrap(),
            5
        );
        let again = share
            .acquire(
                "g",
                "m2",
                "t",
                0,
                &(0..12).collect::<Vec<_>>(),
                12,
                100,
                Instant::now(),
            )
            .unwrap();
        let offsets: Vec<i64> = again.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, (5..12).collect::<Vec<_>>());
        assert_eq!(again[0].delivery_count, 2);
        assert_eq!(again[6].delivery_count, 1);
    }

    #[test]
    fn acknowledgements_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        {
            let broker = open(dir.path(), 500);
            let share = broker.share_coordinator().unwrap();
            work(share, "m1");
            let state = broker.topic(SHARE_GROUP_STATE_TOPIC).unwrap();
            assert_eq!(state.partition_count(), 3);
            assert!(state.is_internal());
        }
        let broker = open(dir.path(), 500);
        assert!(broker.inner.share.is_loaded(), "loaded at open");
        check_reloaded(broker.share_coordinator().unwrap());
    }

    #[test]
    fn snapshots_prune_the_journal_and_still_reload() {
        let dir = tempfile::tempdir().unwrap();
        {
            let broker = open(dir.path(), 2);
            let share = broker.share_coordinator().unwrap();
            work(share, "m1");
            // Every second write is a snapshot; what came before it is deleted.
            let starts: Vec<i64> = broker
                .topic(SHARE_GROUP_STATE_TOPIC)
                .unwrap()
                .partitions()
                .iter()
                .map(|p| p.log_start_offset())
                .collect();
            assert!(starts.iter().any(|s| *s > 0), "nothing pruned: {starts:?}");
        }
        let broker = open(dir.path(), 2);
        check_reloaded(broker.share_coordinator().unwrap());
    }

    #[test]
    fn a_failed_write_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(dir.path(), 500);
        let share = broker.share_coordinator().unwrap();
        assert_eq!(
            share
                .fetch_offset("g", "t", 0, 0, 0, Instant::now())
                .unwrap(),
            0
        );
        let now = Instant::now();
        share
            .acquire("g", "m", "t", 0, &[0, 1], 2, 10, now)
            .unwrap();
        // The journal's partitions go away (the broker closes its logs).
        broker.close().unwrap();
        let err = share.acknowledge("g", "m", "t", 0, &[(0, Accept)], now);
        assert!(err.is_err(), "{err:?}");
        assert_eq!(
            share.record_state("g", "t", 0, 0),
            Some((RecordState::Acquired, 1)),
            "undone"
        );
    }

    #[test]
    fn a_groups_record_lock_duration_ends_its_locks() {
        use crate::coordinator::group_configs::{
            FileGroupConfigStore, GroupConfigStore, SHARE_RECORD_LOCK_DURATION_MS,
        };
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::builder(dir.path()).open().unwrap();
        let share = broker.share_coordinator().unwrap();
        let config = broker.config();
        let store = FileGroupConfigStore::open(dir.path(), &config.coordinator, &config.share);
        let store = store.unwrap();
        let lock = (
            SHARE_RECORD_LOCK_DURATION_MS.to_string(),
            Some("15000".into()),
        );
        store.apply("quick", &[lock]).unwrap();
        share.set_group_configs(std::sync::Arc::new(store));
        assert_eq!(
            share.group_settings("quick").record_lock_duration,
            Duration::from_secs(15)
        );
        let t0 = Instant::now();
        for group in ["quick", "g"] {
            assert_eq!(share.fetch_offset(group, "t", 0, 0, 0, t0).unwrap(), 0);
            let got = share.acquire(group, "m", "t", 0, &[0], 1, 10, t0).unwrap();
            assert_eq!(got.len(), 1, "{group}");
        }
        // After 16 s the lock of `quick` (15 s) has ended, the broker's (30 s) not.
        let t1 = t0 + Duration::from_secs(16);
        for group in ["quick", "g"] {
            share.fetch_offset(group, "t", 0, 0, 0, t1).unwrap();
        }
        assert_eq!(
            share.record_state("quick", "t", 0, 0),
            Some((RecordState::Available, 1))
        );
        assert_eq!(
            share.record_state("g", "t", 0, 0),
            Some((RecordState::Acquired, 1))
        );
    }

    #[test]
    fn offsets_are_described_altered_and_deleted_and_survive_a_restart() {
        use crate::error::{Error, ShareError};
        let dir = tempfile::tempdir().unwrap();
        let topics = vec!["t".to_string()];
        let start_and_epoch = |share: &ShareCoordinator| {
            let got = share.share_offsets("g", &topics).unwrap();
            assert_eq!(got.len(), 1, "{got:?}");
            (got[0].start_offset, got[0].state_epoch)
        };
        {
            let broker = open(dir.path(), 500);
            let share = broker.share_coordinator().unwrap();
            let e = share.share_offsets("g", &topics).unwrap_err();
            let unknown = matches!(
                &e,
                Error::Share {
                    source: ShareError::GroupIdNotFound,
                    ..
                }
            );
            assert!(unknown, "{e}");
            work(share, "m1");
            share.release_held("g", "m1", Instant::now()).unwrap();
            assert_eq!(start_and_epoch(share), (5, 0));
            // A member makes the group non-empty: no alter, no delete.
            let m = share.join("g", &topics, "c").unwrap();
            let e = share
                .alter_share_offsets("g", &[("t".into(), 0, 2)])
                .unwrap_err();
            let busy = matches!(
                &e,
                Error::Share {
                    source: ShareError::NonEmptyGroup(1),
                    ..
                }
            );
            assert!(busy, "{e}");
            assert!(share.delete_share_offsets("g", &[("t".into(), 0)]).is_err());
            share.leave("g", &m, Instant::now()).unwrap();
            // Back to 2: records 2..5, accepted or rejected before, come again.
            let r = share
                .alter_share_offsets("g", &[("t".into(), 0, 2), ("t".into(), 1, -1)])
                .unwrap();
            r[0].as_ref().unwrap();
            assert!(r[1].is_err(), "a negative start offset");
            assert_eq!(start_and_epoch(share), (2, 1));
            assert_eq!(
                share
                    .fetch_offset("g", "t", 0, 0, 0, Instant::now())
                    .unwrap(),
                2
            );
            assert_eq!(
                share.record_state("g", "t", 0, 5),
                None,
                "nothing in flight"
            );
        }
        {
            // Reopened: the altered state is what loads.
            let broker = open(dir.path(), 500);
            let share = broker.share_coordinator().unwrap();
            assert_eq!(start_and_epoch(share), (2, 1));
            let r = share.delete_share_offsets("g", &[("t".into(), 0)]).unwrap();
            r[0].as_ref().unwrap();
            assert!(share.share_offsets("g", &topics).is_err(), "no state left");
            // Read again, it starts where a share-partition never read starts.
            assert_eq!(
                share
                    .fetch_offset("g", "t", 0, 0, 7, Instant::now())
                    .unwrap(),
                7
            );
        }
        let broker = open(dir.path(), 500);
        let share = broker.share_coordinator().unwrap();
        assert_eq!(start_and_epoch(share), (7, 2));
        assert_eq!(share.record_state("g", "t", 0, 7), None);
        // And deleted again, the deletion loads too.
        share.delete_share_offsets("g", &[("t".into(), 0)]).unwrap();
        drop(broker);
        let broker = open(dir.path(), 500);
        let share = broker.share_coordinator().unwrap();
        assert!(share.share_offsets("g", &topics).is_err());
        assert_eq!(
            share
                .fetch_offset("g", "t", 0, 0, 3, Instant::now())
                .unwrap(),
            3
        );
        assert_eq!(start_and_epoch(share), (3, 3));
    }
}
