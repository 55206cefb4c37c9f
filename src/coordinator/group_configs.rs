//! Dynamic group configs (KIP-848, KIP-932): per group id, overrides of the broker's
//! session timeouts, heartbeat intervals, record lock duration,
//! `share.auto.offset.reset` and `share.isolation.level`, with Kafka's names and defaults and the broker's bounds
//! (`group.consumer.min/max.*`, `group.share.min/max.*`) (the GROUP
//! resource, type 32, of DescribeConfigs and IncrementalAlterConfigs). A single node
//! keeps them in its data directory's `group-configs` file, a cluster in its metadata
//! image; both are a [`GroupConfigStore`]. The group coordinator and the share
//! coordinator read a group's values from the store they are given
//! ([`GroupCoordinator::set_group_configs`](super::GroupCoordinator::set_group_configs),
//! [`ShareCoordinator::set_group_configs`](super::ShareCoordinator::set_group_configs)).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use crate::config::{CoordinatorConfig, ShareConfig};
use crate::error::{Error, Result};
use crate::storage::codec::{Reader, Writer};

/// The file of a data directory that holds the group configs.
pub const GROUP_CONFIGS_FILE: &str = "group-configs";
const GROUP_CONFIGS_VERSION: u8 = 1;

/// `consumer.session.timeout.ms`: a consumer-protocol member's session.
pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
/// `consumer.heartbeat.interval.ms`: how often consumer-protocol members heartbeat.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
/// `share.session.timeout.ms`: a share member's session.
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
/// `share.heartbeat.interval.ms`: how often share members heartbeat.
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
/// `share.record.lock.duration.ms`: how long an acquired record stays locked.
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
/// `share.auto.offset.reset`: where a share-partition seen for the first time starts,
/// `latest` (the default) or `earliest`.
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
/// `share.isolation.level`: which records a share group reads, `read_uncommitted` (the
/// default: every data record up to the high watermark) or `read_committed` (up to
/// the last stable offset, without the records of aborted transactions).
pub const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";

/// Each setting, true for those in milliseconds (all but `share.auto.offset.reset`
/// and `share.isolation.level`).
const KEYS: &[(&str, bool)] = &[
    (CONSUMER_SESSION_TIMEOUT_MS, true),
    (CONSUMER_HEARTBEAT_INTERVAL_MS, true),
    (SHARE_SESSION_TIMEOUT_MS, true),
    (SHARE_HEARTBEAT_INTERVAL_MS, true),
    (SHARE_RECORD_LOCK_DURATION_MS, true),
    (SHARE_AUTO_OFFSET_RESET, false),
    (SHARE_ISOLATION_LEVEL, false),
];

/// The values a setting that is not in milliseconds takes (Kafka's names).
fn choices(key: &str) -> &'static [&'static str] {
    match key {
        SHARE_ISOLATION_LEVEL => &["read_uncommitted", "read_committed"],
        _ => &["earliest", "latest"],
    }
}

