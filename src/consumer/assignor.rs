//! Partition assignment, computed by the group leader as in Kafka. The subscriptions
//! and assignments it reads and writes are `coordinator::protocol`'s.

use std::collections::BTreeMap;

pub use crate::coordinator::protocol::{Assignment, Subscription};

/// A partition assignment strategy, run by the group leader.
pub trait Assignor: Send + Sync + 'static {
    /// The protocol name sent in JoinGroup ("range", "roundrobin", ...).
    fn name(&self) -> &str;

    /// True for assignors of the cooperative (incremental) rebalance protocol: members
    /// keep consuming the partitions they keep, and a partition moves in two rebalances
    /// (revoked by its owner in the first, assigned to its new owner in the second).
    fn is_cooperative(&self) -> bool {
        false
    }

    /// Gives every partition of the subscribed topics to at most one member subscribed
    /// to its topic (exactly one for eager assignors; a cooperative assignor leaves a
    /// partition that is moving unassigned for one round). `partitions` maps each topic
    /// to its partition count (topics that do not exist are absent); `members` maps
    /// member ids to subscriptions.
    fn assign(
        &self,
        partitions: &BTreeMap<String, i32>,
        members: &BTreeMap<String, Subscription>,
    ) -> BTreeMap<String, Vec<(String, Vec<i32>)>>;
}

fn empty_assignment(
    members: &BTreeMap<String, Subscription>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    members
        .keys()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect()
}

fn flatten(
    a: BTreeMap<String, BTreeMap<String, Vec<i32>>>,
) -> BTreeMap<String, Vec<(String, Vec<i32>)>> {
    a.into_iter()
        .map(|(m, topics)| (m, topics.into_iter().collect()))
        .collect()
}

/// Kafka's `RangeAssignor`: per topic, the subscribed members (sorted by member id) get
/// consecutive ranges of partitions; the first `partitions % members` get one extra.
#[derive(Debug, Default, Clone, Copy)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &str {
        "range"
    }

    fn assign(
        &self,
        partitions: &BTreeMap<String, i32>,
        members: &BTreeMap<String, Subscription>,
    ) -> BTreeMap<String, Vec<(String, Vec<i32>)>> {
        let mut out = empty_assignment(members);
        for (topic, &count) in partitions {
            let subscribed: Vec<&String> = members
                .iter()
                .filter(|(_, s)| s.topics.iter().any(|t| t == topic))
                .map(|(m, _)| m)
                .collect();
            if subscribed.is_empty() || count <= 0 {
                continue;
            }
            let n = subscribed.len() as i32;
            let per = count / n;
            let extra = count % n;
            for (i, member) in subscribed.into_iter().enumerate() {
                let i = i as i32;
                let start = per * i + i.min(extra);
                let len = per + i32::from(i < extra);
                if len > 0
                    && let Some(m) = out.get_mut(member)
                {
                    m.insert(topic.clone(), (start..start + len).collect());
                }
            }
        }
        flatten(out)
    }
}

/// Kafka's `RoundRobinAssignor`: all partitions (sorted by topic, then partition) dealt
/// in turn to the members (sorted by id), skipping members not subscribed to the topic.
#[derive(Debug, Default, Clone, Copy)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &str {
        "roundrobin"
    }

    fn assign(
        &self,
        partitions: &BTreeMap<String, i32>,
        members: &BTreeMap<String, Subscription>,
    ) -> BTreeMap<String, Vec<(String, Vec<i32>)>> {
        let mut out = empty_assignment(members);
        let ids: Vec<&String> = members.keys().collect();
        if ids.is_empty() {
            return flatten(out);
        }
        let mut next = 0usize;
        for (topic, &count) in partitions {
            for p in 0..count.max(0) {
                // Find the next member (cyclically) subscribed to this topic.
                for step in 0..ids.len() {
                    let idx = (next + step) % ids.len();
                    let member = ids[idx];
                    if members[member].topics.iter().any(|t| t == topic) {
                        if let Some(m) = out.get_mut(member) {
                            m.entry(topic.clone()).or_default().push(p);
                        }
                        next = idx + 1;
                        break;
                    }
                }
            }
        }
        flatten(out)
    }
}

