//! Client quotas (Kafka's KIP-13, KIP-55 and KIP-124): byte rates of produce and fetch
//! and a share of request time per user, client id or both, with defaults; where they
//! are kept (the [`QuotaStore`] trait, its file implementation in a single node's data
//! directory, `client-quotas`, a crash-safe TLCP file; see docs/format.md), which quota
//! applies to a request (Kafka's precedence, [`quota_for`]), and the rate each client is
//! measured at ([`Throttler`]).
//!
//! A client over its quota is not refused: the server holds its response for the
//! throttle time the throttler gives and says so in `throttle_time_ms` (see the
//! server's `throttle` module).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result};
use crate::storage::codec::{Reader, Writer};

/// The file of the quotas in a single node's data directory.
pub(crate) const QUOTAS_FILE: &str = "client-quotas";

/// Payload version of the `client-quotas` file.
const QUOTAS_VERSION: u8 = 1;

/// Bytes per second a client may produce (Kafka's `producer_byte_rate`).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Bytes per second a client may fetch (Kafka's `consumer_byte_rate`).
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Percentage of one thread's time a client's requests may take (Kafka's
/// `request_percentage`; 100 is one thread).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";

/// Kafka's entity type of a user quota.
pub const ENTITY_USER: &str = "user";
/// Kafka's entity type of a client id quota.
pub const ENTITY_CLIENT_ID: &str = "client-id";

/// The quota keys this server enforces.
pub const QUOTA_KEYS: [&str; 3] = [PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE];

/// One part of a quota entity: a name, or the default of its type (Kafka's null name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntityName {
    /// The default: every user (or client id) without a quota of its own.
    Default,
    /// This user or client id.
    Name(String),
}

/// Whom a quota is for: a user, a client id, or both (Kafka's `ClientQuotaEntity`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct QuotaEntity {
    /// The user (the principal's name, `ANONYMOUS` without authentication).
    pub user: Option<EntityName>,
    /// The client id.
    pub client_id: Option<EntityName>,
}

impl fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = |n: &EntityName| match n {
            EntityName::Default => "<default>".to_string(),
            EntityName::Name(s) => format!("{s:?}"),
        };
        match (&self.user, &self.client_id) {
            (Some(u), Some(c)) => write!(f, "user {} client-id {}", part(u), part(c)),
            (Some(u), None) => write!(f, "user {}", part(u)),
            (None, Some(c)) => write!(f, "client-id {}", part(c)),
            (None, None) => write!(f, "no entity"),
        }
    }
}

/// A change to one quota of one entity: set `key` to `value`, or remove it (`None`).
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaChange {
    /// Whom it is for.
    pub entity: QuotaEntity,
    /// One of [`QUOTA_KEYS`].
    pub key: String,
    /// The new value; `None` removes the quota.
    pub value: Option<f64>,
}

// Values are checked finite before they are kept (`validate_change`), so equality is
// an equivalence.
impl Eq for QuotaChange {}

/// Every entity's quotas by key.
pub type Quotas = BTreeMap<QuotaEntity, BTreeMap<String, f64>>;

/// [`Quotas`] as a cluster's metadata image keeps them (comparable as a whole: every
/// value is finite).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct QuotaTable(pub Arc<Quotas>);

impl Eq for QuotaTable {}

/// Where the quotas are kept.
pub trait QuotaStore: Send + Sync + fmt::Debug {
    /// Every entity with a quota.
    fn quotas(&self) -> Arc<Quotas>;
    /// Applies `changes` in order, durably, all or none.
    fn apply(&self, changes: &[QuotaChange]) -> Result<()>;
}

/// Checks a change as Kafka does: an entity with a user or a client id (or both), a
/// known key, and a value above zero. The error names the entity and the key.
pub fn validate_change(c: &QuotaChange) -> Result<()> {
    let invalid = |reason: String| Error::InvalidConfig {
        key: c.key.clone(),
        reason,
    };
    if c.entity.user.is_none() && c.entity.client_id.is_none() {
        return Err(invalid("a quota needs a user, a client-id or both".into()));
    }
    if !QUOTA_KEYS.contains(&c.key.as_str()) {
        return Err(invalid(format!(
            "unknown quota key for {}; known: {}",
            c.entity,
            QUOTA_KEYS.join(", ")
        )));
    }
    match c.value {
        Some(v) if !(v.is_finite() && v > 0.0) => Err(invalid(format!(
            "{v} for {} must be a number above 0",
            c.entity
        ))),
        Some(v) if c.key != REQUEST_PERCENTAGE && v.fract() != 0.0 => Err(invalid(format!(
            "{v} for {} must be a whole number of bytes per second",
            c.entity
        ))),
        _ => Ok(()),
    }
}

