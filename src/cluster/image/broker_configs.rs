//! Dynamic broker configs of a cluster (Kafka's BROKER config resources, KIP-73's
//! replication throttle rates, the pace of moves between log directories): per broker id and a cluster-wide default (resource name
//! ""), changed by `AlterBrokerConfig` records, kept in the image (version 10).
//!
//! A broker's value of a key is its own if set, else the cluster-wide default if set,
//! else Kafka's default.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Applied, MetadataImage, Outcome, invalid};
use crate::cluster::records::codec::{get_broker_config, put_broker_config};
use crate::error::{Error, Result};
use crate::storage::codec::{Reader, Writer};

/// Kafka's `leader.replication.throttled.rate`: bytes/s a leader sends to followers of
/// its leader-throttled replicas.
pub(crate) const LEADER_THROTTLED_RATE: &str = "leader.replication.throttled.rate";
/// Kafka's `follower.replication.throttled.rate`: bytes/s a follower fetches for its
/// follower-throttled replicas.
pub(crate) const FOLLOWER_THROTTLED_RATE: &str = "follower.replication.throttled.rate";
/// Kafka's `replica.alter.log.dirs.io.max.bytes.per.second`: bytes/s a move between a
/// node's log directories copies at most (over `tidelog serve`'s flag of that name).
pub(crate) const LOG_DIR_MOVE_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";
/// The broker configs that can be changed while the cluster runs.
pub(crate) const DYNAMIC_BROKER_KEYS: &[&str] = &[
    LEADER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_RATE,
    LOG_DIR_MOVE_RATE,
];
/// Both rates' default (Kafka's `Long.MAX_VALUE`): unthrottled.
pub(crate) const UNTHROTTLED: i64 = i64::MAX;

/// The settings of each broker (`Some(id)`) and the cluster-wide default (`None`),
/// shared between images until they change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BrokerConfigs(pub Arc<BTreeMap<Option<i32>, BTreeMap<String, String>>>);

/// Where a broker's value of a setting comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerConfigSource {
    /// Set for this broker (Kafka's DYNAMIC_BROKER_CONFIG).
    Broker,
    /// Set as the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG).
    ClusterDefault,
    /// Kafka's default (DEFAULT_CONFIG).
    Default,
}

impl BrokerConfigs {
    /// The value of `key` for `broker` (None: the cluster-wide default level) and where
    /// it comes from.
    pub(crate) fn value(&self, broker: Option<i32>, key: &str) -> (String, BrokerConfigSource) {
        let at = |b: Option<i32>| self.0.get(&b).and_then(|m| m.get(key)).cloned();
        if let Some(v) = broker.and_then(|b| at(Some(b))) {
            return (v, BrokerConfigSource::Broker);
        }
        match at(None) {
            Some(v) => (v, BrokerConfigSource::ClusterDefault),
            None => (UNTHROTTLED.to_string(), BrokerConfigSource::Default),
        }
    }

    /// The pace of `broker`'s moves between log directories: its dynamic
    /// `replica.alter.log.dirs.io.max.bytes.per.second` (own or cluster-wide) while one
    /// is set, else `static_rate`, the one it started with (None: unlimited).
    pub(crate) fn log_dir_move_rate(&self, broker: i32, static_rate: Option<u64>) -> Option<u64> {
        let (value, source) = self.value(Some(broker), LOG_DIR_MOVE_RATE);
        match source {
            BrokerConfigSource::Default => static_rate,
            _ => value
                .parse::<u64>()
                .ok()
                .filter(|r| *r != UNTHROTTLED as u64),
        }
    }

    /// A throttle rate of `broker` in bytes/s, [`UNTHROTTLED`] if none is set.
    pub(crate) fn rate(&self, broker: i32, key: &str) -> i64 {
        self.value(Some(broker), key)
            .0
            .parse()
            .unwrap_or(UNTHROTTLED)
    }
}

/// Checks one change: a dynamic key, and for a value a rate of at least 0 (Kafka's
/// `LONG` with `atLeast(0)`).
pub(crate) fn validate_change(key: &str, value: Option<&str>) -> Result<()> {
    if !DYNAMIC_BROKER_KEYS.contains(&key) {
        return Err(Error::InvalidConfig {
            key: key.to_string(),
            reason: format!(
                "Cannot update these configs dynamically: {key} (the broker configs that can be changed while the broker runs are {})",
                DYNAMIC_BROKER_KEYS.join(", ")
            ),
        });
    }
    if let Some(v) = value {
        match v.trim().parse::<i64>() {
            Ok(n) if n >= 0 => {}
            _ => {
                return Err(Error::InvalidConfig {
                    key: key.to_string(),
                    reason: format!("{v:?} is not a rate in bytes per second (an integer >= 0)"),
                });
            }
        }
    }
    Ok(())
}

