//! `tidelog groups list|describe|reset-offsets`, as kafka-consumer-groups.

use crate::cli::GroupsCmd;
use crate::common::{
    close_broker, commit_offsets, counted, open_broker, open_broker_read_only, parse_time,
    select_partitions,
};
use crate::out::Out;
use crate::{CliResult, fail};
use std::path::Path;
use tidelog::{Assignment, Broker, GroupState, Partition};

/// Runs `tidelog groups ...`.
pub(crate) fn run(data: &Path, cmd: &GroupsCmd) -> CliResult {
    let broker = match cmd {
        GroupsCmd::List | GroupsCmd::Describe { .. } => open_broker_read_only(data)?,
        GroupsCmd::ResetOffsets { .. } => open_broker(data, false)?,
    };
    let mut out = Out::new();
    match cmd {
        GroupsCmd::List => {
            let groups = broker
                .group_coordinator()
                .list_groups(&[])
                .map_err(|e| fail!("listing consumer groups failed: {e}"))?;
            for g in groups {
                out.line(g.group_id)?;
            }
        }
        GroupsCmd::Describe { group } => describe(&broker, &mut out, group)?,
        GroupsCmd::ResetOffsets {
            group,
            topic,
            partition,
            to_earliest,
            to_latest,
            to_offset,
            to_datetime,
            dry_run,
        } => {
            let target = if *to_earliest {
                Target::Earliest
            } else if *to_latest {
                Target::Latest
            } else if let Some(n) = to_offset {
                Target::Offset(*n)
            } else if let Some(d) = to_datetime {
                Target::Time(parse_time(d, "--to-datetime")?)
            } else {
                return Err(fail!(
                    "give one of --to-earliest, --to-latest, --to-offset or --to-datetime"
                ));
            };
            reset(
                &broker, &mut out, group, topic, partition, &target, *dry_run,
            )?;
        }
    }
    out.flush()?;
    drop(out);
    close_broker(broker)
}

fn describe(broker: &Broker, out: &mut Out, group: &str) -> CliResult {
    let coord = broker.group_coordinator();
    let d = coord
        .describe_group(group)
        .map_err(|e| fail!("describing consumer group {group:?} failed: {e}"))?;
    let mut offsets = coord
        .offset_fetch(group, None)
        .map_err(|e| fail!("reading the offsets of consumer group {group:?} failed: {e}"))?;
    if d.state == GroupState::Dead && d.members.is_empty() && offsets.is_empty() {
        return Err(fail!("consumer group {group:?} does not exist"));
    }
    let generation = if d.members.is_empty() {
        String::new()
    } else {
        format!(
            ", generation {}, assignor {}",
            d.generation_id, d.protocol_data
        )
    };
    out.line(format_args!(
        "Consumer group '{group}': state {}, {}{generation}",
        d.state.as_str(),
        counted(d.members.len() as u64, "member", "members"),
    ))?;
    // Which member owns which partition, from the members' assignments.
    let mut owners: Vec<(String, i32, String)> = Vec::new();
    if !d.members.is_empty() {
        out.line("")?;
        out.line("MEMBER-ID\tCLIENT-ID\tHOST\tASSIGNMENT")?;
        for m in &d.members {
            let assignment = match Assignment::decode(&m.assignment) {
                Ok(a) if !m.assignment.is_empty() => {
                    for (t, ps) in &a.partitions {
                        for p in ps {
                            owners.push((t.clone(), *p, m.member_id.clone()));
                        }
                    }
                    a.partitions
                        .iter()
                        .map(|(t, ps)| {
                            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
                            format!("{t}({})", ps.join(","))
                        })
                        .collect::<Vec<_>>()
                        .join(" ")
                }
                _ => "-".to_string(),
            };
            out.line(format_args!(
                "{}\t{}\t{}\t{assignment}",
                m.member_id, m.client_id, m.client_host
            ))?;
        }
    }
    // Partitions assigned but never committed are shown too, without an offset.
    for (t, p, _) in &owners {
        if !offsets.iter().any(|o| &o.topic == t && o.partition == *p) {
            offsets.push(tidelog::coordinator::FetchedOffset {
                topic: t.clone(),
                partition: *p,
                offset: -1,
                leader_epoch: -1,
                metadata: String::new(),
            });
        }
    }
    offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    out.line("")?;
    out.line("GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID")?;
    for o in &offsets {
        let end = broker
            .topic(&o.topic)
            .and_then(|t| t.partition(o.partition))
            .map(|p| p.high_watermark())
            .ok();
        let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let current = (o.offset >= 0).then_some(o.offset);
        let lag = match (current, end) {
            (Some(c), Some(e)) => Some((e - c).max(0)),
            _ => None,
        };
        let owner = owners
            .iter()
            .find(|(t, p, _)| t == &o.topic && *p == o.partition)
            .map_or("-", |(_, _, m)| m.as_str());
        out.line(format_args!(
            "{group}\t{}\t{}\t{}\t{}\t{}\t{owner}",
            o.topic,
            o.partition,
            dash(current),
            dash(end),
            dash(lag)
        ))?;
    }
    Ok(())
}

/// Where reset-offsets moves a group.
enum Target {
    Earliest,
    Latest,
    Offset(i64),
    Time(i64),
}

fn new_offset(p: &Partition, target: &Target) -> CliResult<i64> {
    let (lo, hi) = (p.log_start_offset(), p.high_watermark());
    Ok(match *target {
        Target::Earliest => lo,
        Target::Latest => hi,
        Target::Offset(n) => n.clamp(lo, hi),
        Target::Time(ts) => p.offset_for_timestamp(ts)?.map_or(hi, |(o, _)| o),
    })
}

fn reset(
    broker: &Broker,
    out: &mut Out,
    group: &str,
    topic_name: &str,
    only: &[i32],
    target: &Target,
    dry_run: bool,
) -> CliResult {
    let topic = broker.topic(topic_name)?;
    let partitions = select_partitions(&topic, only)?;
    let mut offsets = Vec::new();
    for p in &partitions {
        offsets.push((p.index(), new_offset(p, target)?));
    }
    if !dry_run {
        commit_offsets(broker, group, topic_name, &offsets, "resetting the offsets")?;
    }
    out.line("GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")?;
    for (partition, offset) in &offsets {
        out.line(format_args!("{group}\t{topic_name}\t{partition}\t{offset}"))?;
    }
    if dry_run {
        out.line("(dry run: nothing was committed)")?;
    }
    Ok(())
}
