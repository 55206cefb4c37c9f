//! `tidelog quorum describe|add-voter|remove-voter --bootstrap ADDRS`: the metadata
//! quorum of a running cluster, as kafka-metadata-quorum shows and changes it; and
//! `tidelog cluster describe --bootstrap ADDRS`: its nodes with their roles and replicas.

use std::path::Path;

use tidelog::admin::{QuorumInfo, QuorumReplica};

use std::collections::BTreeMap;

use crate::cli::{ClusterArgs, ClusterCmd, QuorumArgs, QuorumCmd};
use crate::common::admin_client;
use crate::out::Out;
use crate::{CliResult, fail};

/// `tidelog cluster describe`: Metadata (the live brokers and every partition's
/// replicas) and DescribeQuorum (who votes, who only follows, when each was last heard
/// from) together.
pub(crate) fn cluster(given: Option<&Path>, args: &ClusterArgs) -> CliResult {
    let Some(bootstrap) = &args.target.bootstrap else {
        return Err(fail!(
            "tidelog cluster acts on a running cluster: give --bootstrap HOST:PORT"
        ));
    };
    let admin = admin_client(bootstrap, &args.target, given)?;
    match args.cmd {
        ClusterCmd::Describe => {}
        ClusterCmd::Drain { node, timeout } => {
            return crate::drain::drain(&admin, node, std::time::Duration::from_secs(timeout));
        }
        ClusterCmd::Unregister { node } => return crate::drain::unregister(&admin, node),
    }
    let metadata = admin.metadata()?;
    let quorum = admin.describe_metadata_quorum()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    // Node id -> (replicas, partitions led).
    let mut held: BTreeMap<i32, (Vec<String>, usize)> = BTreeMap::new();
    for b in &metadata.brokers {
        held.entry(b.id).or_default();
    }
    for r in quorum.voters.iter().chain(&quorum.observers) {
        held.entry(r.node).or_default();
    }
    for t in &metadata.topics {
        for p in &t.partitions {
            for r in &p.replicas {
                let e = held.entry(*r).or_default();
                e.0.push(format!("{}-{}", t.name, p.partition));
                if p.leader == Some(*r) {
                    e.1 += 1;
                }
            }
        }
    }
    let mut out = Out::new();
    if let Some(id) = &metadata.cluster_id {
        out.line(format!("ClusterId: {id}  Controller: {}", quorum.leader))?;
    }
    for (node, (replicas, led)) in &held {
        let role = if quorum.voters.iter().any(|r| r.node == *node) {
            "voter"
        } else {
            "broker"
        };
        let broker = metadata.brokers.iter().find(|b| b.id == *node);
        let listener = broker.map_or("-".to_string(), |b| format!("{}:{}", b.host, b.port));
        let heard = quorum
            .voters
            .iter()
            .chain(&quorum.observers)
            .find(|r| r.node == *node)
            .filter(|r| r.last_fetch_timestamp >= 0)
            .map_or("-".to_string(), |r| {
                format!("{}ms", (now - r.last_fetch_timestamp).max(0))
            });
        let liveness = if broker.is_some() { "alive" } else { "fenced" };
        let rack = broker
            .and_then(|b| b.rack.clone())
            .unwrap_or_else(|| "-".into());
        out.line(format!(
            "Node: {node}  Role: {role}  Listener: {listener}  Rack: {rack}  Liveness: {liveness}  LastHeard: {heard}  Replicas: {}  Leaders: {led}",
            replicas.len()
        ))?;
        if !replicas.is_empty() {
            out.line(format!("  {}", replicas.join(",")))?;
        }
    }
    out.flush()
}

pub(crate) fn run(given: Option<&Path>, args: &QuorumArgs) -> CliResult {
    let Some(bootstrap) = &args.target.bootstrap else {
        return Err(fail!(
            "tidelog quorum acts on a running cluster: give --bootstrap HOST:PORT"
        ));
    };
    let admin = admin_client(bootstrap, &args.target, given)?;
    let mut out = Out::new();
    match &args.cmd {
        QuorumCmd::Describe => describe(&mut out, &admin.describe_metadata_quorum()?)?,
        QuorumCmd::AddVoter {
            node_id,
            directory_id,
        } => {
            admin.add_raft_voter(*node_id, directory_id.as_deref())?;
            out.line(format!("node {node_id} is a voter"))?;
        }
        QuorumCmd::RemoveVoter {
            node_id,
            directory_id,
        } => {
            admin.remove_raft_voter(*node_id, directory_id.as_deref())?;
            out.line(format!("node {node_id} is no longer a voter"))?;
        }
    }
    out.flush()
}

/// kafka-metadata-quorum's `describe --status`, then `--replication`.
fn describe(out: &mut Out, q: &QuorumInfo) -> CliResult {
    let ids = |r: &[QuorumReplica]| {
        r.iter()
            .map(|r| r.node.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    out.line(format!("LeaderId:          {}", q.leader))?;
    out.line(format!("LeaderEpoch:       {}", q.leader_epoch))?;
    out.line(format!("HighWatermark:     {}", q.high_watermark))?;
    out.line(format!("CurrentVoters:     [{}]", ids(&q.voters)))?;
    out.line(format!("CurrentObservers:  [{}]", ids(&q.observers)))?;
    out.line("")?;
    out.line(format!(
        "{:<7} {:<23} {:<14} {:<8} {:<14} {:<22} {}",
        "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchMsAgo", "QuorumAddress", "Status"
    ))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let rows = q
        .voters
        .iter()
        .map(|r| {
            (
                r,
                if r.node == q.leader {
                    "Leader"
                } else {
                    "Follower"
                },
            )
        })
        .chain(q.observers.iter().map(|r| (r, "Observer")));
    for (r, status) in rows {
        let lag = if r.log_end_offset >= 0 {
            (q.high_watermark - r.log_end_offset).max(0).to_string()
        } else {
            "-".into()
        };
        let ago = if r.last_fetch_timestamp >= 0 {
            (now - r.last_fetch_timestamp).max(0).to_string()
        } else {
            "-".into()
        };
        let addr = q
            .addresses
            .iter()
            .find(|(n, _)| *n == r.node)
            .map_or("-", |(_, a)| a.as_str());
        out.line(format!(
            "{:<7} {:<23} {:<14} {:<8} {:<14} {:<22} {}",
            r.node,
            r.directory_id.as_deref().unwrap_or("-"),
            r.log_end_offset,
            lag,
            ago,
            addr,
            status
        ))?;
    }
    Ok(())
}
