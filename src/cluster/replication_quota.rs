//! KIP-73's replication quota: the bytes a broker replicates for its throttled replicas
//! are measured against `leader.replication.throttled.rate` (what it sends as leader)
//! or `follower.replication.throttled.rate` (what it fetches as follower).
//!
//! A byte budget refilled at the rate, holding at most one second of it: the bytes are
//! counted once moved (a budget may go below zero by one fetch), and while it is spent
//! the throttled replicas that are not in sync are left out of the fetches, as Kafka's
//! `ReplicationQuotaManager` leaves them out once over quota; in-sync replicas and
//! replicas not listed as throttled are never held back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::ClusterNode;
use super::image::{LEADER_THROTTLED_RATE, UNTHROTTLED};
use crate::metrics::ThrottleStats;
use crate::storage::ThrottledReplicas;

/// A leader's throttle of one follower's fetch of one partition: the leader's quota and
/// its rate.
#[derive(Debug, Clone)]
pub(crate) struct LeaderThrottle {
    /// This node's leader quota.
    pub quota: Arc<ReplicationQuota>,
    /// `leader.replication.throttled.rate` of this node.
    pub rate: i64,
}

impl ClusterNode {
    /// The throttle of follower `replica`'s fetch of `topic`-`partition` led here: Some
    /// when this node has a leader rate, `throttled` (the partition's parsed
    /// `leader.replication.throttled.replicas`, asked for only then) lists the
    /// partition's replica on this node, and `replica` is not in sync.
    pub(crate) fn leader_throttle(
        &self,
        topic: &str,
        partition: i32,
        replica: i32,
        throttled: &dyn Fn() -> ThrottledReplicas,
    ) -> Option<LeaderThrottle> {
        let image = self.image();
        let rate = image
            .broker_configs
            .rate(self.node_id(), LEADER_THROTTLED_RATE);
        if rate == UNTHROTTLED {
            return None;
        }
        let isr = &image
            .topic(topic)?
            .partitions
            .get(usize::try_from(partition).ok()?)?
            .isr;
        throttled_as_leader(&throttled(), partition, self.node_id(), isr, replica).then(|| {
            LeaderThrottle {
                quota: self.leader_quota.clone(),
                rate,
            }
        })
    }
}

/// True if follower `replica`'s fetch of `partition` from its leader `me` is
/// leader-throttled: the topic's `leader.replication.throttled.replicas` (`listed`)
/// names the leader's replica of the partition, and `replica` is not in `isr`.
fn throttled_as_leader(
    listed: &ThrottledReplicas,
    partition: i32,
    me: i32,
    isr: &[i32],
    replica: i32,
) -> bool {
    listed.contains(partition, me) && !isr.contains(&replica)
}

/// One broker's quota of one side (leader or follower). See the module documentation.
#[derive(Debug)]
pub(crate) struct ReplicationQuota {
    /// Bytes left, when last refilled (None: never used, a full budget), and until when
    /// the throttle time is counted already.
    budget: Mutex<Budget>,
    /// Where the bytes and the throttle time are counted (the broker's metrics).
    stats: Arc<ThrottleStats>,
}

#[derive(Debug, Default)]
struct Budget {
    left: Option<(f64, Instant)>,
    throttled_until: Option<Instant>,
}

impl ReplicationQuota {
    /// A quota counting into `stats`.
    pub(crate) fn new(stats: Arc<ThrottleStats>) -> ReplicationQuota {
        ReplicationQuota {
            budget: Mutex::new(Budget::default()),
            stats,
        }
    }

    /// The budget at `now` at `rate` bytes/s.
    fn refill(b: &mut Budget, rate: i64, now: Instant) -> f64 {
        let cap = rate as f64;
        let left = match b.left {
            None => cap,
            Some((left, at)) => {
                (left + now.saturating_duration_since(at).as_secs_f64() * cap).min(cap)
            }
        };
        b.left = Some((left, now));
        left
    }