/// One bound of a setting: the broker setting that holds it (Kafka's name) and its
/// value in milliseconds.
type Bound = (&'static str, i64);

/// The smallest and largest value of a millisecond setting: the broker's
/// `group.consumer.min/max.*` and `group.share.min/max.*` settings.
fn limits(
    key: &str,
    coordinator: &CoordinatorConfig,
    share: &ShareConfig,
) -> Option<(Bound, Bound)> {
    let ms = |d: Duration| d.as_millis().min(i64::MAX as u128) as i64;
    Some(match key {
        CONSUMER_SESSION_TIMEOUT_MS => (
            (
                "group.consumer.min.session.timeout.ms",
                ms(coordinator.consumer_min_session_timeout),
            ),
            (
                "group.consumer.max.session.timeout.ms",
                ms(coordinator.consumer_max_session_timeout),
            ),
        ),
        CONSUMER_HEARTBEAT_INTERVAL_MS => (
            (
                "group.consumer.min.heartbeat.interval.ms",
                ms(coordinator.consumer_min_heartbeat_interval),
            ),
            (
                "group.consumer.max.heartbeat.interval.ms",
                ms(coordinator.consumer_max_heartbeat_interval),
            ),
        ),
        SHARE_SESSION_TIMEOUT_MS => (
            (
                "group.share.min.session.timeout.ms",
                ms(share.min_session_timeout),
            ),
            (
                "group.share.max.session.timeout.ms",
                ms(share.max_session_timeout),
            ),
        ),
        SHARE_HEARTBEAT_INTERVAL_MS => (
            (
                "group.share.min.heartbeat.interval.ms",
                ms(share.min_heartbeat_interval),
            ),
            (
                "group.share.max.heartbeat.interval.ms",
                ms(share.max_heartbeat_interval),
            ),
        ),
        SHARE_RECORD_LOCK_DURATION_MS => (
            (
                "group.share.min.record.lock.duration.ms",
                ms(share.min_record_lock_duration),
            ),
            (
                "group.share.max.record.lock.duration.ms",
                ms(share.max_record_lock_duration),
            ),
        ),
        _ => return None,
    })
}

/// The settings of one group that override the broker's.
pub type GroupOverrides = BTreeMap<String, String>;

/// Every group's overrides, by group id.
pub type GroupConfigs = BTreeMap<String, GroupOverrides>;

/// One change of an IncrementalAlterConfigs: set `key` to a value, or remove its
/// override (`None`).
pub type GroupConfigChange = (String, Option<String>);

/// Every setting of a group, its value (the override, else the broker's), and whether
/// the group overrides it; in Kafka's order.
pub fn describe(
    overrides: &GroupOverrides,
    coordinator: &CoordinatorConfig,
    share: &ShareConfig,
) -> Vec<(String, String, bool)> {
    let ms = |d: std::time::Duration| d.as_millis().to_string();
    let defaults = [
        ms(coordinator.consumer_session_timeout),
        ms(coordinator.consumer_heartbeat_interval),
        ms(share.session_timeout),
        ms(share.heartbeat_interval),
        ms(share.record_lock_duration),
        "latest".to_string(),
        "read_uncommitted".to_string(),
    ];
    KEYS.iter()
        .zip(defaults)
        .map(|((key, _), default)| match overrides.get(*key) {
            Some(v) => (key.to_string(), v.clone(), true),
            None => (key.to_string(), default, false),
        })
        .collect()
}

/// Whether a known setting is in milliseconds; an unknown name is refused.
fn is_millis(group: &str, key: &str) -> Result<bool> {
    match KEYS.iter().find(|(k, _)| *k == key) {
        Some((_, millis)) => Ok(*millis),
        None => {
            let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            Err(Error::InvalidConfig {
                key: key.to_string(),
                reason: format!(
                    "group {group:?}: unknown group config; known: {}",
                    known.join(", ")
                ),
            })
        }
    }
}

/// Checks one value as Kafka's `GroupConfig` does: a known name, a whole number of
/// milliseconds within the setting's bounds (the broker's settings; not checked
/// without them), or one of the setting's names (`earliest`/`latest`,
/// `read_uncommitted`/`read_committed`).
fn validate_value(
    group: &str,
    key: &str,
    value: &str,
    broker: Option<(&CoordinatorConfig, &ShareConfig)>,
) -> Result<()> {
    let invalid = |reason: String| Error::InvalidConfig {
        key: key.to_string(),
        reason: format!("group {group:?}: {reason}"),
    };
    if !is_millis(group, key)? {
        let choices = choices(key);
        if choices.contains(&value) {
            return Ok(());
        }
        return Err(invalid(format!(
            "{value:?} is not one of {}",
            choices.join(", ")
        )));
    }
    let v = value
        .parse::<i64>()
        .map_err(|_| invalid(format!("{value:?} is not a number of milliseconds")))?;
    let Some(((min_name, min), (max_name, max))) = broker.and_then(|(c, s)| limits(key, c, s))
    else {
        return Ok(());
    };
    if v < min {
        return Err(invalid(format!(
            "{key} ({v}) must be at least {min_name} ({min})"
        )));
    }
    if v > max {
        return Err(invalid(format!(
            "{key} ({v}) must be at most {max_name} ({max})"
        )));
    }
    Ok(())
}

/// Applies `changes` to `group`'s overrides in `configs`, in order, after checking
/// each and that each heartbeat interval stays below its session timeout (nothing
/// changes on an error).
pub fn apply_changes(
    configs: &mut GroupConfigs,
    group: &str,
    changes: &[GroupConfigChange],
    coordinator: &CoordinatorConfig,
    share: &ShareConfig,
) -> Result<()> {
    let next = changed(configs, group, changes, Some((coordinator, share)))?;
    let values: BTreeMap<String, String> = describe(&next, coordinator, share)
        .into_iter()
        .map(|(k, v, _)| (k, v))
        .collect();
    let ms = |k: &str| values.get(k).and_then(|v| v.parse::<i64>().ok());
    for (interval, session) in [
        (CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS),
        (SHARE_HEARTBEAT_INTERVAL_MS, SHARE_SESSION_TIMEOUT_MS),
    ] {
        if let (Some(i), Some(s)) = (ms(interval), ms(session))
            && i >= s
        {
            return Err(Error::InvalidConfig {
                key: interval.to_string(),
                reason: format!(
                    "group {group:?}: {interval} ({i}) must be less than {session} ({s})"
                ),
            });
        }
    }
    put_overrides(configs, group, next);
    Ok(())
}

/// Applies `changes` to `group`'s overrides in `configs` checking each name and value
/// but not the bounds nor the heartbeat intervals against the session timeouts, which
/// depend on the broker's settings (a cluster's metadata image applies a change the
/// node that proposed it checked). Nothing changes on an error.
pub fn apply_checked_values(
    configs: &mut GroupConfigs,
    group: &str,
    changes: &[GroupConfigChange],
) -> Result<()> {
    let next = changed(configs, group, changes, None)?;
    put_overrides(configs, group, next);
    Ok(())
}

/// `group`'s overrides after `changes`, each checked (against the bounds of the
/// broker's settings when given).
fn changed(
    configs: &GroupConfigs,
    group: &str,
    changes: &[GroupConfigChange],
    broker: Option<(&CoordinatorConfig, &ShareConfig)>,
) -> Result<GroupOverrides> {
    let mut next = configs.get(group).cloned().unwrap_or_default();
    for (key, value) in changes {
        match value {
            Some(v) => {
                validate_value(group, key, v, broker)?;
                next.insert(key.clone(), v.clone());
            }
            None => {
                is_millis(group, key)?;
                next.remove(key);
            }
        }
    }
    Ok(next)
}

/// Sets `group`'s overrides (none: the group is forgotten).
fn put_overrides(configs: &mut GroupConfigs, group: &str, next: GroupOverrides) {
    if next.is_empty() {
        configs.remove(group);
    } else {
        configs.insert(group.to_string(), next);
    }
}

/// A millisecond setting of `overrides`, if the group overrides it.
fn millis(overrides: &GroupOverrides, key: &str) -> Option<Duration> {
    let ms = overrides.get(key)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ms))
}

