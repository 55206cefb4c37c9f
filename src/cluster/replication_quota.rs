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
    /// when this node has a leader rate, the topic lists the partition's replica on this
    /// node in `leader.replication.throttled.replicas`, and `replica` is not in sync.
    pub(crate) fn leader_throttle(
        &self,
        topic: &str,
        partition: i32,
        replica: i32,
    ) -> Option<LeaderThrottle> {
        let image = self.image();
        let me = self.node_id();
        let rate = image.broker_configs.rate(me, LEADER_THROTTLED_RATE);
        if rate == UNTHROTTLED {
            return None;
        }
        let t = image.topic(topic)?;
        let listed = t
            .configs
            .get("leader.replication.throttled.replicas")
            .and_then(|v| ThrottledReplicas::parse("leader.replication.throttled.replicas", v).ok())
            .is_some_and(|l| l.contains(partition, me));
        let in_sync = t
            .partitions
            .get(usize::try_from(partition).ok()?)
            .is_some_and(|p| p.isr.contains(&replica));
        (listed && !in_sync).then(|| LeaderThrottle {
            quota: self.leader_quota.clone(),
            rate,
        })
    }
}

/// One broker's quota of one side (leader or follower). See the module documentation.
#[derive(Debug)]
pub(crate) struct ReplicationQuota {
    /// Bytes left, when last refilled (None: never used, a full budget).
    budget: Mutex<Option<(f64, Instant)>>,
}

impl ReplicationQuota {
    pub(crate) fn new() -> ReplicationQuota {
        ReplicationQuota {
            budget: Mutex::new(None),
        }
    }

    /// The budget at `now` at `rate` bytes/s.
    fn refill(&self, rate: i64, now: Instant) -> f64 {
        let cap = rate as f64;
        let mut b = self.budget.lock();
        let left = match *b {
            None => cap,
            Some((left, at)) => {
                (left + now.saturating_duration_since(at).as_secs_f64() * cap).min(cap)
            }
        };
        *b = Some((left, now));
        left
    }

    /// True if the budget at `rate` bytes/s is spent at `now` (never unthrottled).
    pub(crate) fn is_exceeded(&self, rate: i64, now: Instant) -> bool {
        rate != UNTHROTTLED && self.refill(rate, now) <= 0.0
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
        let left = self.refill(rate, now);
        if left > 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((-left + 1.0) / rate as f64)
        }
    }

    /// Counts `bytes` moved for throttled replicas at `now` against `rate`.
    pub(crate) fn record(&self, rate: i64, bytes: usize, now: Instant) {
        if rate == UNTHROTTLED {
            return;
        }
        let left = self.refill(rate, now);
        *self.budget.lock() = Some((left - bytes as f64, now));
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

    #[test]
    fn a_spent_budget_comes_back_at_the_rate_and_unthrottled_is_never_exceeded() {
        let q = ReplicationQuota::new();
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
        let free = ReplicationQuota::new();
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