    /// How long a budget of `left` at `rate` (> 0) takes to be positive again.
    fn until_positive(left: f64, rate: i64) -> Duration {
        if left > 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((-left + 1.0) / rate as f64)
        }
    }

    /// True if the budget at `rate` bytes/s is spent at `now` (never unthrottled). A
    /// spent budget counts as throttle time until it is positive again (once, however
    /// many replicas ask meanwhile).
    pub(crate) fn is_exceeded(&self, rate: i64, now: Instant) -> bool {
        if rate == UNTHROTTLED {
            return false;
        }
        let mut b = self.budget.lock();
        let left = Self::refill(&mut b, rate, now);
        if left > 0.0 {
            return false;
        }
        let until = now + Self::until_positive(left, rate.max(1));
        let from = b.throttled_until.map_or(now, |t| t.max(now));
        if until > from {
            self.stats.record_throttle(until - from);
            b.throttled_until = Some(until);
        }
        true
    }

    /// How long until the budget at `rate` is positive again (zero if it is).
    pub(crate) fn wait(&self, rate: i64, now: Instant) -> Duration {
        if rate == UNTHROTTLED || rate <= 0 {
            return if rate <= 0 {
                Duration::from_secs(1)
            } else {
                Duration::ZERO
            };
        }
        let left = Self::refill(&mut self.budget.lock(), rate, now);
        Self::until_positive(left, rate)
    }

    /// Counts `bytes` moved for throttled replicas at `now` against `rate`.
    pub(crate) fn record(&self, rate: i64, bytes: usize, now: Instant) {
        if rate == UNTHROTTLED {
            return;
        }
        let mut b = self.budget.lock();
        let left = Self::refill(&mut b, rate, now);
        b.left = Some((left - bytes as f64, now));
        self.stats.record_bytes(bytes as u64, now);
    }

    /// The most bytes one partition of a throttled fetch asks for: at most one second's
    /// budget (and `max`), so one fetch does not spend many seconds of it.
    pub(crate) fn partition_max_bytes(rate: i64, max: i32) -> i32 {
        rate.clamp(1, max as i64) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image::{MetadataImage, Rejected};
    use crate::cluster::records::{CreateTopic, MetadataRecord};
    use crate::storage::LogConfig;

    /// The leader-throttled replicas as a partition's log holds them: parsed once, when
    /// the topic's config is set.
    fn parsed(value: &str) -> ThrottledReplicas {
        let mut c = LogConfig::default();
        c.set("leader.replication.throttled.replicas", value)
            .unwrap();
        c.leader_throttled_replicas
    }

    #[test]
    fn the_parsed_throttled_replicas_decide_which_follower_fetches_the_leader_throttles() {
        // `*`: every replica of the topic; only followers outside the ISR are held.
        let all = parsed("*");
        assert_eq!(all, ThrottledReplicas::All);
        assert!(throttled_as_leader(&all, 3, 1, &[1], 2));
        assert!(!throttled_as_leader(&all, 3, 1, &[1, 2], 2));
        // A `partition:broker` list names the leader's replica of each partition.
        let list = parsed(" 0:1, 1:2 ,0:1");
        assert_eq!(list, ThrottledReplicas::List(vec![(0, 1), (1, 2)]));
        assert!(throttled_as_leader(&list, 0, 1, &[1], 3));
        assert!(throttled_as_leader(&list, 1, 2, &[2], 3));
        assert!(!throttled_as_leader(&list, 1, 1, &[1], 3));
        assert!(!throttled_as_leader(&list, 2, 1, &[1], 3));
        assert!(!throttled_as_leader(&list, 0, 1, &[1, 3], 3));
        // Empty: nothing is throttled.
        let none = parsed("");
        assert_eq!(none, ThrottledReplicas::None);
        assert!(!throttled_as_leader(&none, 0, 1, &[1], 2));
    }

    #[test]
    fn a_bad_throttled_replica_is_refused_when_set_naming_the_topic_and_the_entry() {
        for (value, entry) in [
            ("0:1,x:2", "x:2"),
            ("0-1", "0-1"),
            ("0:-1", "0:-1"),
            ("**", "**"),
        ] {
            for key in [
                "leader.replication.throttled.replicas",
                "follower.replication.throttled.replicas",
            ] {
                let mut img = MetadataImage::default();
                let e = img
                    .apply(
                        1,
                        &MetadataRecord::CreateTopic(CreateTopic {
                            name: "moving".into(),
                            topic_id: [7; 16],
                            partitions: 1,
                            replication_factor: 1,
                            assignment: None,
                            configs: vec![(key.into(), value.into())],
                            internal: false,
                        }),
                    )
                    .unwrap_err();
                let Rejected::InvalidConfig { key: k, reason } = &e else {
                    panic!("{value:?}: {e:?}");
                };
                assert_eq!(k, key);
                assert!(reason.contains("topic moving"), "{reason}");
                assert!(reason.contains(&format!("{entry:?}")), "{reason}");
                assert!(img.topic("moving").is_none());
            }
        }
    }

    #[test]
    fn a_spent_budget_comes_back_at_the_rate_and_unthrottled_is_never_exceeded() {
        let stats = Arc::new(ThrottleStats::default());
        let q = ReplicationQuota::new(stats.clone());
        let t0 = Instant::now();
        assert!(!q.is_exceeded(1000, t0));
        q.record(1000, 3000, t0);
        assert!(q.is_exceeded(1000, t0));
        // 2000 bytes below zero at 1000 bytes/s: about two seconds.
        let w = q.wait(1000, t0);
        assert!(
            w > Duration::from_millis(1900) && w < Duration::from_millis(2100),
            "{w:?}"
        );
        assert!(q.is_exceeded(1000, t0 + Duration::from_millis(1500)));
        assert!(!q.is_exceeded(1000, t0 + Duration::from_millis(2500)));
        // The budget holds one second at most.
        let later = t0 + Duration::from_secs(60);
        q.record(1000, 999, later);
        assert!(!q.is_exceeded(1000, later));
        q.record(1000, 2, later);
        assert!(q.is_exceeded(1000, later));
        // The bytes moved count; the budget was spent from t0 until about 2 s, counted
        // once although asked three times, and from `later` for a moment.
        let m = stats.snapshot(later);
        assert_eq!(m.throttled_bytes, 4001);
        assert!(
            m.throttle_time_seconds > 1.9 && m.throttle_time_seconds < 2.1,
            "{m:?}"
        );
        let free = ReplicationQuota::new(Arc::new(ThrottleStats::default()));
        free.record(UNTHROTTLED, usize::MAX, t0);
        assert!(!free.is_exceeded(UNTHROTTLED, t0));
        assert_eq!(free.wait(UNTHROTTLED, t0), Duration::ZERO);
        assert_eq!(
            ReplicationQuota::partition_max_bytes(200_000, 1 << 20),
            200_000
        );
        assert_eq!(
            ReplicationQuota::partition_max_bytes(UNTHROTTLED, 1 << 20),
            1 << 20
        );
        assert_eq!(ReplicationQuota::partition_max_bytes(0, 1 << 20), 1);
    }
}
