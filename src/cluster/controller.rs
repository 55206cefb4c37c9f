//! The controller's duties: what the Raft leader proposes on its own, on every tick.
//!
//! [`duties`] is a pure function of the image, a snapshot of when each peer was last
//! heard from, the time and the node's settings (no threads, no clock reads, no I/O,
//! no randomness: the ids a new record needs come in as [`Tick::fresh_id`]). The Raft
//! loop calls it on each tick while it leads, keeps the state it returns
//! ([`Duties::last_balance_check`]) for the next tick, and proposes the records (one in
//! flight per [`Duty`]). In order:
//! - without a cluster id, `InitCluster` (meta.properties' id, or a fresh one) and
//!   nothing else;
//! - `FenceBroker` for every unfenced broker but this one not heard from for the
//!   session timeout (a new controller gives every peer at least a grace period of two
//!   election timeouts after it took over, to hear from ones it never talked to);
//! - every `leader.imbalance.check.interval` (counted from the first tick it checks),
//!   `ElectPreferredLeaders` for the imbalanced partitions (Kafka's automatic leader
//!   rebalance), if `auto.leader.rebalance.enable`;
//! - `CreateTopic` of `__consumer_offsets` while it is missing and at least
//!   `offsets.topic.replication.factor` brokers are unfenced.

use std::time::Instant;

use super::config::ClusterConfig;
use super::image::{MetadataImage, OFFSETS_TOPIC};
use super::liveness::LastHeard;
use super::records::{CreateTopic, MetadataRecord, TopicId};
use crate::storage::codec;

/// Which duty a record serves: the Raft loop keeps one proposal in flight per duty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Duty {
    /// Setting the cluster id.
    InitCluster,
    /// Creating `__consumer_offsets`.
    OffsetsTopic,
    /// Fencing that broker.
    Fence(i32),
    /// The automatic leader rebalance.
    Rebalance,
}

/// What a tick of the controller knows besides the image and the settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tick<'a> {
    /// Now.
    pub now: Instant,
    /// When this node became the controller.
    pub leader_since: Instant,
    /// When each peer was last heard from.
    pub last_heard: &'a LastHeard,
    /// When the leaders' balance was last checked ([`Duties::last_balance_check`] of
    /// the previous tick; None on a new controller's first tick).
    pub last_balance_check: Option<Instant>,
    /// The cluster id `meta.properties` names, which a new cluster takes.
    pub known_cluster_id: Option<&'a str>,
    /// Random bytes for a new id: the cluster's (when `known_cluster_id` is None) or
    /// `__consumer_offsets`'s.
    pub fresh_id: TopicId,
}

/// What the controller proposes on a tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Duties {
    /// The records, each with the duty it serves, in the order to propose them.
    pub proposals: Vec<(Duty, MetadataRecord)>,
    /// When the leaders' balance was last checked, for the next tick.
    pub last_balance_check: Option<Instant>,
}

/// The records the controller proposes on this tick. See the module documentation.
pub(crate) fn duties(image: &MetadataImage, tick: &Tick<'_>, config: &ClusterConfig) -> Duties {
    let mut duties = Duties {
        proposals: Vec::new(),
        last_balance_check: tick.last_balance_check,
    };
    if image.cluster_id.is_none() {
        let cluster_id = tick
            .known_cluster_id
            .map(str::to_string)
            .unwrap_or_else(|| codec::uuid_base64(&tick.fresh_id));
        let features = super::features::bootstrap_levels(&config.supported_features);
        duties.proposals.push((
            Duty::InitCluster,
            MetadataRecord::InitCluster {
                cluster_id,
                features,
            },
        ));
        return duties;
    }
    duties.proposals.extend(fences(image, tick, config));
    if let Some(record) = rebalance(image, tick.now, &mut duties.last_balance_check, config) {
        duties.proposals.push((Duty::Rebalance, record));
    }
    if let Some(record) = offsets_topic(image, tick.fresh_id, config) {
        duties.proposals.push((Duty::OffsetsTopic, record));
    }
    duties
}