/// The broker's consumer-protocol settings with `group`'s overrides of
/// `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` (borrowed as
/// they are when it has none).
pub fn consumer_settings<'a>(
    overrides: &GroupOverrides,
    base: &'a CoordinatorConfig,
) -> Cow<'a, CoordinatorConfig> {
    let session = millis(overrides, CONSUMER_SESSION_TIMEOUT_MS);
    let interval = millis(overrides, CONSUMER_HEARTBEAT_INTERVAL_MS);
    if session.is_none() && interval.is_none() {
        return Cow::Borrowed(base);
    }
    let mut c = base.clone();
    c.consumer_session_timeout = session.unwrap_or(c.consumer_session_timeout);
    c.consumer_heartbeat_interval = interval.unwrap_or(c.consumer_heartbeat_interval);
    Cow::Owned(c)
}

/// The broker's share-group settings with a group's overrides of
/// `share.session.timeout.ms`, `share.heartbeat.interval.ms` and
/// `share.record.lock.duration.ms`.
pub fn share_settings(overrides: &GroupOverrides, base: &ShareConfig) -> ShareConfig {
    let mut s = base.clone();
    let or = |key, d| millis(overrides, key).unwrap_or(d);
    s.session_timeout = or(SHARE_SESSION_TIMEOUT_MS, s.session_timeout);
    s.heartbeat_interval = or(SHARE_HEARTBEAT_INTERVAL_MS, s.heartbeat_interval);
    s.record_lock_duration = or(SHARE_RECORD_LOCK_DURATION_MS, s.record_lock_duration);
    s
}

