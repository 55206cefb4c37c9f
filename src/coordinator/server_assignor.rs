//! The server-side assignors of consumer-protocol groups (KIP-848,
//! `group.consumer.assignors`): "uniform" (the default) and "range". Each computes a
//! target assignment from the members' resolved subscriptions and the topics'
//! partition counts; both are deterministic (members and topics in name order).

use std::collections::{BTreeMap, BTreeSet};

/// A member's partitions, by topic name.
pub(crate) type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// The assignors this coordinator implements.
pub(crate) const ASSIGNORS: &[&str] = &["uniform", "range"];

/// The target assignment of `assignor` ("uniform" or "range"; anything else is
/// "uniform"). `subscriptions`: each member's topics (existing ones only);
/// `partitions`: each topic's partition count; `previous`: the last target, which
/// "uniform" keeps as much of as balance allows.
pub(crate) fn assign(
    assignor: &str,
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    partitions: &BTreeMap<String, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    match assignor {
        "range" => range(subscriptions, partitions),
        _ => uniform(subscriptions, partitions, previous),
    }
}

/// Range: for each topic, its partitions in contiguous ranges over the members
/// subscribed to it, in member id order; the first `partitions % members` get one more.
fn range(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, &count) in partitions {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() || count <= 0 {
            continue;
        }
        let n = members.len() as i32;
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, m) in members.into_iter().enumerate() {
            let take = each + i32::from((i as i32) < extra);
            if take > 0 {
                let parts = out.entry(m.clone()).or_default();
                parts
                    .entry(topic.clone())
                    .or_default()
                    .extend(next..next + take);
            }
            next += take;
        }
    }
    out
}

/// Uniform: every partition of a subscribed topic goes to a member subscribed to it,
/// balanced (no member could take a partition from one holding two more than itself)
/// and sticky (a partition stays with its previous target owner while that keeps the
/// balance).
fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    partitions: &BTreeMap<String, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let all: Vec<(&String, i32)> = partitions
        .iter()
        .filter(|(t, _)| subscriptions.values().any(|s| s.contains(*t)))
        .flat_map(|(t, &n)| (0..n.max(0)).map(move |p| (t, p)))
        .collect();
    let eligible = |topic: &String| -> Vec<&String> {
        subscriptions
            .iter()
            .filter(|(_, s)| s.contains(topic))
            .map(|(m, _)| m)
            .collect()
    };
    let mut counts: BTreeMap<&String, usize> = subscriptions.keys().map(|m| (m, 0)).collect();
    let mut owner: BTreeMap<(&String, i32), &String> = BTreeMap::new();
    // Keep the previous target where the member still subscribes.
    for (m, assignment) in previous {
        let Some((m, subscribed)) = subscriptions.get_key_value(m) else {
            continue;
        };
        for (t, parts) in assignment {
            let Some((t, &n)) = partitions.get_key_value(t) else {
                continue;
            };
            if !subscribed.contains(t) {
                continue;
            }
            for &p in parts.iter().filter(|&&p| p < n) {
                owner.insert((t, p), m);
                *counts.entry(m).or_default() += 1;
            }
        }
    }
    // Give each partition without an owner to the least loaded eligible member.
    for &(t, p) in &all {
        if owner.contains_key(&(t, p)) {
            continue;
        }
        if let Some(m) = eligible(t).into_iter().min_by_key(|m| (counts[m], *m)) {
            owner.insert((t, p), m);
            *counts.entry(m).or_default() += 1;
        }
    }
    // Move partitions from loaded members to eligible members holding two fewer, until
    // none can move (each move lowers the sum of squared counts, so this ends). The
    // last partitions move first: a member keeps the first ones it held, as with
    // Kafka's uniform assignor (librdkafka's tests of `group.protocol=consumer` count
    // on which ones stay).
    let mut moved = true;
    while moved {
        moved = false;
        for &(t, p) in all.iter().rev() {
            let from = owner[&(t, p)];
            let to = eligible(t)
                .into_iter()
                .filter(|m| counts[m] + 1 < counts[from])
                .min_by_key(|m| (counts[m], *m));
            if let Some(to) = to {
                owner.insert((t, p), to);
                *counts.entry(from).or_default() -= 1;
                *counts.entry(to).or_default() += 1;
                moved = true;
            }
        }
    }
    let mut out: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for ((t, p), m) in owner {
        out.entry(m.clone())
            .or_default()
            .entry(t.clone())
            .or_default()
            .insert(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        members
            .iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn range_splits_each_topic_in_contiguous_ranges() {
        let s = subs(&[("a", &["t"]), ("b", &["t"])]);
        let parts = BTreeMap::from([("t".to_string(), 5)]);
        let out = range(&s, &parts);
        assert_eq!(out["a"]["t"], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["b"]["t"], BTreeSet::from([3, 4]));
    }

    #[test]
    fn uniform_balances_and_keeps_previous_owners() {
        let parts = BTreeMap::from([("t".to_string(), 4)]);
        let one = uniform(&subs(&[("a", &["t"])]), &parts, &BTreeMap::new());
        assert_eq!(count(&one["a"]), 4);
        let two = uniform(&subs(&[("a", &["t"]), ("b", &["t"])]), &parts, &one);
        assert_eq!((count(&two["a"]), count(&two["b"])), (2, 2));
        // What a kept was its own before: its first partitions.
        assert!(two["a"]["t"].is_subset(&one["a"]["t"]));
        assert_eq!(two["a"]["t"], BTreeSet::from([0, 1]));
        // Six partitions, members joining one by one (librdkafka's 0113
        // x_incremental_rebalances): each keeps its first ones, the last move.
        let parts = BTreeMap::from([("t".to_string(), 6)]);
        let c0 = uniform(&subs(&[("c0", &["t"])]), &parts, &BTreeMap::new());
        let c1 = uniform(&subs(&[("c0", &["t"]), ("c1", &["t"])]), &parts, &c0);
        assert_eq!(c1["c0"]["t"], BTreeSet::from([0, 1, 2]));
        assert_eq!(c1["c1"]["t"], BTreeSet::from([3, 4, 5]));
        let c2 = uniform(
            &subs(&[("c0", &["t"]), ("c1", &["t"]), ("c2", &["t"])]),
            &parts,
            &c1,
        );
        assert_eq!(c2["c0"]["t"], BTreeSet::from([0, 1]));
        assert_eq!(c2["c1"]["t"], BTreeSet::from([3, 4]));
        assert_eq!(c2["c2"]["t"], BTreeSet::from([2, 5]));
        // Heterogeneous: u subscribes only to x, which it gets whole.
        let parts = BTreeMap::from([("t".to_string(), 2), ("x".to_string(), 2)]);
        let het = uniform(
            &subs(&[("a", &["t", "x"]), ("u", &["x"])]),
            &parts,
            &BTreeMap::new(),
        );
        assert_eq!(count(&het["a"]) + count(&het["u"]), 4);
        assert!(!het["u"].contains_key("t"));
        assert_eq!(count(&het["u"]), 2);
    }
}