/// Kafka's `CooperativeStickyAssignor`: a balanced assignment that keeps as many
/// partitions as possible with their current owners (from `owned_partitions` in the
/// subscription), under the cooperative protocol: a partition that changes owner is
/// first only revoked, and assigned to its new owner in the follow-up rebalance.
#[derive(Debug, Default, Clone, Copy)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &str {
        "cooperative-sticky"
    }

    fn is_cooperative(&self) -> bool {
        true
    }

    fn assign(
        &self,
        partitions: &BTreeMap<String, i32>,
        members: &BTreeMap<String, Subscription>,
    ) -> BTreeMap<String, Vec<(String, Vec<i32>)>> {
        let target = sticky_assignment(partitions, members);
        // Partitions still owned by another live member wait for its revocation.
        let mut previous: BTreeMap<(String, i32), &String> = BTreeMap::new();
        for (m, sub) in members {
            for (t, ps) in &sub.owned_partitions {
                for p in ps {
                    previous.entry((t.clone(), *p)).or_insert(m);
                }
            }
        }
        let mut out = empty_assignment(members);
        for (member, tps) in target {
            for tp in tps {
                let moving = previous.get(&tp).is_some_and(|owner| **owner != member);
                if !moving && let Some(m) = out.get_mut(&member) {
                    m.entry(tp.0).or_default().push(tp.1);
                }
            }
        }
        flatten(out)
    }
}

