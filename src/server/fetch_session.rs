//! Fetch sessions (KIP-227, Fetch v7+): a client that fetches many partitions names
//! them once, in a full fetch, and then sends only what changed (a new fetch offset, a
//! partition added or forgotten) in incremental fetches; the broker answers an
//! incremental fetch with only the partitions that have news.
//!
//! As Kafka's `FetchSessionCache`:
//! - `session_epoch` -1 (the request's default) is a sessionless full fetch; a
//!   non-zero `session_id` with it closes that session. Epoch 0 is a full fetch that
//!   closes `session_id` (if not 0) and opens a new session: its id is in the response,
//!   and the client's next epoch is 1. An epoch above 0 is an incremental fetch of
//!   `session_id`: FETCH_SESSION_ID_NOT_FOUND if the broker does not hold it,
//!   INVALID_FETCH_SESSION_EPOCH if its epoch is not the one expected next (then the
//!   session is left as it was).
//! - An incremental fetch updates the session's partitions with those it lists (fetch
//!   offset, `partition_max_bytes`, leader epoch), then removes its forgotten ones, and
//!   reads every partition of the session. A partition is in the response if it has
//!   records or an error, or if its high watermark, last stable offset or log start
//!   offset differs from what the session last answered for it.
//! - At most `slots` sessions are held (Kafka's
//!   `max.incremental.fetch.session.cache.slots`, 1,000). When full, a new session takes
//!   the slot of the session least recently used if that one has been idle for longer
//!   than [`EVICTION`] (Kafka's `min.incremental.fetch.session.eviction.ms`, 120 s);
//!   otherwise a follower's session evicts the consumer session with the fewest
//!   partitions, and a consumer's session evicts a consumer session at least
//!   [`EVICTION`] old that has fewer partitions than the newcomer. A full fetch that
//!   finds no slot is answered sessionless (`session_id` 0), and its client keeps
//!   sending full fetches.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kafka_protocol::messages::FetchRequest;
use parking_lot::Mutex;

use crate::error::{Error, Result};

/// Kafka's default for `max.incremental.fetch.session.cache.slots`.
pub(crate) const DEFAULT_SLOTS: usize = 1_000;

/// Kafka's `min.incremental.fetch.session.eviction.ms`: a session idle longer is evicted
/// for a new one, and a consumer's session younger than this is never evicted by another
/// consumer's.
pub(crate) const EVICTION: Duration = Duration::from_secs(120);

/// The request's `session_epoch` of a full fetch that opens a session.
const INITIAL_EPOCH: i32 = 0;
/// The request's `session_epoch` of a sessionless fetch (or one closing its session).
const FINAL_EPOCH: i32 = -1;

/// One partition to read: as a request lists it, or as its session holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FetchPartition {
    /// The partition's index.
    pub index: i32,
    /// The offset to read from.
    pub offset: i64,
    /// `partition_max_bytes`.
    pub max_bytes: usize,
    /// `current_leader_epoch` (-1 for none).
    pub current_leader_epoch: i32,
}

/// A topic's partitions to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchTopic {
    /// The topic's name (empty from v13, where topics go by id).
    pub name: String,
    /// The topic's id (v13+; nil before).
    pub topic_id: uuid::Uuid,
    /// Its partitions, in order.
    pub partitions: Vec<FetchPartition>,
}

/// What a response says of a partition besides its records: an incremental fetch
/// answers a partition again only once one of these moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answered {
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset.
    pub last_stable_offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
}

/// The key of a topic in a session: its name, or `#` and its id when the request names
/// topics by id (v13+; `#` is no character of a topic name).
pub(crate) fn topic_key(name: &str, id: uuid::Uuid) -> String {
    if name.is_empty() && !id.is_nil() {
        format!("#{id}")
    } else {
        name.to_string()
    }
}

/// The topic a [`topic_key`] stands for: its name and id.
fn from_key(key: &str) -> (String, uuid::Uuid) {
    match key.strip_prefix('#').map(uuid::Uuid::parse_str) {
        Some(Ok(id)) => (String::new(), id),
        _ => (key.to_string(), uuid::Uuid::nil()),
    }
}

