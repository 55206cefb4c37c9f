//! `tidelog reassign --execute --throttle BYTES` and the throttle's removal by
//! `--verify`, as kafka-reassign-partitions does them (KIP-73): the moving partitions'
//! current replicas are leader-throttled, their new replicas follower-throttled (the
//! topics' `leader.replication.throttled.replicas` and
//! `follower.replication.throttled.replicas`), and every broker of the moves gets
//! `leader.replication.throttled.rate` and `follower.replication.throttled.rate`; once
//! every move of the plan completed, `--verify` removes them wherever they are set.

use std::collections::{BTreeMap, BTreeSet};

use tidelog::admin::{AdminClient, AlterConfigOp, ConfigSource, TopicPartition};

use crate::out::Out;
use crate::{CliResult, fail};

const LEADER_RATE: &str = "leader.replication.throttled.rate";
const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

/// Throttles the moves from `now` to `target` (both per partition) at `rate` bytes/s.
pub(crate) fn set(
    out: &mut Out,
    admin: &AdminClient,
    rate: i64,
    now: &[(TopicPartition, Vec<i32>)],
    target: &[(TopicPartition, Vec<i32>)],
) -> CliResult {
    if rate < 0 {
        return Err(fail!(
            "--throttle {rate}: a rate in bytes per second is at least 0"
        ));
    }
    // Per topic: the replicas to throttle as leaders and as followers.
    let mut topics: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
    let mut brokers = BTreeSet::new();
    for (tp, new) in target {
        let Some((_, old)) = now.iter().find(|(n, _)| n == tp) else {
            continue;
        };
        if old == new {
            continue;
        }
        let (leaders, followers) = topics.entry(tp.topic.as_str()).or_default();
        leaders.extend(old.iter().map(|b| format!("{}:{b}", tp.partition)));
        followers.extend(
            new.iter()
                .filter(|b| !old.contains(b))
                .map(|b| format!("{}:{b}", tp.partition)),
        );
        brokers.extend(old.iter().chain(new).copied());
    }
    for (topic, (leaders, followers)) in &topics {
        let ops = vec![
            AlterConfigOp::Set(LEADER_REPLICAS.into(), leaders.join(",")),
            AlterConfigOp::Set(FOLLOWER_REPLICAS.into(), followers.join(",")),
        ];
        for (name, r) in admin.alter_configs(&[(topic, ops)])? {
            r.map_err(|e| fail!("topic {name:?}: cannot set its throttled replicas: {e}"))?;
        }
    }
    let value = rate.to_string();
    for b in &brokers {
        let ops = [
            AlterConfigOp::Set(LEADER_RATE.into(), value.clone()),
            AlterConfigOp::Set(FOLLOWER_RATE.into(), value.clone()),
        ];
        admin
            .alter_broker_configs(Some(*b), &ops)
            .map_err(|e| fail!("broker {b}: cannot set its replication throttle: {e}"))?;
    }
    out.line("Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.")?;
    out.line(format!(
        "The inter-broker throttle limit was set to {rate} B/s"
    ))?;
    Ok(())
}

/// Removes the throttle rates from every broker of the cluster and the throttled
/// replicas from `topics`, where they are set, saying what it removed.
pub(crate) fn clear(out: &mut Out, admin: &AdminClient, topics: &[&str]) -> CliResult {
    let mut cleared = Vec::new();
    for b in admin.metadata()?.brokers {
        let set: Vec<AlterConfigOp> = admin
            .describe_broker_configs(b.id)?
            .into_iter()
            .filter(|e| {
                [LEADER_RATE, FOLLOWER_RATE].contains(&e.name.as_str())
                    && e.source == ConfigSource::DynamicBroker
            })
            .map(|e| AlterConfigOp::Delete(e.name))
            .collect();
        if !set.is_empty() {
            admin.alter_broker_configs(Some(b.id), &set)?;
            cleared.push(b.id.to_string());
        }
    }
    if !cleared.is_empty() {
        out.line(format!(
            "Clearing broker-level throttles on brokers {}",
            cleared.join(",")
        ))?;
    }
    let mut cleared = Vec::new();
    for (topic, entries) in admin.describe_configs(topics)? {
        let entries = entries.map_err(|e| fail!("topic {topic:?}: {e}"))?;
        let set: Vec<AlterConfigOp> = entries
            .into_iter()
            .filter(|e| {
                [LEADER_REPLICAS, FOLLOWER_REPLICAS].contains(&e.name.as_str())
                    && e.source == ConfigSource::Topic
            })
            .map(|e| AlterConfigOp::Delete(e.name))
            .collect();
        if !set.is_empty() {
            for (name, r) in admin.alter_configs(&[(&topic, set)])? {
                r.map_err(|e| fail!("topic {name:?}: cannot remove its throttled replicas: {e}"))?;
            }
            cleared.push(topic);
        }
    }
    if !cleared.is_empty() {
        out.line(format!(
            "Clearing topic-level throttles on topics {}",
            cleared.join(",")
        ))?;
    }
    Ok(())
}