/// Applies `changes` to `quotas` in order, after checking each (nothing on an error).
pub fn apply_changes(quotas: &mut Quotas, changes: &[QuotaChange]) -> Result<()> {
    for c in changes {
        validate_change(c)?;
    }
    for c in changes {
        match c.value {
            Some(v) => {
                quotas
                    .entry(c.entity.clone())
                    .or_default()
                    .insert(c.key.clone(), v);
            }
            None => {
                if let Some(values) = quotas.get_mut(&c.entity) {
                    values.remove(&c.key);
                    if values.is_empty() {
                        quotas.remove(&c.entity);
                    }
                }
            }
        }
    }
    Ok(())
}

/// The quotas of a data directory, in its `client-quotas` file.
#[derive(Debug)]
pub struct FileQuotaStore {
    path: PathBuf,
    quotas: RwLock<Arc<Quotas>>,
}

impl FileQuotaStore {
    /// Reads `<dir>/client-quotas` (none yet: no quota). A damaged file is
    /// `Error::Corrupt`.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileQuotaStore> {
        let path = dir.as_ref().join(QUOTAS_FILE);
        let quotas = match crate::storage::read_checkpoint(&path)? {
            None => Quotas::new(),
            Some(payload) => decode_quotas(&payload, &path.display().to_string())?,
        };
        Ok(FileQuotaStore {
            path,
            quotas: RwLock::new(Arc::new(quotas)),
        })
    }
}

impl QuotaStore for FileQuotaStore {
    fn quotas(&self) -> Arc<Quotas> {
        self.quotas.read().clone()
    }

    fn apply(&self, changes: &[QuotaChange]) -> Result<()> {
        let mut quotas = self.quotas.write();
        let mut next = (**quotas).clone();
        apply_changes(&mut next, changes)?;
        crate::storage::write_checkpoint(&self.path, &encode_quotas(&next))?;
        *quotas = Arc::new(next);
        Ok(())
    }
}

/// The `client-quotas` payload: version (`u8`), a count (`u32`) of entities, each an
/// entity ([`put_entity`]) and a count (`u32`) of (key string, value `f64` bits as
/// `u64`).
fn encode_quotas(quotas: &Quotas) -> Vec<u8> {
    let mut w = Writer::new();
    w.u8(QUOTAS_VERSION);
    put_quotas(&mut w, quotas);
    w.into_bytes()
}

fn decode_quotas(payload: &[u8], location: &str) -> Result<Quotas> {
    let mut r = Reader::new(payload, location);
    let version = r.u8()?;
    if version != QUOTAS_VERSION {
        return Err(r.error(format!(
            "client quotas version {version}; this version reads {QUOTAS_VERSION}"
        )));
    }
    let quotas = get_quotas(&mut r)?;
    r.finish()?;
    Ok(quotas)
}

/// Every entity's quotas: a count (`u32`) of entities, each an entity ([`put_entity`])
/// and a count (`u32`) of (key string, value `f64` bits as `u64`).
pub(crate) fn put_quotas(w: &mut Writer, quotas: &Quotas) {
    w.u32(quotas.len() as u32);
    for (entity, values) in quotas {
        put_entity(w, entity);
        w.u32(values.len() as u32);
        for (k, v) in values {
            w.str(k);
            w.u64(v.to_bits());
        }
    }
}

/// Reads what [`put_quotas`] wrote, checking every value as a change would be.
pub(crate) fn get_quotas(r: &mut Reader<'_>) -> Result<Quotas> {
    let mut changes = Vec::new();
    for _ in 0..r.count(6)? {
        let entity = get_entity(r)?;
        for _ in 0..r.count(12)? {
            let key = r.str()?;
            let value = f64::from_bits(r.u64()?);
            changes.push(QuotaChange {
                entity: entity.clone(),
                key,
                value: Some(value),
            });
        }
    }
    let mut quotas = Quotas::new();
    apply_changes(&mut quotas, &changes).map_err(|e| r.error(e.to_string()))?;
    Ok(quotas)
}

/// One part of an entity: 0 absent, 1 default, 2 a name (then the string).
fn put_part(w: &mut Writer, part: &Option<EntityName>) {
    match part {
        None => w.u8(0),
        Some(EntityName::Default) => w.u8(1),
        Some(EntityName::Name(s)) => {
            w.u8(2);
            w.str(s);
        }
    }
}