/// A fetch resolved against the session cache: what to read and how to answer.
#[derive(Debug)]
pub(crate) struct SessionFetch {
    /// The session id to answer (0: none).
    pub session_id: i32,
    /// Whether only partitions with news are answered.
    pub incremental: bool,
    /// Every partition to read: the request's for a full fetch, the session's for an
    /// incremental one.
    pub topics: Vec<FetchTopic>,
}

struct Cached {
    fetch: FetchPartition,
    answered: Option<Answered>,
}

struct Session {
    privileged: bool,
    /// The epoch the next incremental fetch must carry.
    epoch: i32,
    /// Its partitions by topic (its [`topic_key`]) and index: a fetch's answer looks
    /// its topic up once, then each partition by index.
    partitions: BTreeMap<String, BTreeMap<i32, Cached>>,
    created: Instant,
    last_used: Instant,
}

impl Session {
    /// Kafka's `EvictableKey` order: consumers before followers, then fewer partitions
    /// first, then the session id.
    fn key(&self, id: i32) -> (bool, usize, i32) {
        (self.privileged, self.size(), id)
    }

    /// The number of partitions in the session.
    fn size(&self) -> usize {
        self.partitions.values().map(BTreeMap::len).sum()
    }
}

/// The broker's fetch sessions. See the module documentation.
pub(crate) struct FetchSessions {
    slots: usize,
    sessions: Mutex<HashMap<i32, Session>>,
    ids: RandomState,
    /// Ids drawn so far: each draw hashes a new number.
    draws: AtomicU64,
}

impl FetchSessions {
    /// A cache of at most `slots` sessions (0 turns sessions off: every fetch is
    /// answered sessionless).
    pub(crate) fn new(slots: usize) -> FetchSessions {
        FetchSessions {
            slots,
            sessions: Mutex::new(HashMap::new()),
            ids: RandomState::new(),
            draws: AtomicU64::new(0),
        }
    }

    /// The number of sessions held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    /// Resolves `request` (a follower's if `privileged`) against the cache at `now`:
    /// closes, opens or updates its session, and says what to read.
    pub(crate) fn begin(
        &self,
        request: &FetchRequest,
        privileged: bool,
        now: Instant,
    ) -> Result<SessionFetch> {
        let (id, epoch) = (request.session_id, request.session_epoch);
        let mut sessions = self.sessions.lock();
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if id != 0 {
                sessions.remove(&id);
            }
            let topics = requested(request);
            let session_id = if epoch == INITIAL_EPOCH {
                self.open(&mut sessions, &topics, privileged, now)
            } else {
                0
            };
            return Ok(SessionFetch {
                session_id,
                incremental: false,
                topics,
            });
        }
        let session = sessions
            .get_mut(&id)
            .ok_or(Error::FetchSessionIdNotFound { session_id: id })?;
        if session.epoch != epoch {
            return Err(Error::InvalidFetchSessionEpoch {
                session_id: id,
                expected: session.epoch,
                epoch,
            });
        }
        for topic in requested(request) {
            let cached = session
                .partitions
                .entry(topic_key(&topic.name, topic.topic_id))
                .or_default();
            for fetch in topic.partitions {
                cached
                    .entry(fetch.index)
                    .and_modify(|c| c.fetch = fetch)
                    .or_insert(Cached {
                        fetch,
                        answered: None,
                    });
            }
        }
        for forgotten in &request.forgotten_topics_data {
            let key = topic_key(&forgotten.topic.0, forgotten.topic_id);
            if let Some(cached) = session.partitions.get_mut(&key) {
                for index in &forgotten.partitions {
                    cached.remove(index);
                }
                if cached.is_empty() {
                    session.partitions.remove(&key);
                }
            }
        }
        session.epoch = next_epoch(epoch);
        session.last_used = now;
        let topics: Vec<FetchTopic> = session
            .partitions
            .iter()
            .map(|(key, cached)| {
                let (name, topic_id) = from_key(key);
                FetchTopic {
                    name,
                    topic_id,
                    partitions: cached.values().map(|c| c.fetch).collect(),
                }
            })
            .collect();
        Ok(SessionFetch {
            session_id: id,
            incremental: true,
            topics,
        })
    }

    /// Notes what a fetch of `session_id` answers for `topic`'s partitions and keeps in
    /// `partitions` only those to send: all of them for a full fetch, those with `news`
    /// (records or an error) or a moved [`Answered`] for an incremental one. `view`
    /// gives a partition's index, answer and news.
    pub(crate) fn retain<T>(
        &self,
        fetch: &SessionFetch,
        topic: &str,
        partitions: &mut Vec<T>,
        view: impl Fn(&T) -> (i32, Answered, bool),
    ) {
        if fetch.session_id == 0 {
            return;
        }
        let mut sessions = self.sessions.lock();
        let Some(session) = sessions.get_mut(&fetch.session_id) else {
            // Evicted meanwhile: this answer is whole, as a full fetch's.
            return;
        };
        let Some(cached_topic) = session.partitions.get_mut(topic) else {
            return;
        };
        partitions.retain(|p| {
            let (index, answered, news) = view(p);
            let Some(cached) = cached_topic.get_mut(&index) else {
                return true;
            };
            let moved = cached.answered != Some(answered);
            cached.answered = Some(answered);
            !fetch.incremental || news || moved
        });
    }

    /// Opens a session for `topics` if a slot is free or can be freed; its id, or 0.
    fn open(
        &self,
        sessions: &mut HashMap<i32, Session>,
        topics: &[FetchTopic],
        privileged: bool,
        now: Instant,
    ) -> i32 {
        let size = topics.iter().map(|t| t.partitions.len()).sum::<usize>();
        if self.slots == 0
            || (sessions.len() >= self.slots && !evict(sessions, privileged, size, now))
        {
            return 0;
        }
        // A random id (positive i32), not one in use: an id a restarted broker gave
        // out before is unlikely to be taken for one of its new sessions.
        let mut id = 0;
        while id <= 0 || sessions.contains_key(&id) {
            let draw = self.draws.fetch_add(1, Ordering::Relaxed);
            id = (self.ids.hash_one(draw) >> 33) as i32;
        }
        let mut partitions: BTreeMap<String, BTreeMap<i32, Cached>> = BTreeMap::new();
        for t in topics {
            let cached = partitions
                .entry(topic_key(&t.name, t.topic_id))
                .or_default();
            for p in &t.partitions {
                cached.insert(
                    p.index,
                    Cached {
                        fetch: *p,
                        answered: None,
                    },
                );
            }
        }
        sessions.insert(
            id,
            Session {
                privileged,
                epoch: next_epoch(INITIAL_EPOCH),
                partitions,
                created: now,
                last_used: now,
            },
        );
        id
    }
}

