//! `tidelog cluster drain --node N` and `tidelog cluster unregister --node N`: retiring
//! a node of a running cluster. Drain moves every replica the node holds to the other
//! nodes (`tidelog::admin::drain_plan`, then AlterPartitionReassignments) and waits,
//! printing its progress, until the node holds nothing; unregister (UnregisterBroker)
//! then removes the stopped node from the cluster's metadata.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tidelog::admin::{AdminClient, TopicPartition, drain_plan};

use crate::out::Out;
use crate::{CliResult, fail};

/// How often a drain looks at the moves in progress.
const POLL: Duration = Duration::from_millis(500);

/// `tidelog cluster drain --node N [--timeout SECS]`.
pub(crate) fn drain(admin: &AdminClient, node: i32, timeout: Duration) -> CliResult {
    let mut out = Out::new();
    let plan = drain_plan(&admin.metadata()?, node)?;
    if plan.is_empty() {
        out.line(format!("Node {node} holds no replica: nothing to move."))?;
        return out.flush();
    }
    out.line(format!("Moving {} replica(s) off node {node}:", plan.len()))?;
    let metadata = admin.metadata()?;
    for (tp, target) in &plan {
        let now = metadata
            .topics
            .iter()
            .find(|t| t.name == tp.topic)
            .and_then(|t| t.partitions.iter().find(|p| p.partition == tp.partition))
            .map_or_else(Vec::new, |p| p.replicas.clone());
        out.line(format!(
            "  {}-{}: {now:?} -> {target:?}",
            tp.topic, tp.partition
        ))?;
    }
    out.flush()?;
    let moves: Vec<(TopicPartition, Option<Vec<i32>>)> = plan
        .iter()
        .map(|(tp, r)| (tp.clone(), Some(r.clone())))
        .collect();
    let mut refused = Vec::new();
    for (tp, r) in admin.alter_partition_reassignments(&moves)? {
        if let Err(e) = r {
            refused.push(format!("{}-{}: {e}", tp.topic, tp.partition));
        }
    }
    if !refused.is_empty() {
        return Err(fail!(
            "{} move(s) off node {node} were refused: {}",
            refused.len(),
            refused.join("; ")
        ));
    }
    let total = plan.len();
    let deadline = Instant::now() + timeout;
    let mut last_left = total + 1;
    loop {
        let held: BTreeSet<String> = admin
            .metadata()?
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|p| p.replicas.contains(&node))
                    .map(|p| format!("{}-{}", t.name, p.partition))
            })
            .collect();
        let moving = admin.list_partition_reassignments(None)?.len();
        let left = held.len();
        if left != last_left {
            out.line(format!(
                "{} of {total} moved; {left} replica(s) left on node {node}, {moving} reassignment(s) in progress",
                total.saturating_sub(left)
            ))?;
            out.flush()?;
            last_left = left;
        }
        if left == 0 {
            out.line(format!(
                "Node {node} is drained. Stop it, then: tidelog cluster unregister --node {node}"
            ))?;
            return out.flush();
        }
        if Instant::now() >= deadline {
            return Err(fail!(
                "node {node} still holds {left} replica(s) after {}s ({}); the moves go on: run tidelog cluster drain again to wait, or tidelog reassign --list",
                timeout.as_secs(),
                held.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// `tidelog cluster unregister --node N`.
pub(crate) fn unregister(admin: &AdminClient, node: i32) -> CliResult {
    admin.unregister_broker(node)?;
    let mut out = Out::new();
    out.line(format!("Node {node} is unregistered."))?;
    out.flush()
}