fn get_part(r: &mut Reader<'_>) -> Result<Option<EntityName>> {
    match r.u8()? {
        0 => Ok(None),
        1 => Ok(Some(EntityName::Default)),
        2 => Ok(Some(EntityName::Name(r.str()?))),
        other => Err(r.error(format!("quota entity part tag {other}"))),
    }
}

/// An entity: its user part, then its client id part.
pub(crate) fn put_entity(w: &mut Writer, e: &QuotaEntity) {
    put_part(w, &e.user);
    put_part(w, &e.client_id);
}

/// Reads what [`put_entity`] wrote.
pub(crate) fn get_entity(r: &mut Reader<'_>) -> Result<QuotaEntity> {
    Ok(QuotaEntity {
        user: get_part(r)?,
        client_id: get_part(r)?,
    })
}

/// A change: its entity, key, and value (`u8` 1 then the `f64` bits) or removal (`u8` 0).
pub(crate) fn put_change(w: &mut Writer, c: &QuotaChange) {
    put_entity(w, &c.entity);
    w.str(&c.key);
    match c.value {
        Some(v) => {
            w.u8(1);
            w.u64(v.to_bits());
        }
        None => w.u8(0),
    }
}

/// Reads what [`put_change`] wrote.
pub(crate) fn get_change(r: &mut Reader<'_>) -> Result<QuotaChange> {
    let entity = get_entity(r)?;
    let key = r.str()?;
    let value = match r.u8()? {
        0 => None,
        1 => Some(f64::from_bits(r.u64()?)),
        other => Err(r.error(format!("quota value tag {other}")))?,
    };
    Ok(QuotaChange { entity, key, value })
}

/// The quota of `key` for requests of `user` with `client_id`, and whose usage counts
/// against it: the first entity in Kafka's order that has one (user and client id, user
/// and default client id, user, default user and client id, default user and default
/// client id, default user, client id, default client id). The usage is shared by
/// every client of the matched entity: `(user, "")` for a user quota, `("", client)`
/// for a client id quota, both for the others (a default applies to each user or
/// client id on its own).
pub fn quota_for(
    quotas: &Quotas,
    key: &str,
    user: &str,
    client_id: &str,
) -> Option<(f64, (String, String))> {
    use EntityName::{Default, Name};
    let u = || Some(Name(user.to_string()));
    let c = || Some(Name(client_id.to_string()));
    let both = (user.to_string(), client_id.to_string());
    let user_only = (user.to_string(), String::new());
    let client_only = (String::new(), client_id.to_string());
    let order = [
        (u(), c(), &both),
        (u(), Some(Default), &both),
        (u(), None, &user_only),
        (Some(Default), c(), &both),
        (Some(Default), Some(Default), &both),
        (Some(Default), None, &user_only),
        (None, c(), &client_only),
        (None, Some(Default), &client_only),
    ];
    order.into_iter().find_map(|(user, client_id, tags)| {
        quotas
            .get(&QuotaEntity { user, client_id })
            .and_then(|values| values.get(key))
            .map(|v| (*v, tags.clone()))
    })
}

/// A usage measured per time window, as Kafka's sampled `Rate`: the last `samples`
/// windows of `window` each.
#[derive(Debug)]
struct Sensor {
    /// (window start, total recorded in it), oldest first.
    windows: VecDeque<(Instant, f64)>,
    last_used: Instant,
}

/// How a client's usage is measured: windows of Kafka's `quota.window.size.seconds` (1 s)
/// and `quota.window.num` (11) of them.
#[derive(Debug, Clone, Copy)]
pub struct QuotaWindows {
    /// One window's length.
    pub window: Duration,
    /// How many windows the rate is measured over.
    pub samples: u32,
}

impl Default for QuotaWindows {
    fn default() -> Self {
        QuotaWindows {
            window: Duration::from_secs(1),
            samples: 11,
        }
    }
}

impl Sensor {
    fn new(now: Instant) -> Sensor {
        Sensor {
            windows: VecDeque::new(),
            last_used: now,
        }
    }

    /// Adds `value` at `now`, dropping windows older than the measured span.
    fn record(&mut self, value: f64, now: Instant, w: QuotaWindows) {
        self.last_used = now;
        let span = w.window * w.samples;
        while self
            .windows
            .front()
            .is_some_and(|(start, _)| now.duration_since(*start) >= span)
        {
            self.windows.pop_front();
        }
        match self.windows.back_mut() {
            Some((start, total)) if now.duration_since(*start) < w.window => *total += value,
            _ => self.windows.push_back((now, value)),
        }
    }