/// What a share group's configs say of the records its members read, each where it is
/// set (`None`: the member's own setting stands).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShareReadOverrides {
    /// `share.isolation.level`: `Some(true)` for `read_committed`.
    pub read_committed: Option<bool>,
    /// `share.auto.offset.reset`: `Some(true)` for `earliest`.
    pub earliest: Option<bool>,
}

/// A group's overrides of `share.isolation.level` and `share.auto.offset.reset`.
pub fn share_read_overrides(overrides: &GroupOverrides) -> ShareReadOverrides {
    ShareReadOverrides {
        read_committed: overrides
            .get(SHARE_ISOLATION_LEVEL)
            .map(|v| v == "read_committed"),
        earliest: overrides
            .get(SHARE_AUTO_OFFSET_RESET)
            .map(|v| v == "earliest"),
    }
}

/// Where a node keeps its group configs: a single node's `group-configs` file
/// ([`FileGroupConfigStore`]), a cluster node its metadata image. Every change is
/// checked against Kafka's bounds and the broker's settings before it is stored.
pub trait GroupConfigStore: Send + Sync + std::fmt::Debug {
    /// Every group's overrides now.
    fn configs(&self) -> Arc<GroupConfigs>;

    /// The broker's settings, the defaults of the groups'.
    fn defaults(&self) -> (&CoordinatorConfig, &ShareConfig);

    /// Stores `changes` of `group` (checked by [`apply`](Self::apply)), all or none,
    /// durably before it returns.
    fn store(&self, group: &str, changes: &[GroupConfigChange]) -> Result<()>;

    /// The overrides of `group` (empty if it has none).
    fn overrides(&self, group: &str) -> GroupOverrides {
        self.configs().get(group).cloned().unwrap_or_default()
    }

    /// Every setting of `group` with its value and whether the group overrides it
    /// ([`describe`]).
    fn describe(&self, group: &str) -> Vec<(String, String, bool)> {
        let (coordinator, share) = self.defaults();
        describe(&self.overrides(group), coordinator, share)
    }

    /// Waits until the configs this store reads hold every change stored before the
    /// call, wherever it was made, within `timeout`. A single node's store reads what it
    /// stored itself: nothing to wait for. A cluster node's reads its metadata image,
    /// which may not have applied yet a change another node made: it takes a read
    /// barrier on the metadata log. The share coordinator calls it before it reads
    /// where a new share-partition starts (`share.auto.offset.reset`), once per
    /// share-partition it loads, never per fetch.
    fn read_barrier(&self, _timeout: Duration) -> Result<()> {
        Ok(())
    }

    /// Whether `group`'s `share.auto.offset.reset` is `earliest`: a share-partition it
    /// reads for the first time starts at the log's start, else at its end (`latest`).
    fn share_reads_from_earliest(&self, group: &str) -> bool {
        share_read_overrides(&self.overrides(group)).earliest == Some(true)
    }

    /// Whether `group`'s `share.isolation.level` is `read_committed`: its share-partitions
    /// end at the last stable offset and skip the records of aborted transactions.
    fn share_reads_committed(&self, group: &str) -> bool {
        share_read_overrides(&self.overrides(group)).read_committed == Some(true)
    }

