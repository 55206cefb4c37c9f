//! A single node's dynamic broker configs (Kafka's BROKER config resources), in the
//! `broker-configs` file of its data directory (a crash-safe TLCP file; see
//! docs/format.md): the same keys a cluster keeps in its metadata image
//! (`leader.replication.throttled.rate`, `follower.replication.throttled.rate`,
//! `replica.alter.log.dirs.io.max.bytes.per.second`), for the node's own id and for the
//! cluster-wide default (resource name ""). The pace of moves between log directories
//! follows the dynamic value while one is set, else the one the broker was opened with;
//! the replication throttle rates are kept and described, and throttle nothing on a node
//! that has no followers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::broker::Broker;
use crate::cluster::image::{
    BrokerConfigs, apply_broker_changes, get_broker_configs, put_broker_configs,
    validate_broker_change,
};
use crate::error::Result;
use crate::storage::codec::{Reader, Writer};

/// The file's name in the root of the data directory.
pub(crate) const BROKER_CONFIGS_FILE: &str = "broker-configs";
/// Payload version of the `broker-configs` file.
const BROKER_CONFIGS_VERSION: u8 = 1;

/// The dynamic broker configs of a single node and the broker they pace.
pub(crate) struct NodeBrokerConfigs {
    path: PathBuf,
    broker: Broker,
    /// The pace of moves between log directories the broker was opened with.
    static_move_rate: Option<u64>,
    /// The configs; the lock also orders writes of the file.
    configs: Mutex<BrokerConfigs>,
}

impl std::fmt::Debug for NodeBrokerConfigs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeBrokerConfigs")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl NodeBrokerConfigs {
    /// Reads `<broker's dir>/broker-configs` (none yet: no dynamic config) and applies
    /// its pace of moves between log directories to `broker` (node id `node_id`). A
    /// damaged file, or one with a key or value a change would be refused, is
    /// `Error::Corrupt`.
    pub(crate) fn open(broker: &Broker, node_id: i32) -> Result<NodeBrokerConfigs> {
        let path = broker.dir().join(BROKER_CONFIGS_FILE);
        let configs = match crate::storage::read_checkpoint(&path)? {
            None => BrokerConfigs::default(),
            Some(payload) => decode(&payload, &path)?,
        };
        let store = NodeBrokerConfigs {
            path,
            static_move_rate: broker.log_dir_move_rate(),
            broker: broker.clone(),
            configs: Mutex::new(configs),
        };
        store.pace(&store.configs.lock(), node_id);
        Ok(store)
    }

    /// The configs now.
    pub(crate) fn configs(&self) -> BrokerConfigs {
        self.configs.lock().clone()
    }

    /// Sets and removes configs of `broker` (None: the cluster-wide default), all or
    /// none (a key that is not dynamic, or a bad value, is `Error::InvalidConfig`);
    /// `validate_only` only checks. Written to the file before it takes effect.
    pub(crate) fn alter(
        &self,
        node_id: i32,
        broker: Option<i32>,
        changes: &[(String, Option<String>)],
        validate_only: bool,
    ) -> Result<()> {
        let mut configs = self.configs.lock();
        let mut next = (*configs.0).clone();
        apply_broker_changes(&mut next, broker, changes)?;
        if validate_only {
            return Ok(());
        }
        let next = BrokerConfigs(Arc::new(next));
        crate::storage::write_checkpoint(&self.path, &encode(&next))?;
        self.pace(&next, node_id);
        *configs = next;
        Ok(())
    }

    /// Sets the broker's pace of moves between log directories from `configs`.
    fn pace(&self, configs: &BrokerConfigs, node_id: i32) {
        self.broker
            .set_log_dir_move_rate(configs.log_dir_move_rate(node_id, self.static_move_rate));
    }
}

/// The `broker-configs` payload: version (`u8`), then the configs as the metadata
/// image holds them.
fn encode(configs: &BrokerConfigs) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(BROKER_CONFIGS_VERSION);
    put_broker_configs(&mut w, configs);
    w.into_bytes()
}

/// Reads what [`encode`] wrote, checking every key and value as a change would be.
fn decode(payload: &[u8], path: &Path) -> Result<BrokerConfigs> {
    let location = path.display().to_string();
    let mut r = Reader::new(payload, &location);
    let version = r.u8()?;
    if version != BROKER_CONFIGS_VERSION {
        return Err(r.error(format!(
            "broker configs version {version}; this version reads {BROKER_CONFIGS_VERSION}"
        )));
    }
    let configs = get_broker_configs(&mut r)?;
    for (k, v) in configs.0.values().flatten() {
        validate_broker_change(k, Some(v)).map_err(|e| r.error(e.to_string()))?;
    }
    r.finish()?;
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::{LEADER_THROTTLED_RATE, LOG_DIR_MOVE_RATE};

    fn set(k: &str, v: &str) -> (String, Option<String>) {
        (k.to_string(), Some(v.to_string()))
    }

    #[test]
    fn configs_are_kept_across_a_reopen_and_pace_moves_over_the_static_rate() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path()).unwrap();
        broker.set_log_dir_move_rate(Some(5_000));
        let store = NodeBrokerConfigs::open(&broker, 0).unwrap();
        assert_eq!(broker.log_dir_move_rate(), Some(5_000), "the flag's, unset");
        store
            .alter(0, None, &[set(LOG_DIR_MOVE_RATE, "1000")], false)
            .unwrap();
        assert_eq!(broker.log_dir_move_rate(), Some(1_000), "the default's");
        store
            .alter(0, Some(0), &[set(LOG_DIR_MOVE_RATE, "2000")], false)
            .unwrap();
        assert_eq!(broker.log_dir_move_rate(), Some(2_000), "its own wins");
        store
            .alter(0, Some(0), &[set(LEADER_THROTTLED_RATE, "7")], true)
            .unwrap();
        assert!(
            store
                .alter(0, Some(0), &[set("num.partitions", "3")], false)
                .is_err()
        );
        assert!(
            store
                .alter(0, Some(0), &[set(LEADER_THROTTLED_RATE, "-1")], false)
                .is_err()
        );
        let kept = store.configs();
        assert_eq!(
            kept.value(Some(0), LEADER_THROTTLED_RATE).0,
            i64::MAX.to_string()
        );
        drop(store);
        broker.set_log_dir_move_rate(Some(5_000));
        let reopened = NodeBrokerConfigs::open(&broker, 0).unwrap();
        assert_eq!(reopened.configs(), kept);
        assert_eq!(broker.log_dir_move_rate(), Some(2_000));
        // Both removed: back to the rate the broker was opened with.
        reopened
            .alter(0, Some(0), &[(LOG_DIR_MOVE_RATE.to_string(), None)], false)
            .unwrap();
        reopened
            .alter(0, None, &[(LOG_DIR_MOVE_RATE.to_string(), None)], false)
            .unwrap();
        assert_eq!(broker.log_dir_move_rate(), Some(5_000));
    }

    #[test]
    fn a_file_with_a_key_that_is_not_dynamic_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let broker = Broker::open(dir.path()).unwrap();
        let mut bad = std::collections::BTreeMap::new();
        bad.insert(
            None,
            std::collections::BTreeMap::from([("num.partitions".to_string(), "3".to_string())]),
        );
        crate::storage::write_checkpoint(
            &dir.path().join(BROKER_CONFIGS_FILE),
            &encode(&BrokerConfigs(Arc::new(bad))),
        )
        .unwrap();
        let err = NodeBrokerConfigs::open(&broker, 0).unwrap_err();
        assert!(
            matches!(err, crate::error::Error::Corrupt { .. }),
            "{err:?}"
        );
    }
}