/// `FenceBroker` for each unfenced broker (but this node) whose deadline passed: the
/// session timeout after it was last heard from, and at least the grace period after
/// this node became the controller.
fn fences(
    image: &MetadataImage,
    tick: &Tick<'_>,
    config: &ClusterConfig,
) -> Vec<(Duty, MetadataRecord)> {
    let grace = config.tick * (config.election_ticks as u32 * 2);
    let by_grace = tick.leader_since + grace;
    image
        .brokers
        .values()
        .filter(|b| !b.fenced && b.id != config.node_id)
        .filter(|b| {
            let by_heard = tick
                .last_heard
                .get(&b.id)
                .map(|t| *t + config.session_timeout);
            let deadline = by_heard.map_or(by_grace, |d| d.max(by_grace));
            tick.now > deadline
        })
        .map(|b| {
            (
                Duty::Fence(b.id),
                MetadataRecord::FenceBroker {
                    broker_id: b.id,
                    broker_epoch: b.epoch,
                },
            )
        })
        .collect()
}

/// Kafka's automatic leader rebalance: every `leader.imbalance.check.interval`
/// (counted from the first check, which `last_check` records), moves leaderships back
/// to the preferred replicas of the brokers whose share of partitions led by another
/// broker is above `leader.imbalance.per.broker.percentage`.
fn rebalance(
    image: &MetadataImage,
    now: Instant,
    last_check: &mut Option<Instant>,
    config: &ClusterConfig,
) -> Option<MetadataRecord> {
    if !config.auto_leader_rebalance {
        return None;
    }
    let since = *last_check.get_or_insert(now);
    if now.duration_since(since) < config.leader_imbalance_check_interval {
        return None;
    }
    *last_check = Some(now);
    let partitions = image.imbalanced_partitions(config.leader_imbalance_per_broker_percentage);
    (!partitions.is_empty()).then_some(MetadataRecord::ElectPreferredLeaders { partitions })
}