    /// Checks `changes` as [`apply`](Self::apply) would, changing nothing.
    fn validate(&self, group: &str, changes: &[GroupConfigChange]) -> Result<()> {
        let (coordinator, share) = self.defaults();
        let mut one = GroupConfigs::new();
        one.insert(group.to_string(), self.overrides(group));
        apply_changes(&mut one, group, changes, coordinator, share)
    }

    /// Applies `changes` to `group`'s overrides, durably, all or none.
    fn apply(&self, group: &str, changes: &[GroupConfigChange]) -> Result<()> {
        self.validate(group, changes)?;
        self.store(group, changes)
    }
}

impl super::GroupCoordinator {
    /// Reads each group's `consumer.session.timeout.ms` and
    /// `consumer.heartbeat.interval.ms` from `store` from now on (a server sets the
    /// store it serves DescribeConfigs from).
    pub fn set_group_configs(&self, store: Arc<dyn GroupConfigStore>) {
        *self.inner.group_configs.write() = Some(store);
    }

    /// The coordinator's settings with `group`'s overrides of its consumer-protocol
    /// session timeout and heartbeat interval.
    pub(super) fn group_settings(&self, group: &str) -> Cow<'_, CoordinatorConfig> {
        let overrides = match &*self.inner.group_configs.read() {
            Some(store) => store.overrides(group),
            None => return Cow::Borrowed(&self.inner.config),
        };
        consumer_settings(&overrides, &self.inner.config)
    }
}

/// The group configs of a data directory, in its `group-configs` file.
#[derive(Debug)]
pub struct FileGroupConfigStore {
    path: PathBuf,
    configs: RwLock<Arc<GroupConfigs>>,
    /// The broker's settings, the defaults of the groups'.
    coordinator: CoordinatorConfig,
    share: ShareConfig,
}

impl FileGroupConfigStore {
    /// Reads `<dir>/group-configs` (none yet: no override), with the broker's settings
    /// as the defaults. A damaged file is `Error::Corrupt`.
    pub fn open(
        dir: impl AsRef<Path>,
        coordinator: &CoordinatorConfig,
        share: &ShareConfig,
    ) -> Result<FileGroupConfigStore> {
        let path = dir.as_ref().join(GROUP_CONFIGS_FILE);
        let configs = match crate::storage::read_checkpoint(&path)? {
            None => GroupConfigs::new(),
            Some(payload) => decode(&payload, &path.display().to_string())?,
        };
        Ok(FileGroupConfigStore {
            path,
            configs: RwLock::new(Arc::new(configs)),
            coordinator: coordinator.clone(),
            share: share.clone(),
        })
    }
}

impl GroupConfigStore for FileGroupConfigStore {
    fn configs(&self) -> Arc<GroupConfigs> {
        self.configs.read().clone()
    }

    fn defaults(&self) -> (&CoordinatorConfig, &ShareConfig) {
        (&self.coordinator, &self.share)
    }

    fn store(&self, group: &str, changes: &[GroupConfigChange]) -> Result<()> {
        let mut configs = self.configs.write();
        let mut next = (**configs).clone();
        apply_changes(&mut next, group, changes, &self.coordinator, &self.share)?;
        crate::storage::write_checkpoint(&self.path, &encode(&next))?;
        *configs = Arc::new(next);
        Ok(())
    }
}

/// The `group-configs` payload: version (`u8`), then the configs as [`put_configs`]
/// writes them.
fn encode(configs: &GroupConfigs) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(GROUP_CONFIGS_VERSION);
    put_configs(&mut w, configs);
    w.into_bytes()
}

/// Every group's overrides: a count (`u32`) of groups, each a group id and a count
/// (`u32`) of (key, value) strings (the `group-configs` file, and a cluster's metadata
/// image since its version 9).
pub(crate) fn put_configs(w: &mut Writer, configs: &GroupConfigs) {
    w.u32(configs.len() as u32);
    for (group, overrides) in configs {
        w.str(group);
        w.u32(overrides.len() as u32);
        for (k, v) in overrides {
            w.str(k);
            w.str(v);
        }
    }
}