/// Frees a slot for a new session of `size` partitions (a follower's if
/// `privileged`), as Kafka's `FetchSessionCache.tryEvict`; false if none may go.
fn evict(
    sessions: &mut HashMap<i32, Session>,
    privileged: bool,
    size: usize,
    now: Instant,
) -> bool {
    let stale = sessions
        .iter()
        .min_by_key(|(id, s)| (s.last_used, **id))
        .filter(|(_, s)| now.saturating_duration_since(s.last_used) > EVICTION)
        .map(|(id, _)| *id);
    let victim = stale.or_else(|| {
        // The least valuable consumer session the newcomer may evict.
        let (id, least) = sessions
            .iter()
            .filter(|(_, s)| !s.privileged)
            .filter(|(_, s)| privileged || now.saturating_duration_since(s.created) > EVICTION)
            .map(|(id, s)| (*id, s.key(*id)))
            .min_by_key(|(_, key)| *key)?;
        // A newcomer's key has id 0: it wins a tie of size only against no one.
        ((privileged, size, 0) > least).then_some(id)
    });
    victim.is_some_and(|id| sessions.remove(&id).is_some())
}

/// The epoch after `epoch` (it wraps to 1: 0 and -1 have their meanings).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

/// The partitions `request` lists.
fn requested(request: &FetchRequest) -> Vec<FetchTopic> {
    request
        .topics
        .iter()
        // A topic listed without partitions asks for nothing (Kafka reads the request
        // partition by partition): it is neither answered nor added to a session.
        .filter(|t| !t.partitions.is_empty())
        .map(|t| FetchTopic {
            name: t.topic.0.to_string(),
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| FetchPartition {
                    index: p.partition,
                    offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes.max(0) as usize,
                    current_leader_epoch: p.current_leader_epoch,
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::fetch_request::{
        FetchPartition as WirePartition, FetchTopic as WireTopic, ForgottenTopic,
    };
    use kafka_protocol::protocol::StrBytes;

    fn name(s: &str) -> TopicName {
        TopicName(StrBytes::from_string(s.to_string()))
    }

    /// A fetch of `partitions` of topic "t" at offset 10 each.
    fn fetch(id: i32, epoch: i32, partitions: &[i32]) -> FetchRequest {
        FetchRequest::default()
            .with_session_id(id)
            .with_session_epoch(epoch)
            .with_topics(vec![
                WireTopic::default().with_topic(name("t")).with_partitions(
                    partitions
                        .iter()
                        .map(|p| {
                            WirePartition::default()
                                .with_partition(*p)
                                .with_fetch_offset(10)
                                .with_partition_max_bytes(1024)
                        })
                        .collect(),
                ),
            ])
    }

    fn indexes(f: &SessionFetch) -> Vec<i32> {
        f.topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.index))
            .collect()
    }

    fn at(hw: i64) -> Answered {
        Answered {
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: 0,
        }
    }

    #[test]
    fn a_session_answers_only_partitions_with_news_and_follows_its_epochs() {
        let cache = FetchSessions::new(DEFAULT_SLOTS);
        let now = Instant::now();
        let full = cache.begin(&fetch(0, 0, &[0, 1, 2]), false, now).unwrap();
        assert!(full.session_id > 0 && !full.incremental);
        let mut answer = vec![(0, at(5), false), (1, at(5), false), (2, at(5), false)];
        cache.retain(&full, "t", &mut answer, |p| *p);
        assert_eq!(answer.len(), 3, "a full fetch answers every partition");

        // Epoch 1: one partition listed with a new offset, one forgotten.
        let mut incremental = fetch(full.session_id, 1, &[1]);
        incremental.topics[0].partitions[0].fetch_offset = 11;
        incremental.forgotten_topics_data = vec![
            ForgottenTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![2]),
        ];
        let inc = cache.begin(&incremental, false, now).unwrap();
        assert!(inc.incremental);
        assert_eq!(
            indexes(&inc),
            vec![0, 1],
            "the session's partitions, less the forgotten"
        );
        assert_eq!(inc.topics[0].partitions[1].offset, 11);
        assert_eq!(
            inc.topics[0].partitions[0].offset, 10,
            "kept from the full fetch"
        );
        // Partition 0 unchanged, partition 1's high watermark moved.
        let mut answer = vec![(0, at(5), false), (1, at(6), false)];
        cache.retain(&inc, "t", &mut answer, |p| *p);
        assert_eq!(answer.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1]);
        // Records are news even when nothing else moved.
        let inc = cache
            .begin(&fetch(full.session_id, 2, &[]), false, now)
            .unwrap();
        let mut answer = vec![(0, at(5), true), (1, at(6), false)];
        cache.retain(&inc, "t", &mut answer, |p| *p);
        assert_eq!(answer.iter().map(|p| p.0).collect::<Vec<_>>(), vec![0]);

        // The same epoch again, and an epoch from the future, are refused.
        for epoch in [2, 7] {
            let e = cache.begin(&fetch(full.session_id, epoch, &[]), false, now);
            assert!(
                matches!(e, Err(Error::InvalidFetchSessionEpoch { expected: 3, .. })),
                "{e:?}"
            );
        }
        // The session was left as it was: epoch 3 goes through.
        assert!(
            cache
                .begin(&fetch(full.session_id, 3, &[]), false, now)
                .is_ok()
        );
        // Epoch -1 closes it.
        let closed = cache
            .begin(&fetch(full.session_id, -1, &[0]), false, now)
            .unwrap();
        assert_eq!(closed.session_id, 0);
        let e = cache.begin(&fetch(full.session_id, 4, &[]), false, now);
        assert!(
            matches!(e, Err(Error::FetchSessionIdNotFound { .. })),
            "{e:?}"
        );
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_topic_listed_without_partitions_is_not_added_to_the_session() {
        let cache = FetchSessions::new(DEFAULT_SLOTS);
        let now = Instant::now();
        let mut full = fetch(0, 0, &[0]);
        full.topics
            .push(WireTopic::default().with_topic(name("empty")));
        let opened = cache.begin(&full, false, now).unwrap();
        let names = |f: &SessionFetch| f.topics.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&opened),
            vec!["t"],
            "a full fetch answers no empty topic"
        );
        let mut incremental = fetch(opened.session_id, 1, &[]);
        incremental
            .topics
            .push(WireTopic::default().with_topic(name("other")));
        let inc = cache.begin(&incremental, false, now).unwrap();
        assert_eq!(names(&inc), vec!["t"], "nor does an incremental one");
        let sessions = cache.sessions.lock();
        let session = &sessions[&opened.session_id];
        assert_eq!(
            session.partitions.keys().collect::<Vec<_>>(),
            vec!["t"],
            "the session holds no entry for them"
        );
    }

    #[test]
    fn a_full_fetch_at_epoch_zero_replaces_its_old_session() {
        let cache = FetchSessions::new(DEFAULT_SLOTS);
        let now = Instant::now();
        let first = cache.begin(&fetch(0, 0, &[0]), false, now).unwrap();
        let second = cache
            .begin(&fetch(first.session_id, 0, &[0]), false, now)
            .unwrap();
        assert_ne!(first.session_id, second.session_id);
        assert_eq!(cache.len(), 1);
        let e = cache.begin(&fetch(first.session_id, 1, &[]), false, now);
        assert!(
            matches!(e, Err(Error::FetchSessionIdNotFound { session_id }) if session_id == first.session_id)
        );
    }

    #[test]
    fn a_full_cache_evicts_by_kafkas_rules() {
        let cache = FetchSessions::new(2);
        let t0 = Instant::now();
        let small = cache
            .begin(&fetch(0, 0, &[0]), false, t0)
            .unwrap()
            .session_id;
        let big = cache
            .begin(&fetch(0, 0, &[0, 1, 2]), false, t0)
            .unwrap()
            .session_id;
        // Full, and both sessions young: a consumer gets no session.
        assert_eq!(
            cache
                .begin(&fetch(0, 0, &[0, 1]), false, t0)
                .unwrap()
                .session_id,
            0
        );
        // A follower evicts the consumer session with the fewest partitions.
        let follower = cache
            .begin(&fetch(0, 0, &[0]), true, t0)
            .unwrap()
            .session_id;
        assert!(follower > 0);
        assert!(cache.begin(&fetch(small, 1, &[]), false, t0).is_err());
        // Past the eviction age, a consumer may evict a consumer session with fewer
        // partitions (not one of as many), never a follower's.
        let later = t0 + EVICTION + Duration::from_secs(1);
        assert!(
            cache
                .begin(&fetch(big, 1, &[]), false, later - Duration::from_secs(2))
                .is_ok()
        );
        assert!(
            cache
                .begin(
                    &fetch(follower, 1, &[]),
                    true,
                    later - Duration::from_secs(2)
                )
                .is_ok()
        );
        assert_eq!(
            cache
                .begin(&fetch(0, 0, &[0, 1, 2]), false, later)
                .unwrap()
                .session_id,
            0
        );
        let bigger = cache
            .begin(&fetch(0, 0, &[0, 1, 2, 3]), false, later)
            .unwrap()
            .session_id;
        assert!(bigger > 0);
        assert!(
            cache.begin(&fetch(big, 2, &[]), false, later).is_err(),
            "evicted"
        );
        assert!(cache.begin(&fetch(follower, 2, &[]), true, later).is_ok());
        // A session idle longer than the eviction time goes first, whatever it is.
        let idle = later + EVICTION + Duration::from_secs(1);
        assert!(cache.begin(&fetch(bigger, 1, &[]), false, idle).is_ok());
        let newcomer = cache
            .begin(&fetch(0, 0, &[0]), false, idle)
            .unwrap()
            .session_id;
        assert!(newcomer > 0);
        assert!(
            cache.begin(&fetch(follower, 3, &[]), true, idle).is_err(),
            "idle: evicted"
        );
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn no_slot_means_sessionless_fetches() {
        let cache = FetchSessions::new(0);
        let f = cache
            .begin(&fetch(0, 0, &[0]), false, Instant::now())
            .unwrap();
        assert_eq!((f.session_id, f.incremental), (0, false));
        assert_eq!(indexes(&f), vec![0]);
    }
}