/// `__consumer_offsets`'s `CreateTopic` (id `topic_id`), if it is missing and enough
/// brokers are unfenced to place it.
fn offsets_topic(
    image: &MetadataImage,
    topic_id: TopicId,
    config: &ClusterConfig,
) -> Option<MetadataRecord> {
    if image.topic(OFFSETS_TOPIC).is_some() {
        return None;
    }
    let rf = config.offsets_topic_replication_factor;
    if image.unfenced_brokers().len() < rf as usize {
        return None;
    }
    Some(MetadataRecord::CreateTopic(CreateTopic {
        name: OFFSETS_TOPIC.into(),
        topic_id,
        partitions: config.offsets_topic_num_partitions.max(1),
        replication_factor: rf,
        assignment: None,
        configs: vec![("cleanup.policy".into(), "compact".into())],
        internal: true,
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::cluster::records::AlterPartition;
    use crate::cluster::records::tests::{assigned_topic, registration};
    use crate::cluster::voters::Voter;

    const SESSION: Duration = Duration::from_millis(9000);
    /// Two election timeouts of 10 ticks of 100 ms: [`ClusterConfig::new`]'s grace.
    const GRACE: Duration = Duration::from_millis(2000);
    const INTERVAL: Duration = Duration::from_secs(300);

    /// Node 0's settings in a cluster of nodes 0, 1 and 2 (Kafka's defaults).
    fn config() -> ClusterConfig {
        let voters = (0..3)
            .map(|id| Voter {
                id,
                addr: format!("127.0.0.1:{}", 9093 + id),
            })
            .collect();
        ClusterConfig::new(0, voters, "127.0.0.1:9092".into())
    }

    fn apply(img: &mut MetadataImage, record: MetadataRecord) {
        let index = img.index + 1;
        img.apply(index, &record).unwrap();
    }

    fn register(img: &mut MetadataImage, id: i32) {
        apply(
            img,
            registration(id, id as u64 + 100, &format!("127.0.0.1:{}", 9000 + id)),
        );
    }

    fn ready(img: &mut MetadataImage, id: i32) {
        let broker_epoch = img.brokers[&id].epoch;
        apply(
            img,
            MetadataRecord::BrokerReady {
                broker_id: id,
                broker_epoch,
            },
        );
    }

    fn create(img: &mut MetadataImage, name: &str, assignment: Vec<Vec<i32>>) {
        apply(img, assigned_topic(name, assignment));
    }

    /// A cluster with an id, brokers `ids` registered and unfenced, and (with
    /// `offsets`) `__consumer_offsets` on broker 0.
    fn cluster(ids: &[i32], offsets: bool) -> MetadataImage {
        let mut img = MetadataImage::default();
        apply(
            &mut img,
            MetadataRecord::InitCluster {
                cluster_id: "c".into(),
                features: vec![],
            },
        );
        for &id in ids {
            register(&mut img, id);
        }
        for &id in ids {
            ready(&mut img, id);
        }
        if offsets {
            create(&mut img, OFFSETS_TOPIC, vec![vec![0]]);
        }
        img
    }

    /// A tick at `at` after this node became the controller at `t0`, every peer of
    /// `heard` last heard from at `t0` plus its offset.
    fn tick<'a>(t0: Instant, at: Duration, heard: &'a LastHeard) -> Tick<'a> {
        Tick {
            now: t0 + at,
            leader_since: t0,
            last_heard: heard,
            last_balance_check: None,
            known_cluster_id: None,
            fresh_id: [7; 16],
        }
    }

    fn heard_at(t0: Instant, peers: &[(i32, Duration)]) -> LastHeard {
        peers.iter().map(|(id, at)| (*id, t0 + *at)).collect()
    }

    fn records(d: &Duties) -> Vec<&MetadataRecord> {
        d.proposals.iter().map(|(_, r)| r).collect()
    }

    #[test]
    fn nothing_is_due_in_a_healthy_balanced_cluster() {
        let img = cluster(&[0, 1, 2], true);
        let t0 = Instant::now();
        let heard = heard_at(t0, &[(1, SESSION), (2, SESSION)]);
        let d = duties(&img, &tick(t0, SESSION + GRACE, &heard), &config());
        assert_eq!(d.proposals, vec![]);
        // The first check of the balance starts its interval.
        assert_eq!(d.last_balance_check, Some(t0 + SESSION + GRACE));
    }

    /// A new cluster gets its id and its feature levels (the highest this node
    /// supports: `transaction.version` 2), and nothing else.
    #[test]
    fn a_new_cluster_gets_its_id_and_nothing_else() {
        let mut img = MetadataImage::default();
        register(&mut img, 1);
        let t0 = Instant::now();
        let heard = LastHeard::new();
        let mut t = tick(t0, Duration::from_secs(60), &heard);
        let d = duties(&img, &t, &config());
        assert_eq!(
            d.proposals,
            vec![(
                Duty::InitCluster,
                MetadataRecord::InitCluster {
                    cluster_id: codec::uuid_base64(&[7; 16]),
                    features: vec![("transaction.version".into(), 2)],
                }
            )]
        );
        assert_eq!(d.last_balance_check, None);
        t.known_cluster_id = Some("from-meta-properties");
        assert_eq!(
            records(&duties(&img, &t, &config())),
            vec![&MetadataRecord::InitCluster {
                cluster_id: "from-meta-properties".into(),
                features: vec![("transaction.version".into(), 2)],
            }]
        );
    }

    #[test]
    fn a_broker_not_heard_from_for_the_session_timeout_is_fenced() {
        let img = cluster(&[0, 1, 2], true);
        let t0 = Instant::now();
        // Broker 1 was last heard from at t0, broker 2 a second later.
        let heard = heard_at(t0, &[(1, Duration::ZERO), (2, Duration::from_secs(1))]);
        let d = duties(&img, &tick(t0, SESSION, &heard), &config());
        assert_eq!(d.proposals, vec![], "not past the session timeout yet");
        let d = duties(
            &img,
            &tick(t0, SESSION + Duration::from_millis(1), &heard),
            &config(),
        );
        assert_eq!(
            d.proposals,
            vec![(
                Duty::Fence(1),
                MetadataRecord::FenceBroker {
                    broker_id: 1,
                    broker_epoch: img.brokers[&1].epoch,
                }
            )]
        );
        // This node is never fenced by itself; a fenced broker is not fenced again.
        let mut fenced = img.clone();
        apply(&mut fenced, d.proposals[0].1.clone());
        let late = tick(t0, Duration::from_secs(60), &heard);
        assert_eq!(
            records(&duties(&fenced, &late, &config())),
            vec![&MetadataRecord::FenceBroker {
                broker_id: 2,
                broker_epoch: img.brokers[&2].epoch,
            }]
        );
    }

    #[test]
    fn a_new_controller_gives_every_peer_the_grace_period() {
        let img = cluster(&[0, 1], true);
        let long_ago = Instant::now();
        let t0 = long_ago + Duration::from_secs(60);
        // Never heard from broker 1: fenced only once the grace period is over.
        let none = LastHeard::new();
        assert_eq!(
            duties(&img, &tick(t0, GRACE, &none), &config()).proposals,
            vec![]
        );
        let d = duties(
            &img,
            &tick(t0, GRACE + Duration::from_millis(1), &none),
            &config(),
        );
        assert_eq!(d.proposals[0].0, Duty::Fence(1));
        // Heard from long before this node took over: the grace period still counts.
        let before = HashMap::from([(1, long_ago)]);
        assert_eq!(
            duties(&img, &tick(t0, GRACE, &before), &config()).proposals,
            vec![]
        );
    }

    #[test]
    fn a_fenced_broker_loses_its_leaderships_and_isr_memberships() {
        let mut img = cluster(&[0, 1, 2], true);
        create(&mut img, "t", vec![vec![1, 2], vec![2, 1]]);
        let t0 = Instant::now();
        let heard = heard_at(t0, &[(2, SESSION)]);
        let d = duties(&img, &tick(t0, SESSION + GRACE, &heard), &config());
        assert_eq!(d.proposals.len(), 1, "{d:?}");
        assert_eq!(d.proposals[0].0, Duty::Fence(1));
        let before = img.topic("t").unwrap().partitions.clone();
        apply(&mut img, d.proposals[0].1.clone());
        let after = &img.topic("t").unwrap().partitions;
        // It led partition 0: the next ISR member leads, the epochs move on.
        assert_eq!((after[0].leader, after[0].isr.clone()), (2, vec![2]));
        assert_eq!(after[0].leader_epoch, before[0].leader_epoch + 1);
        assert_eq!(after[0].partition_epoch, before[0].partition_epoch + 1);
        // It followed partition 1: it leaves the ISR, the leader stays.
        assert_eq!((after[1].leader, after[1].isr.clone()), (2, vec![2]));
        assert_eq!(after[1].leader_epoch, before[1].leader_epoch);
        assert_eq!(after[1].partition_epoch, before[1].partition_epoch + 1);
    }

    #[test]
    fn the_offsets_topic_is_created_once_enough_brokers_are_unfenced() {
        let mut img = cluster(&[0, 1], false);
        let t0 = Instant::now();
        let heard = heard_at(t0, &[(1, SESSION), (2, SESSION)]);
        let at = tick(t0, SESSION, &heard);
        // Three replicas wanted, two brokers unfenced.
        assert_eq!(duties(&img, &at, &config()).proposals, vec![]);
        register(&mut img, 2);
        assert_eq!(
            duties(&img, &at, &config()).proposals,
            vec![],
            "2 is fenced"
        );
        ready(&mut img, 2);
        let d = duties(&img, &at, &config());
        let offsets = MetadataRecord::CreateTopic(CreateTopic {
            name: OFFSETS_TOPIC.into(),
            topic_id: [7; 16],
            partitions: 50,
            replication_factor: 3,
            assignment: None,
            configs: vec![("cleanup.policy".into(), "compact".into())],
            internal: true,
        });
        assert_eq!(d.proposals, vec![(Duty::OffsetsTopic, offsets.clone())]);
        apply(&mut img, offsets);
        assert_eq!(duties(&img, &at, &config()).proposals, vec![]);
    }

    /// Partition 0 of "t" (replicas 1, 2) led by 2 with `isr`.
    fn led_by_the_second_replica(isr: Vec<i32>) -> MetadataImage {
        let mut img = cluster(&[0, 1, 2], true);
        create(&mut img, "t", vec![vec![1, 2]]);
        let epoch = img.brokers[&1].epoch;
        apply(
            &mut img,
            MetadataRecord::FenceBroker {
                broker_id: 1,
                broker_epoch: epoch,
            },
        );
        ready(&mut img, 1);
        let p = &img.topic("t").unwrap().partitions[0];
        let change = AlterPartition {
            topic: "t".into(),
            topic_id: img.topic("t").unwrap().id,
            partition: 0,
            broker_id: 2,
            broker_epoch: img.brokers[&2].epoch,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr,
        };
        apply(&mut img, MetadataRecord::AlterPartition(change));
        img
    }

    #[test]
    fn an_imbalanced_partition_gets_its_preferred_leader_back_when_in_the_isr() {
        let mut img = led_by_the_second_replica(vec![1, 2]);
        let t0 = Instant::now();
        // Heard from all along.
        let heard = heard_at(t0, &[(1, INTERVAL * 3), (2, INTERVAL * 3)]);
        let config = config();
        // The first check starts the interval; the next is due an interval later.
        let mut t = tick(t0, SESSION, &heard);
        let first = duties(&img, &t, &config);
        assert_eq!(first.proposals, vec![]);
        t.last_balance_check = first.last_balance_check;
        t.now += INTERVAL - Duration::from_millis(1);
        let early = duties(&img, &t, &config);
        assert_eq!(early.proposals, vec![]);
        assert_eq!(early.last_balance_check, first.last_balance_check);
        t.now += Duration::from_millis(1);
        let due = duties(&img, &t, &config);
        assert_eq!(due.last_balance_check, Some(t.now));
        assert_eq!(due.proposals.len(), 1, "{due:?}");
        assert_eq!(due.proposals[0].0, Duty::Rebalance);
        let MetadataRecord::ElectPreferredLeaders { partitions } = &due.proposals[0].1 else {
            panic!("{due:?}");
        };
        assert_eq!(
            partitions
                .iter()
                .map(|p| (p.topic.as_str(), p.partition))
                .collect::<Vec<_>>(),
            vec![("t", 0)]
        );
        apply(&mut img, due.proposals[0].1.clone());
        assert_eq!(img.topic("t").unwrap().partitions[0].leader, 1);
        t.now += INTERVAL;
        assert_eq!(duties(&img, &t, &config).proposals, vec![]);
    }

    #[test]
    fn a_preferred_replica_out_of_the_isr_does_not_get_the_leadership() {
        let img = led_by_the_second_replica(vec![2]);
        let t0 = Instant::now();
        // Heard from all along.
        let heard = heard_at(t0, &[(1, INTERVAL * 3), (2, INTERVAL * 3)]);
        let mut t = tick(t0, SESSION, &heard);
        t.last_balance_check = Some(t0);
        t.now = t0 + INTERVAL;
        let d = duties(&img, &t, &config());
        assert_eq!(d.proposals, vec![]);
        assert_eq!(d.last_balance_check, Some(t.now), "checked all the same");
    }

    #[test]
    fn without_the_automatic_rebalance_the_balance_is_never_checked() {
        let img = led_by_the_second_replica(vec![1, 2]);
        let t0 = Instant::now();
        // Heard from all along.
        let heard = heard_at(t0, &[(1, INTERVAL * 3), (2, INTERVAL * 3)]);
        let mut config = config();
        config.auto_leader_rebalance = false;
        let mut t = tick(t0, SESSION, &heard);
        t.last_balance_check = Some(t0);
        t.now = t0 + INTERVAL * 2;
        let d = duties(&img, &t, &config);
        assert_eq!(d.proposals, vec![]);
        assert_eq!(d.last_balance_check, Some(t0));
    }
}