    /// The rate per second at `now` and the span it is measured over: as Kafka's
    /// `Rate`, at least `samples - 1` whole windows, so a new client's first burst is
    /// spread over that span rather than over the moment it took.
    fn rate(&self, now: Instant, w: QuotaWindows) -> (f64, Duration) {
        let span = w.window * w.samples;
        let live = self
            .windows
            .iter()
            .filter(|(start, _)| now.duration_since(*start) < span);
        let total: f64 = live.clone().map(|(_, v)| v).sum();
        let elapsed = live
            .map(|(start, _)| now.duration_since(*start))
            .max()
            .unwrap_or_default()
            .max(w.window * w.samples.saturating_sub(1));
        (total / elapsed.as_secs_f64().max(1e-3), elapsed)
    }
}

/// What a client's usage is counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// Bytes of produce requests ([`PRODUCER_BYTE_RATE`]).
    Produce,
    /// Bytes of fetch responses ([`CONSUMER_BYTE_RATE`]).
    Fetch,
    /// Time spent on requests ([`REQUEST_PERCENTAGE`]).
    Request,
}

impl QuotaKind {
    /// The quota key it is limited by.
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::Request => REQUEST_PERCENTAGE,
        }
    }
}

/// A sensor unused for this long is dropped (Kafka expires quota sensors after an hour).
const SENSOR_EXPIRY: Duration = Duration::from_secs(3600);

/// Measures clients against the quotas of a store and says how long to throttle each.
#[derive(Debug)]
pub struct Throttler {
    store: Option<Arc<dyn QuotaStore>>,
    windows: QuotaWindows,
    sensors: Mutex<HashMap<(QuotaKind, String, String), Sensor>>,
}

impl Throttler {
    /// Throttles by the quotas of `store` (none: never), measured over `windows`.
    pub fn new(store: Option<Arc<dyn QuotaStore>>, windows: QuotaWindows) -> Throttler {
        Throttler {
            store,
            windows,
            sensors: Mutex::new(HashMap::new()),
        }
    }

    /// The store, if quotas are kept.
    pub fn store(&self) -> Option<&Arc<dyn QuotaStore>> {
        self.store.as_ref()
    }

    /// Whether any quota is set (else nothing needs measuring).
    pub fn active(&self) -> bool {
        self.store.as_ref().is_some_and(|s| !s.quotas().is_empty())
    }