/// Writes every broker's settings: a count (`u32`), each as an `AlterBrokerConfig`
/// record's fields (broker id, -1 for the cluster-wide default, and its keys with their
/// values), as the image (since version 10) and a single node's `broker-configs` file
/// hold them.
pub(crate) fn put_configs(w: &mut Writer, configs: &BrokerConfigs) {
    w.u32(configs.0.len() as u32);
    for (broker, settings) in configs.0.iter() {
        let pairs: Vec<_> = settings
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        put_broker_config(w, *broker, &pairs);
    }
}

/// Reads what [`put_configs`] wrote (the keys and values as written, unchecked).
pub(crate) fn get_configs(r: &mut Reader<'_>) -> Result<BrokerConfigs> {
    let mut configs = BTreeMap::new();
    // A broker id and a count each.
    for _ in 0..r.count(8)? {
        let (broker, pairs) = get_broker_config(r)?;
        let settings = pairs
            .into_iter()
            .map(|(k, v)| (k, v.unwrap_or_default()))
            .collect();
        configs.insert(broker, settings);
    }
    Ok(BrokerConfigs(Arc::new(configs)))
}

/// Applies `changes` to the settings of `broker`, all or none.
pub(crate) fn apply_changes(
    configs: &mut BTreeMap<Option<i32>, BTreeMap<String, String>>,
    broker: Option<i32>,
    changes: &[(String, Option<String>)],
) -> Result<()> {
    for (k, v) in changes {
        validate_change(k, v.as_deref())?;
    }
    let entry = configs.entry(broker).or_default();
    for (k, v) in changes {
        match v {
            Some(v) => entry.insert(k.clone(), v.trim().to_string()),
            None => entry.remove(k),
        };
    }
    if entry.is_empty() {
        configs.remove(&broker);
    }
    Ok(())
}

impl MetadataImage {
    /// `AlterBrokerConfig`: all the changes, or none.
    pub(super) fn alter_broker_config(
        &mut self,
        broker: Option<i32>,
        changes: &[(String, Option<String>)],
    ) -> Outcome {
        let mut configs = (*self.broker_configs.0).clone();
        apply_changes(&mut configs, broker, changes).map_err(invalid)?;
        self.broker_configs = BrokerConfigs(Arc::new(configs));
        Ok(Applied::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::records::MetadataRecord;

    #[test]
    fn a_brokers_own_value_wins_over_the_default_and_bad_changes_change_nothing() {
        let mut image = MetadataImage::default();
        let set = |broker, key: &str, v: Option<&str>| MetadataRecord::AlterBrokerConfig {
            broker,
            changes: vec![(key.to_string(), v.map(String::from))],
        };
        image
            .apply(1, &set(None, LEADER_THROTTLED_RATE, Some("1000")))
            .unwrap();
        image
            .apply(2, &set(Some(2), LEADER_THROTTLED_RATE, Some("500")))
            .unwrap();
        let c = &image.broker_configs;
        assert_eq!(c.rate(2, LEADER_THROTTLED_RATE), 500);
        assert_eq!(c.rate(1, LEADER_THROTTLED_RATE), 1000);
        assert_eq!(c.rate(1, FOLLOWER_THROTTLED_RATE), UNTHROTTLED);
        assert_eq!(
            c.value(Some(1), LEADER_THROTTLED_RATE).1,
            BrokerConfigSource::ClusterDefault
        );
        assert_eq!(
            c.value(Some(2), LEADER_THROTTLED_RATE).1,
            BrokerConfigSource::Broker
        );
        let before = image.broker_configs.clone();
        for bad in [
            set(Some(1), "log.retention.ms", Some("1")),
            set(Some(1), FOLLOWER_THROTTLED_RATE, Some("-1")),
            set(Some(1), FOLLOWER_THROTTLED_RATE, Some("fast")),
        ] {
            assert!(image.apply(3, &bad).is_err(), "{bad:?}");
        }
        assert_eq!(image.broker_configs, before);
        image
            .apply(4, &set(Some(2), LEADER_THROTTLED_RATE, None))
            .unwrap();
        assert_eq!(image.broker_configs.rate(2, LEADER_THROTTLED_RATE), 1000);
        let restored = MetadataImage::decode(&image.encode(), "test").unwrap();
        assert_eq!(restored.broker_configs, image.broker_configs);
    }
}
