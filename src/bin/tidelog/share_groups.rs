//! `tidelog share-groups describe|reset-offsets|delete-offsets --bootstrap ADDRS`: the
//! start offsets of share groups (KIP-932) on a running node or cluster, as
//! kafka-share-groups shows and changes them.

use std::path::Path;

use tidelog::admin::{AdminClient, OffsetSpec, TopicPartition};

use crate::cli::{ShareGroupsArgs, ShareGroupsCmd};
use crate::common::admin_client;
use crate::groups::print_reset;
use crate::groups::remote::new_offsets;
use crate::out::Out;
use crate::{CliResult, fail};

/// Runs `tidelog share-groups ...`.
pub(crate) fn run(given: Option<&Path>, args: &ShareGroupsArgs) -> CliResult {
    let Some(bootstrap) = &args.target.bootstrap else {
        return Err(fail!(
            "tidelog share-groups acts on a running node or cluster: give --bootstrap HOST:PORT"
        ));
    };
    let admin = admin_client(bootstrap, &args.target, given)?;
    let mut out = Out::new();
    match &args.cmd {
        ShareGroupsCmd::Describe { group } => describe(&admin, &mut out, group)?,
        ShareGroupsCmd::ResetOffsets(args) => {
            let target = crate::groups::target_of(args)?;
            let new = new_offsets(&admin, &args.topic, &args.partition, target)?;
            if !args.dry_run {
                let starts: Vec<(TopicPartition, i64)> = new
                    .iter()
                    .map(|&(p, o)| (TopicPartition::new(&args.topic, p), o))
                    .collect();
                for (_, result) in admin.alter_share_group_offsets(&args.group, &starts)? {
                    result?;
                }
            }
            print_reset(&mut out, &args.group, &args.topic, &new, args.dry_run)?;
        }
        ShareGroupsCmd::DeleteOffsets { group, topic } => {
            let topics: Vec<&str> = topic.iter().map(String::as_str).collect();
            out.line("GROUP\tTOPIC\tSTATUS")?;
            for (t, result) in admin.delete_share_group_offsets(group, &topics)? {
                result?;
                out.line(format_args!("{group}\t{t}\tdeleted"))?;
            }
        }
    }
    out.flush()
}

/// The end offset (high watermark) of each of `partitions`, None where its leader did
/// not answer.
fn ends(
    admin: &AdminClient,
    partitions: &[TopicPartition],
    spec: OffsetSpec,
) -> CliResult<Vec<Option<i64>>> {
    let specs: Vec<(TopicPartition, OffsetSpec)> =
        partitions.iter().map(|tp| (tp.clone(), spec)).collect();
    let answers = admin.list_offsets(&specs)?;
    Ok(partitions
        .iter()
        .map(|tp| {
            answers
                .get(tp)
                .and_then(|r| r.as_ref().ok())
                .and_then(|l| l.offset)
        })
        .collect())
}

fn describe(admin: &AdminClient, out: &mut Out, group: &str) -> CliResult {
    let offsets = admin.describe_share_group_offsets(group, None)?;
    let mut rows = Vec::new();
    for (tp, r) in offsets {
        rows.push((tp, r?));
    }
    let partitions: Vec<TopicPartition> = rows.iter().map(|(tp, _)| tp.clone()).collect();
    let ends = ends(admin, &partitions, OffsetSpec::Latest)?;
    out.line("GROUP\tTOPIC\tPARTITION\tSTART-OFFSET\tLEADER-EPOCH\tLAG")?;
    for ((tp, o), end) in rows.iter().zip(ends) {
        let show = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        let lag = o.start_offset.zip(end).map(|(s, e)| (e - s).max(0));
        out.line(format_args!(
            "{group}\t{}\t{}\t{}\t{}\t{}",
            tp.topic,
            tp.partition,
            show(o.start_offset),
            show(o.leader_epoch.map(i64::from)),
            show(lag),
        ))?;
    }
    Ok(())
}