/// A balanced assignment that starts from what each member owns: every member keeps
/// its owned partitions up to its fair share, the rest go to the least-loaded eligible
/// member, then partitions move from the most to the least loaded until no eligible
/// move can reduce the spread.
fn sticky_assignment(
    partitions: &BTreeMap<String, i32>,
    members: &BTreeMap<String, Subscription>,
) -> BTreeMap<String, Vec<(String, i32)>> {
    let mut owned: BTreeMap<String, Vec<(String, i32)>> =
        members.keys().map(|m| (m.clone(), Vec::new())).collect();
    if members.is_empty() {
        return owned;
    }
    let eligible = |m: &str, topic: &str| members[m].topics.iter().any(|t| t == topic);
    let all: Vec<(String, i32)> = partitions
        .iter()
        .filter(|(t, _)| members.keys().any(|m| eligible(m, t)))
        .flat_map(|(t, &n)| (0..n.max(0)).map(move |p| (t.clone(), p)))
        .collect();
    let share = all.len().div_ceil(members.len());
    let exists = |t: &str, p: i32| partitions.get(t).is_some_and(|&n| p >= 0 && p < n);
    let mut taken: std::collections::BTreeSet<(String, i32)> = Default::default();
    for (m, sub) in members {
        for (t, ps) in &sub.owned_partitions {
            for &p in ps {
                let list = owned.get_mut(m).expect("member present");
                if list.len() < share
                    && exists(t, p)
                    && eligible(m, t)
                    && taken.insert((t.clone(), p))
                {
                    list.push((t.clone(), p));
                }
            }
        }
    }
    for tp in &all {
        if taken.contains(tp) {
            continue;
        }
        let least = owned
            .iter()
            .filter(|(m, _)| eligible(m, &tp.0))
            .min_by_key(|(m, l)| (l.len(), (*m).clone()))
            .map(|(m, _)| m.clone());
        if let Some(m) = least {
            owned.get_mut(&m).expect("member present").push(tp.clone());
        }
    }
    // Even out: move one partition from the most to the least loaded member while that
    // narrows the spread (bounded: each move lowers the sum of squares).
    for _ in 0..all.len() * members.len() {
        let mut moved = false;
        let by_load: Vec<String> = {
            let mut ids: Vec<&String> = owned.keys().collect();
            ids.sort_by_key(|m| std::cmp::Reverse(owned[*m].len()));
            ids.into_iter().cloned().collect()
        };
        'outer: for heavy in &by_load {
            for light in by_load.iter().rev() {
                if owned[heavy].len() <= owned[light].len() + 1 {
                    continue;
                }
                let pos = owned[heavy].iter().rposition(|(t, _)| eligible(light, t));
                if let Some(pos) = pos {
                    let tp = owned.get_mut(heavy).expect("member").remove(pos);
                    owned.get_mut(light).expect("member").push(tp);
                    moved = true;
                    break 'outer;
                }
            }
        }
        if !moved {
            break;
        }
    }
    for list in owned.values_mut() {
        list.sort();
    }
    owned
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, Subscription> {
        members
            .iter()
            .map(|(m, topics)| {
                (
                    m.to_string(),
                    Subscription {
                        topics: topics.iter().map(|t| t.to_string()).collect(),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }

    fn counts(t: &[(&str, i32)]) -> BTreeMap<String, i32> {
        t.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    #[test]
    fn range_matches_kafkas_example() {
        // Kafka's RangeAssignor doc: t0, t1 with 3 partitions each, C0 and C1.
        let a = RangeAssignor.assign(
            &counts(&[("t0", 3), ("t1", 3)]),
            &subs(&[("C0", &["t0", "t1"]), ("C1", &["t0", "t1"])]),
        );
        assert_eq!(
            a["C0"],
            vec![("t0".into(), vec![0, 1]), ("t1".into(), vec![0, 1])]
        );
        assert_eq!(
            a["C1"],
            vec![("t0".into(), vec![2]), ("t1".into(), vec![2])]
        );
    }

    #[test]
    fn roundrobin_matches_kafkas_example() {
        let a = RoundRobinAssignor.assign(
            &counts(&[("t0", 3), ("t1", 3)]),
            &subs(&[("C0", &["t0", "t1"]), ("C1", &["t0", "t1"])]),
        );
        assert_eq!(
            a["C0"],
            vec![("t0".into(), vec![0, 2]), ("t1".into(), vec![1])]
        );
        assert_eq!(
            a["C1"],
            vec![("t0".into(), vec![1]), ("t1".into(), vec![0, 2])]
        );
    }

    #[test]
    fn every_partition_goes_to_exactly_one_subscriber() {
        let parts = counts(&[("a", 7), ("b", 5)]);
        let members = subs(&[("m1", &["a"]), ("m2", &["a", "b"]), ("m3", &["b"])]);
        for assignor in [
            &RangeAssignor as &dyn Assignor,
            &RoundRobinAssignor,
            &CooperativeStickyAssignor,
        ] {
            let a = assignor.assign(&parts, &members);
            let mut seen = std::collections::BTreeSet::new();
            for (m, tps) in &a {
                for (t, ps) in tps {
                    assert!(
                        members[m].topics.contains(t),
                        "{} gave {t} to {m}",
                        assignor.name()
                    );
                    for p in ps {
                        assert!(seen.insert((t.clone(), *p)), "{t}-{p} assigned twice");
                    }
                }
            }
            assert_eq!(seen.len(), 12, "{}", assignor.name());
        }
    }

    #[test]
    fn protocol_bytes_round_trip() {
        let s = Subscription {
            topics: vec!["events".into()],
            user_data: None,
            owned_partitions: vec![],
        };
        let bytes = s.encode();
        assert_eq!(
            bytes,
            vec![
                0, 0, 0, 0, 0, 1, 0, 6, b'e', b'v', b'e', b'n', b't', b's', 255, 255, 255, 255
            ]
        );
        assert_eq!(Subscription::decode(&bytes).unwrap(), s);
        let a = Assignment {
            partitions: vec![("events".into(), vec![0, 2])],
            user_data: Some(vec![]),
        };
        assert_eq!(Assignment::decode(&a.encode()).unwrap(), a);
        assert_eq!(Assignment::decode(&[]).unwrap(), Assignment::default());
    }

    #[test]
    fn malformed_protocol_bytes_are_errors() {
        assert!(Subscription::decode(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_err());
        assert!(Assignment::decode(&[0, 0, 0, 0, 0, 1, 0, 9, b'x']).is_err());
    }

    #[test]
    fn cooperative_sticky_keeps_owners_and_defers_moves() {
        let parts = counts(&[("t", 4)]);
        // a owns everything; b joins.
        let mut members = subs(&[("a", &["t"]), ("b", &["t"])]);
        members.get_mut("a").unwrap().owned_partitions = vec![("t".into(), vec![0, 1, 2, 3])];
        let first = CooperativeStickyAssignor.assign(&parts, &members);
        assert_eq!(first["a"], vec![("t".into(), vec![0, 1])]);
        assert!(
            first["b"].is_empty(),
            "moving partitions wait for revocation"
        );
        // a revoked 2 and 3 and rejoins: b gets them.
        members.get_mut("a").unwrap().owned_partitions = vec![("t".into(), vec![0, 1])];
        let second = CooperativeStickyAssignor.assign(&parts, &members);
        assert_eq!(second["a"], vec![("t".into(), vec![0, 1])]);
        assert_eq!(second["b"], vec![("t".into(), vec![2, 3])]);
    }

    #[test]
    fn sticky_gives_a_dead_members_partitions_at_once() {
        let parts = counts(&[("t", 6)]);
        let mut members = subs(&[("a", &["t"]), ("c", &["t"])]);
        members.get_mut("a").unwrap().owned_partitions = vec![("t".into(), vec![0, 1])];
        members.get_mut("c").unwrap().owned_partitions = vec![("t".into(), vec![4, 5])];
        // b (owning 2, 3) died: its partitions have no live owner.
        let a = CooperativeStickyAssignor.assign(&parts, &members);
        let total: usize = a
            .values()
            .flat_map(|v| v.iter().map(|(_, p)| p.len()))
            .sum();
        assert_eq!(total, 6);
        assert!(a["a"][0].1.starts_with(&[0, 1]));
        assert!(a["c"][0].1.ends_with(&[4, 5]));
    }
}