/// Reads what [`put_configs`] wrote, checking every value as a change would be.
pub(crate) fn get_configs(r: &mut Reader<'_>) -> Result<GroupConfigs> {
    let mut configs = GroupConfigs::new();
    for _ in 0..r.count(8)? {
        let group = r.str()?;
        let mut overrides = GroupOverrides::new();
        for _ in 0..r.count(8)? {
            let (k, v) = (r.str()?, r.str()?);
            validate_value(&group, &k, &v, None).map_err(|e| r.error(e.to_string()))?;
            overrides.insert(k, v);
        }
        configs.insert(group, overrides);
    }
    Ok(configs)
}

/// Reads what [`encode`] wrote.
fn decode(payload: &[u8], location: &str) -> Result<GroupConfigs> {
    let mut r = Reader::new(payload, location);
    let version = r.u8()?;
    if version != GROUP_CONFIGS_VERSION {
        return Err(r.error(format!(
            "group configs version {version}; this version reads {GROUP_CONFIGS_VERSION}"
        )));
    }
    let configs = get_configs(&mut r)?;
    r.finish()?;
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(k: &str, v: &str) -> GroupConfigChange {
        (k.to_string(), Some(v.to_string()))
    }

    #[test]
    fn values_are_checked_against_kafka_bounds_and_kept_across_a_reopen() {
        let (c, s) = (CoordinatorConfig::default(), ShareConfig::default());
        let dir = tempfile::tempdir().unwrap();
        let store = FileGroupConfigStore::open(dir.path(), &c, &s).unwrap();
        let refused = [
            set("nope", "1"),
            set(CONSUMER_SESSION_TIMEOUT_MS, "44999"),
            set(SHARE_RECORD_LOCK_DURATION_MS, "60001"),
            set(SHARE_HEARTBEAT_INTERVAL_MS, "soon"),
            set(SHARE_AUTO_OFFSET_RESET, "middle"),
            set(SHARE_ISOLATION_LEVEL, "committed"),
        ];
        for change in refused {
            let e = store.apply("g", std::slice::from_ref(&change)).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidConfig { key, reason } if *key == change.0 && reason.contains("\"g\"")),
                "{e}"
            );
        }
        assert!(store.overrides("g").is_empty());

        store
            .apply(
                "g",
                &[
                    set(SHARE_AUTO_OFFSET_RESET, "earliest"),
                    set(SHARE_RECORD_LOCK_DURATION_MS, "15000"),
                    set(SHARE_ISOLATION_LEVEL, "read_committed"),
                ],
            )
            .unwrap();
        // Removing an override that does not exist, or of a known key, is fine.
        store
            .apply("g", &[(SHARE_RECORD_LOCK_DURATION_MS.into(), None)])
            .unwrap();
        let reopened = FileGroupConfigStore::open(dir.path(), &c, &s).unwrap();
        let described = reopened.describe("g");
        assert_eq!(
            described,
            vec![
                (CONSUMER_SESSION_TIMEOUT_MS.into(), "45000".into(), false),
                (CONSUMER_HEARTBEAT_INTERVAL_MS.into(), "5000".into(), false),
                (SHARE_SESSION_TIMEOUT_MS.into(), "45000".into(), false),
                (SHARE_HEARTBEAT_INTERVAL_MS.into(), "5000".into(), false),
                (SHARE_RECORD_LOCK_DURATION_MS.into(), "30000".into(), false),
                (SHARE_AUTO_OFFSET_RESET.into(), "earliest".into(), true),
                (SHARE_ISOLATION_LEVEL.into(), "read_committed".into(), true),
            ]
        );
        assert!(reopened.share_reads_committed("g"));
        assert!(!reopened.share_reads_committed("other"));
        assert_eq!(
            share_read_overrides(&reopened.overrides("g")),
            ShareReadOverrides {
                read_committed: Some(true),
                earliest: Some(true),
            }
        );
        assert_eq!(
            share_read_overrides(&reopened.overrides("other")),
            ShareReadOverrides::default()
        );
        assert!(reopened.overrides("other").is_empty());
    }

    #[test]
    fn values_are_checked_against_the_brokers_bounds() {
        let (mut c, mut s) = (CoordinatorConfig::default(), ShareConfig::default());
        s.max_record_lock_duration = std::time::Duration::from_secs(120);
        c.consumer_min_session_timeout = std::time::Duration::from_secs(10);
        c.consumer_max_session_timeout = std::time::Duration::from_secs(90);
        c.consumer_min_heartbeat_interval = std::time::Duration::from_secs(1);
        c.consumer_max_heartbeat_interval = std::time::Duration::from_secs(3);
        let mut configs = GroupConfigs::new();
        // Within the broker's bounds, outside Kafka's defaults.
        apply_changes(
            &mut configs,
            "g",
            &[
                set(CONSUMER_SESSION_TIMEOUT_MS, "10000"),
                set(CONSUMER_HEARTBEAT_INTERVAL_MS, "1000"),
            ],
            &c,
            &s,
        )
        .unwrap();
        apply_changes(
            &mut configs,
            "g",
            &[
                set(CONSUMER_SESSION_TIMEOUT_MS, "90000"),
                set(SHARE_RECORD_LOCK_DURATION_MS, "120000"),
            ],
            &c,
            &s,
        )
        .unwrap();
        // Out of them: refused, naming the bound.
        for (key, value, bound) in [
            (
                CONSUMER_SESSION_TIMEOUT_MS,
                "9999",
                "group.consumer.min.session.timeout.ms (10000)",
            ),
            (
                CONSUMER_SESSION_TIMEOUT_MS,
                "90001",
                "group.consumer.max.session.timeout.ms (90000)",
            ),
            (
                CONSUMER_HEARTBEAT_INTERVAL_MS,
                "999",
                "group.consumer.min.heartbeat.interval.ms (1000)",
            ),
            (
                CONSUMER_HEARTBEAT_INTERVAL_MS,
                "5000",
                "group.consumer.max.heartbeat.interval.ms (3000)",
            ),
            (
                SHARE_SESSION_TIMEOUT_MS,
                "44999",
                "group.share.min.session.timeout.ms (45000)",
            ),
            (
                SHARE_RECORD_LOCK_DURATION_MS,
                "120001",
                "group.share.max.record.lock.duration.ms (120000)",
            ),
        ] {
            let e = apply_changes(&mut configs, "g", &[set(key, value)], &c, &s).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidConfig { key: k, reason } if k == key && reason.contains(bound)),
                "{key}={value}: {e}"
            );
        }
        assert_eq!(configs["g"][CONSUMER_SESSION_TIMEOUT_MS], "90000");
    }

    #[test]
    fn a_heartbeat_interval_must_stay_below_the_session_timeout() {
        let (mut c, s) = (CoordinatorConfig::default(), ShareConfig::default());
        c.consumer_session_timeout = std::time::Duration::from_secs(10);
        let mut configs = GroupConfigs::new();
        let e = apply_changes(
            &mut configs,
            "g",
            &[set(CONSUMER_HEARTBEAT_INTERVAL_MS, "15000")],
            &c,
            &s,
        )
        .unwrap_err();
        assert!(e.to_string().contains("must be less than"), "{e}");
        apply_changes(
            &mut configs,
            "g",
            &[
                set(CONSUMER_SESSION_TIMEOUT_MS, "50000"),
                set(CONSUMER_HEARTBEAT_INTERVAL_MS, "15000"),
            ],
            &c,
            &s,
        )
        .unwrap();
        assert_eq!(configs["g"].len(), 2);
    }

    /// Group configs fixed by a test (which may set a session shorter than Kafka's
    /// bounds, to wait for it): what the coordinators read; a change is refused.
    #[derive(Debug)]
    struct Fixed(Arc<GroupConfigs>, CoordinatorConfig, ShareConfig);

    impl Fixed {
        fn with(group: &str, overrides: &[(&str, &str)]) -> Arc<Fixed> {
            let one: GroupOverrides = overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let configs = Arc::new([(group.to_string(), one)].into());
            Arc::new(Fixed(configs, Default::default(), Default::default()))
        }
    }

    impl GroupConfigStore for Fixed {
        fn configs(&self) -> Arc<GroupConfigs> {
            Arc::clone(&self.0)
        }

        fn defaults(&self) -> (&CoordinatorConfig, &ShareConfig) {
            (&self.1, &self.2)
        }

        fn store(&self, group: &str, _: &[GroupConfigChange]) -> Result<()> {
            Err(Error::InvalidConfig {
                key: group.to_string(),
                reason: "this test's group configs are fixed".into(),
            })
        }
    }

    fn consumer_join(group: &str, member: &str) -> super::super::ConsumerHeartbeatRequest {
        super::super::ConsumerHeartbeatRequest {
            group_id: group.into(),
            member_id: member.into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            ..Default::default()
        }
    }

    #[test]
    fn a_consumer_group_heartbeats_and_expires_by_its_own_settings() {
        use std::time::{Duration, Instant};
        let c = super::super::GroupCoordinator::new(CoordinatorConfig::default());
        c.set_group_configs(Fixed::with(
            "quick",
            &[
                (CONSUMER_SESSION_TIMEOUT_MS, "200"),
                (CONSUMER_HEARTBEAT_INTERVAL_MS, "50"),
            ],
        ));
        c.start_reaper().unwrap();
        let topics = BTreeMap::from([("t".to_string(), 2)]);
        let quick = c
            .consumer_group_heartbeat(consumer_join("quick", "a"), &topics)
            .unwrap();
        assert_eq!(quick.heartbeat_interval, Duration::from_millis(50));
        let other = c
            .consumer_group_heartbeat(consumer_join("other", "a"), &topics)
            .unwrap();
        assert_eq!(other.heartbeat_interval, Duration::from_secs(5));
        // The member of `quick` is gone after its 200 ms session, the other's (45 s)
        // stays.
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.group_type("quick").is_some() {
            assert!(Instant::now() < deadline, "the member never expired");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(c.consumer_group_describe("other").unwrap().members.len(), 1);
        c.shutdown();
    }

    #[test]
    fn a_share_group_heartbeats_and_expires_by_its_own_settings() {
        use std::time::{Duration, Instant};
        let share = super::super::ShareCoordinator::new(ShareConfig::default());
        share.set_group_configs(Fixed::with(
            "slow",
            &[
                (SHARE_SESSION_TIMEOUT_MS, "60000"),
                (SHARE_HEARTBEAT_INTERVAL_MS, "12000"),
            ],
        ));
        let topics: BTreeMap<String, i32> = [("t".to_string(), 1)].into();
        let join = |group: &str| super::super::ShareHeartbeat {
            group_id: group.into(),
            member_id: "m".into(),
            member_epoch: 0,
            subscribed_topic_names: Some(vec!["t".into()]),
            ..Default::default()
        };
        let t0 = Instant::now();
        let slow = share.heartbeat(join("slow"), &topics, t0).unwrap();
        assert_eq!(slow.heartbeat_interval, Duration::from_secs(12));
        let other = share.heartbeat(join("other"), &topics, t0).unwrap();
        assert_eq!(other.heartbeat_interval, Duration::from_secs(5));
        // After 50 s the default 45 s session has ended, the group's 60 s one not.
        share.expire_members(t0 + Duration::from_secs(50)).unwrap();
        assert_eq!(share.describe("slow").len(), 1);
        assert!(share.describe("other").is_empty());
        share.expire_members(t0 + Duration::from_secs(61)).unwrap();
        assert!(share.describe("slow").is_empty());
    }
}
