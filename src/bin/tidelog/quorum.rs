//! `tidelog quorum describe|add-voter|remove-voter --bootstrap ADDRS`: the metadata
//! quorum of a running cluster, as kafka-metadata-quorum shows and changes it.

use std::path::Path;

use tidelog::admin::{QuorumInfo, QuorumReplica};

use crate::cli::{QuorumArgs, QuorumCmd};
use crate::common::admin_client;
use crate::out::Out;
use crate::{CliResult, fail};

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
        .map(|r| (r, if r.node == q.leader { "Leader" } else { "Follower" }))
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