    /// Records `value` (bytes, or percent-seconds of request time) of `kind` for `user`
    /// with `client_id` at `now` and returns how long the client is to be throttled:
    /// zero under its quota (or with none), else Kafka's throttle time, the time over
    /// which the measured rate comes back to the quota, at most the measured span.
    pub fn record(
        &self,
        kind: QuotaKind,
        (user, client_id): (&str, &str),
        value: f64,
        now: Instant,
    ) -> Duration {
        let Some(store) = &self.store else {
            return Duration::ZERO;
        };
        let quotas = store.quotas();
        if quotas.is_empty() {
            return Duration::ZERO;
        }
        let Some((quota, (u, c))) = quota_for(&quotas, kind.key(), user, client_id) else {
            return Duration::ZERO;
        };
        let mut sensors = self.sensors.lock();
        if sensors.len() > 1024 {
            sensors.retain(|_, s| now.duration_since(s.last_used) < SENSOR_EXPIRY);
        }
        let sensor = sensors
            .entry((kind, u, c))
            .or_insert_with(|| Sensor::new(now));
        sensor.record(value, now, self.windows);
        let (rate, span) = sensor.rate(now, self.windows);
        if rate <= quota {
            return Duration::ZERO;
        }
        let max = self.windows.window * self.windows.samples;
        span.mul_f64((rate - quota) / quota).min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(user: Option<&str>, client: Option<&str>) -> QuotaEntity {
        let part = |p: Option<&str>| {
            p.map(|s| {
                if s == "<default>" {
                    EntityName::Default
                } else {
                    EntityName::Name(s.to_string())
                }
            })
        };
        QuotaEntity {
            user: part(user),
            client_id: part(client),
        }
    }

    fn set(e: QuotaEntity, key: &str, v: f64) -> QuotaChange {
        QuotaChange {
            entity: e,
            key: key.into(),
            value: Some(v),
        }
    }

    #[test]
    fn the_most_specific_entity_wins_in_kafkas_order() {
        let mut q = Quotas::new();
        apply_changes(
            &mut q,
            &[
                set(entity(None, Some("<default>")), PRODUCER_BYTE_RATE, 1.0),
                set(entity(None, Some("app")), PRODUCER_BYTE_RATE, 2.0),
                set(entity(Some("<default>"), None), PRODUCER_BYTE_RATE, 3.0),
                set(entity(Some("alice"), None), PRODUCER_BYTE_RATE, 4.0),
                set(entity(Some("alice"), Some("app")), PRODUCER_BYTE_RATE, 5.0),
            ],
        )
        .unwrap();
        let q_of = |u: &str, c: &str| quota_for(&q, PRODUCER_BYTE_RATE, u, c);
        assert_eq!(
            q_of("alice", "app"),
            Some((5.0, ("alice".into(), "app".into())))
        );
        assert_eq!(
            q_of("alice", "other"),
            Some((4.0, ("alice".into(), String::new())))
        );
        assert_eq!(
            q_of("bob", "app"),
            Some((3.0, ("bob".into(), String::new()))),
            "the default user comes before a client id"
        );
        assert_eq!(quota_for(&q, CONSUMER_BYTE_RATE, "alice", "app"), None);
        let mut only_clients = Quotas::new();
        apply_changes(
            &mut only_clients,
            &[
                set(entity(None, Some("<default>")), PRODUCER_BYTE_RATE, 1.0),
                set(entity(None, Some("app")), PRODUCER_BYTE_RATE, 2.0),
            ],
        )
        .unwrap();
        assert_eq!(
            quota_for(&only_clients, PRODUCER_BYTE_RATE, "bob", "other"),
            Some((1.0, (String::new(), "other".into()))),
            "each client id has the default on its own"
        );
    }

    #[test]
    fn bad_changes_are_refused_by_name() {
        let mut q = Quotas::new();
        for (c, needle) in [
            (
                set(entity(None, None), PRODUCER_BYTE_RATE, 1.0),
                "needs a user",
            ),
            (
                set(entity(Some("a"), None), "bogus_rate", 1.0),
                "unknown quota key",
            ),
            (
                set(entity(Some("a"), None), PRODUCER_BYTE_RATE, 0.0),
                "above 0",
            ),
            (
                set(entity(Some("a"), None), PRODUCER_BYTE_RATE, 1.5),
                "whole number",
            ),
        ] {
            let e = apply_changes(&mut q, &[c]).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        assert!(q.is_empty());
    }

    #[test]
    fn the_file_store_keeps_quotas_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileQuotaStore::open(dir.path()).unwrap();
        let alice = entity(Some("alice"), Some("<default>"));
        store
            .apply(&[
                set(alice.clone(), PRODUCER_BYTE_RATE, 1_048_576.0),
                set(alice.clone(), REQUEST_PERCENTAGE, 12.5),
            ])
            .unwrap();
        store
            .apply(&[QuotaChange {
                entity: alice.clone(),
                key: REQUEST_PERCENTAGE.into(),
                value: None,
            }])
            .unwrap();
        let reopened = FileQuotaStore::open(dir.path()).unwrap();
        let q = reopened.quotas();
        assert_eq!(q.len(), 1);
        assert_eq!(
            q[&alice],
            BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 1_048_576.0)])
        );
    }

    #[test]
    fn a_client_over_its_rate_is_throttled_for_the_time_that_brings_it_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(FileQuotaStore::open(dir.path()).unwrap());
        store
            .apply(&[set(entity(None, Some("app")), PRODUCER_BYTE_RATE, 1000.0)])
            .unwrap();
        let t = Throttler::new(Some(store), QuotaWindows::default());
        let t0 = Instant::now();
        // 10 windows of 10 s span: 10,000 bytes are within 1,000/s.
        let first = t.record(QuotaKind::Produce, ("u", "app"), 10_000.0, t0);
        assert_eq!(first, Duration::ZERO);
        // 10,000 more: 2,000/s over 10 s, twice the quota: 10 s to come back.
        let over = t.record(QuotaKind::Produce, ("u", "app"), 10_000.0, t0);
        assert_eq!(over, Duration::from_secs(10));
        assert_eq!(
            t.record(QuotaKind::Produce, ("u", "other"), 1e9, t0),
            Duration::ZERO,
            "a client without a quota is never throttled"
        );
        // Past the measured span the old usage no longer counts.
        let later = t0 + Duration::from_secs(12);
        assert_eq!(
            t.record(QuotaKind::Produce, ("u", "app"), 100.0, later),
            Duration::ZERO
        );
    }
}
