//! `tidelog groups list|describe|reset-offsets`, as kafka-consumer-groups: on a data
//! directory, or with `--bootstrap` on a running node or cluster over the Kafka protocol
//! (`tidelog::admin::AdminClient`).

use crate::cli::{GroupsArgs, GroupsCmd, ResetOffsetsArgs};
use crate::common::{
    close_broker, commit_offsets, counted, data_dir, open_broker, open_broker_read_only,
    parse_time, select_partitions,
};
use crate::out::Out;
use crate::{CliResult, fail};
use std::collections::BTreeMap;
use std::path::Path;
use tidelog::Broker;
use tidelog::consumer::Assignment;
use tidelog::coordinator::{GroupState, GroupType};

/// Runs `tidelog groups ...`; `data` is `--data` if it was given.
pub(crate) fn run(data: Option<&Path>, args: &GroupsArgs) -> CliResult {
    let cmd = &args.cmd;
    let target = match cmd {
        GroupsCmd::ResetOffsets(reset) => Some(target_of(reset)?),
        _ => None,
    };
    if let Some(bootstrap) = &args.target.bootstrap {
        return remote::run(bootstrap, &args.target, data, cmd, target.as_ref());
    }
    // Listing and describing only read: the directory opens read-only (and works while
    // another process holds it).
    let broker = match cmd {
        GroupsCmd::List | GroupsCmd::Describe { .. } => open_broker_read_only(data_dir(data))?,
        GroupsCmd::ResetOffsets { .. } => open_broker(data_dir(data), false)?,
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
        GroupsCmd::ResetOffsets(ResetOffsetsArgs {
            group,
            topic,
            partition,
            dry_run,
            ..
        }) => {
            let target = target.expect("parsed above for reset-offsets");
            reset(
                &broker, &mut out, group, topic, partition, &target, *dry_run,
            )?;
        }
    }
    out.flush()?;
    drop(out);
    close_broker(broker)
}

/// A group as `groups describe` prints it, wherever it was read from.
struct GroupView {
    state: String,
    members: Vec<MemberView>,
    /// The generation, where known (the wire's DescribeGroups does not say).
    generation: Option<i32>,
    /// A consumer-protocol group's group epoch and target assignment epoch.
    epochs: Option<(i32, i32)>,
    /// The assignor of the generation (classic) or of the target (consumer protocol).
    assignor: String,
    /// Committed offsets: (topic, partition) -> offset.
    committed: BTreeMap<(String, i32), i64>,
}

/// Partitions per topic.
type Partitions = Vec<(String, Vec<i32>)>;

/// A member as `groups describe` prints it.
struct MemberView {
    id: String,
    client: String,
    host: String,
    /// The partitions it owns, if it has an assignment.
    assignment: Option<Partitions>,
    /// A consumer-protocol member's epoch and target assignment.
    target: Option<(i32, Partitions)>,
}

impl MemberView {
    /// A classic member, its assignment decoded from the group's bytes (none if empty
    /// or not of the consumer protocol).
    fn classic(id: String, client: String, host: String, assignment: Option<Assignment>) -> Self {
        MemberView {
            id,
            client,
            host,
            assignment: assignment.map(|a| a.partitions),
            target: None,
        }
    }

    /// A consumer-protocol member: its epoch, current and target assignment.
    fn consumer(
        (id, client, host): (String, String, String),
        epoch: i32,
        assignment: Partitions,
        target: Partitions,
    ) -> Self {
        MemberView {
            id,
            client,
            host,
            assignment: Some(assignment),
            target: Some((epoch, target)),
        }
    }
}

/// Partitions as `topic(0,1) other(2)`, `-` for none.
fn partition_list(list: Option<&[(String, Vec<i32>)]>) -> String {
    let text = list
        .unwrap_or_default()
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| {
            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
            format!("{t}({})", ps.join(","))
        })
        .collect::<Vec<_>>()
        .join(" ");
    if text.is_empty() {
        "-".to_string()
    } else {
        text
    }
}

/// One partition line of `groups describe`.
struct Row<'a> {
    /// Topic and partition.
    key: (String, i32),
    /// The group's committed offset, if any.
    committed: Option<i64>,
    /// The member id of its owner, if any.
    owner: Option<&'a str>,
}

impl GroupView {
    /// A group as described: a classic group has its generation where known, a
    /// consumer-protocol group its group and target assignment epochs.
    fn new(
        state: String,
        members: Vec<MemberView>,
        generation: Option<i32>,
        epochs: Option<(i32, i32)>,
        assignor: String,
        committed: BTreeMap<(String, i32), i64>,
    ) -> GroupView {
        GroupView {
            state,
            members,
            generation,
            epochs,
            assignor,
            committed,
        }
    }

    /// Every partition with a committed offset or an owner, sorted.
    fn rows(&self) -> Vec<Row<'_>> {
        let mut owners: BTreeMap<(String, i32), &str> = BTreeMap::new();
        for member in &self.members {
            for (t, ps) in member.assignment.iter().flatten() {
                for p in ps {
                    owners.insert((t.clone(), *p), &member.id);
                }
            }
        }
        let mut keys: Vec<(String, i32)> = self.committed.keys().cloned().collect();
        keys.extend(owners.keys().cloned());
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|key| Row {
                committed: self.committed.get(&key).copied(),
                owner: owners.get(&key).copied(),
                key,
            })
            .collect()
    }
}

/// kafka-consumer-groups --describe's layout: the group line, its members, then per
/// partition the committed offset, the log end (`ends`: the high watermark, what the
/// group can read up to), the lag and the owner.
fn print_group(
    out: &mut Out,
    group: &str,
    view: &GroupView,
    ends: &BTreeMap<(String, i32), i64>,
) -> CliResult {
    let generation = match (view.members.is_empty(), view.generation, view.epochs) {
        (_, _, Some((group_epoch, target_epoch))) => format!(
            ", group epoch {group_epoch}, assignment epoch {target_epoch}, assignor {} (consumer protocol)",
            view.assignor
        ),
        (true, _, None) => String::new(),
        (false, Some(g), None) => format!(", generation {g}, assignor {}", view.assignor),
        (false, None, None) => format!(", assignor {}", view.assignor),
    };
    out.line(format_args!(
        "Consumer group '{group}': state {}, {}{generation}",
        view.state,
        counted(view.members.len() as u64, "member", "members"),
    ))?;
    if !view.members.is_empty() {
        out.line("")?;
        if view.epochs.is_some() {
            out.line("MEMBER-ID\tCLIENT-ID\tHOST\tEPOCH\tASSIGNMENT\tTARGET-ASSIGNMENT")?;
        } else {
            out.line("MEMBER-ID\tCLIENT-ID\tHOST\tASSIGNMENT")?;
        }
        for m in &view.members {
            let assignment = partition_list(m.assignment.as_deref());
            let target = match &m.target {
                Some((epoch, target)) => {
                    format!("\t{epoch}\t{assignment}\t{}", partition_list(Some(target)))
                }
                None => format!("\t{assignment}"),
            };
            out.line(format_args!("{}\t{}\t{}{target}", m.id, m.client, m.host))?;
        }
    }
    out.line("")?;
    out.line("GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID")?;
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    for row in view.rows() {
        let (topic, partition) = &row.key;
        let end = ends.get(&row.key).copied();
        let lag = match (row.committed, end) {
            (Some(c), Some(e)) => Some((e - c).max(0)),
            _ => None,
        };
        out.line(format_args!(
            "{group}\t{topic}\t{partition}\t{}\t{}\t{}\t{}",
            dash(row.committed),
            dash(end),
            dash(lag),
            row.owner.unwrap_or("-")
        ))?;
    }
    Ok(())
}

fn describe(broker: &Broker, out: &mut Out, group: &str) -> CliResult {
    let coord = broker.group_coordinator();
    let offsets = coord
        .offset_fetch(group, None)
        .map_err(|e| fail!("reading the offsets of consumer group {group:?} failed: {e}"))?;
    let committed = offsets
        .into_iter()
        .filter(|o| o.offset >= 0)
        .map(|o| ((o.topic, o.partition), o.offset))
        .collect();
    let view = if coord.group_type(group) == Some(GroupType::Consumer) {
        let d = coord
            .consumer_group_describe(group)
            .map_err(|e| fail!("describing consumer group {group:?} failed: {e}"))?;
        let members = d.members.into_iter().map(|m| {
            MemberView::consumer(
                (m.member_id, m.client_id, m.client_host),
                m.member_epoch,
                m.assignment,
                m.target_assignment,
            )
        });
        GroupView::new(
            d.state.as_str().to_string(),
            members.collect(),
            None,
            Some((d.group_epoch, d.assignment_epoch)),
            d.assignor_name,
            committed,
        )
    } else {
        let d = coord
            .describe_group(group)
            .map_err(|e| fail!("describing consumer group {group:?} failed: {e}"))?;
        if d.state == GroupState::Dead && d.members.is_empty() && committed.is_empty() {
            return Err(fail!("consumer group {group:?} does not exist"));
        }
        let members = d.members.into_iter().map(|m| {
            let assignment = (!m.assignment.is_empty())
                .then(|| Assignment::decode(&m.assignment).ok())
                .flatten();
            MemberView::classic(m.member_id, m.client_id, m.client_host, assignment)
        });
        GroupView::new(
            d.state.as_str().to_string(),
            members.collect(),
            Some(d.generation_id),
            None,
            d.protocol_data,
            committed,
        )
    };
    let ends = view
        .rows()
        .into_iter()
        .filter_map(|row| {
            let (t, p) = row.key;
            let hw = broker.topic(&t).and_then(|t| t.partition(p)).ok()?;
            Some(((t, p), hw.high_watermark()))
        })
        .collect();
    print_group(out, group, &view, &ends)
}

/// Where `reset` moves the offsets (exactly one of the options is given: clap checks).
pub(crate) fn target_of(a: &ResetOffsetsArgs) -> CliResult<Target> {
    Ok(if a.to_earliest {
        Target::Earliest
    } else if a.to_latest {
        Target::Latest
    } else if let Some(n) = a.to_offset {
        Target::Offset(n)
    } else if let Some(d) = &a.to_datetime {
        Target::Time(parse_time(d, "--to-datetime")?)
    } else {
        return Err(fail!(
            "give one of --to-earliest, --to-latest, --to-offset or --to-datetime"
        ));
    })
}

/// Where reset-offsets moves a group.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target {
    Earliest,
    Latest,
    Offset(i64),
    Time(i64),
}

impl Target {
    /// The new offset of a partition whose readable offsets are `lo..hi`; `at_time` is,
    /// for [`Target::Time`], the first offset at or after that time (`None`: after
    /// every record, so the end).
    fn resolve(self, lo: i64, hi: i64, at_time: Option<i64>) -> i64 {
        match self {
            Target::Earliest => lo,
            Target::Latest => hi,
            Target::Offset(n) => n.clamp(lo, hi),
            Target::Time(_) => at_time.unwrap_or(hi),
        }
    }
}

/// Prints the new offsets of a reset.
pub(crate) fn print_reset(
    out: &mut Out,
    group: &str,
    topic: &str,
    offsets: &[(i32, i64)],
    dry_run: bool,
) -> CliResult {
    out.line("GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")?;
    for (partition, offset) in offsets {
        out.line(format_args!("{group}\t{topic}\t{partition}\t{offset}"))?;
    }
    if dry_run {
        out.line("(dry run: nothing was committed)")?;
    }
    Ok(())
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
        let at_time = match *target {
            Target::Time(ts) => p.offset_for_timestamp(ts)?.map(|(o, _)| o),
            _ => None,
        };
        let new = target.resolve(p.log_start_offset(), p.high_watermark(), at_time);
        offsets.push((p.index(), new));
    }
    if !dry_run {
        commit_offsets(broker, group, topic_name, &offsets, "resetting the offsets")?;
    }
    print_reset(out, group, topic_name, &offsets, dry_run)
}

/// The group commands on a running node or cluster (`--bootstrap`).
#[cfg(feature = "server")]
pub(crate) mod remote {
    use super::{
        CliResult, GroupView, GroupsCmd, MemberView, Out, Target, fail, print_group, print_reset,
    };
    use crate::common::{admin_client, only};
    use std::collections::BTreeMap;
    use std::path::Path;
    use tidelog::admin::{
        AdminClient, AdminError, ConsumerGroupDescription, ErrorCode, GroupDescription, OffsetSpec,
        Resource, TopicPartition,
    };

    /// Runs `tidelog groups --bootstrap ADDRS ...`.
    pub(super) fn run(
        bootstrap: &str,
        security: &crate::cli::Bootstrap,
        data: Option<&Path>,
        cmd: &GroupsCmd,
        target: Option<&Target>,
    ) -> CliResult {
        let admin = admin_client(bootstrap, security, data)?;
        let mut out = Out::new();
        match cmd {
            GroupsCmd::List => {
                for g in admin.list_groups()? {
                    out.line(g.group_id)?;
                }
            }
            GroupsCmd::Describe { group } => describe(&admin, &mut out, group)?,
            GroupsCmd::ResetOffsets(crate::cli::ResetOffsetsArgs {
                group,
                topic,
                partition,
                dry_run,
                ..
            }) => {
                let target = *target.expect("parsed for reset-offsets");
                reset(&admin, &mut out, group, topic, partition, target, *dry_run)?;
            }
        }
        out.flush()
    }

    /// The offset of each partition of `specs` that its leader answered.
    fn offsets(
        admin: &AdminClient,
        specs: &[(TopicPartition, OffsetSpec)],
    ) -> tidelog::Result<BTreeMap<TopicPartition, tidelog::Result<Option<i64>>>> {
        Ok(admin
            .list_offsets(specs)?
            .into_iter()
            .map(|(tp, r)| (tp, r.map(|l| l.offset)))
            .collect())
    }

    /// A group as the admin client describes it.
    enum Described {
        /// By DescribeGroups (a classic group, or `Dead`: unknown).
        Classic(GroupDescription),
        /// By ConsumerGroupDescribe (a consumer-protocol group).
        Consumer(ConsumerGroupDescription),
    }

    /// Describes `group` as Kafka's admin client tells the two kinds apart: a group that
    /// DescribeGroups does not describe (`Dead` without members, as Kafka 4 answers a
    /// consumer-protocol group before DescribeGroups v6, or GROUP_ID_NOT_FOUND from v6)
    /// is asked again with ConsumerGroupDescribe; if that does not know it either (or
    /// the broker does not have it), the group is `Dead`.
    fn described(admin: &AdminClient, group: &str) -> tidelog::Result<Described> {
        let not_found = |e: &tidelog::Error| {
            matches!(e, tidelog::Error::Admin(a)
                if a.code == ErrorCode::GROUP_ID_NOT_FOUND || a.code == ErrorCode::UNSUPPORTED_VERSION)
        };
        let classic = match only(admin.describe_groups(&[group])?, group) {
            Ok(d) if d.state == "Dead" && d.members.is_empty() => Some(d),
            Ok(d) => return Ok(Described::Classic(d)),
            Err(e) if not_found(&e) => None,
            Err(e) => return Err(e),
        };
        match (
            only(admin.describe_consumer_groups(&[group])?, group),
            classic,
        ) {
            (Ok(d), _) => Ok(Described::Consumer(d)),
            (Err(e), Some(dead)) if not_found(&e) => Ok(Described::Classic(dead)),
            (Err(e), _) => Err(e),
        }
    }

    /// A consumer-protocol group as `groups describe` prints it.
    fn consumer_view(
        d: ConsumerGroupDescription,
        committed: BTreeMap<(String, i32), i64>,
    ) -> GroupView {
        let grouped = |tps: Vec<TopicPartition>| {
            let mut out: Vec<(String, Vec<i32>)> = Vec::new();
            for tp in tps {
                match out.last_mut() {
                    Some((t, ps)) if *t == tp.topic => ps.push(tp.partition),
                    _ => out.push((tp.topic, vec![tp.partition])),
                }
            }
            out
        };
        let members = d.members.into_iter().map(|m| {
            MemberView::consumer(
                (m.member_id, m.client_id, m.host),
                m.member_epoch,
                grouped(m.assignment),
                grouped(m.target_assignment),
            )
        });
        GroupView::new(
            d.state,
            members.collect(),
            None,
            Some((d.group_epoch, d.assignment_epoch)),
            d.assignor,
            committed,
        )
    }

    fn describe(admin: &AdminClient, out: &mut Out, group: &str) -> CliResult {
        let committed: BTreeMap<(String, i32), i64> = admin
            .list_consumer_group_offsets(group)?
            .into_iter()
            .map(|c| ((c.partition.topic, c.partition.partition), c.offset))
            .collect();
        let view = match described(admin, group)? {
            Described::Consumer(d) => consumer_view(d, committed),
            Described::Classic(d) => {
                if d.state == "Dead" && d.members.is_empty() && committed.is_empty() {
                    let e = AdminError::new(
                        Resource::Group(group.to_string()),
                        ErrorCode::GROUP_ID_NOT_FOUND,
                        Some("no such group: it has no members and no committed offsets".into()),
                    );
                    return Err(tidelog::Error::from(e).into());
                }
                let members = d
                    .members
                    .into_iter()
                    .map(|m| MemberView::classic(m.member_id, m.client_id, m.host, m.assignment));
                GroupView::new(
                    d.state,
                    members.collect(),
                    None,
                    None,
                    d.protocol,
                    committed,
                )
            }
        };
        let specs: Vec<(TopicPartition, OffsetSpec)> = view
            .rows()
            .into_iter()
            .map(|row| {
                (
                    TopicPartition::new(row.key.0, row.key.1),
                    OffsetSpec::Latest,
                )
            })
            .collect();
        // A partition whose leader cannot answer (or that is gone) shows "-".
        let ends = offsets(admin, &specs)?
            .into_iter()
            .filter_map(|(tp, r)| Some(((tp.topic, tp.partition), r.ok()??)))
            .collect();
        print_group(out, group, &view, &ends)
    }

    /// The new offset of each partition of `topic` (of `only_partitions`, or all) that
    /// `target` names, from where its log starts and ends now.
    pub(crate) fn new_offsets(
        admin: &AdminClient,
        topic: &str,
        only_partitions: &[i32],
        target: Target,
    ) -> CliResult<Vec<(i32, i64)>> {
        let count = only(admin.describe_topics(&[topic])?, topic)?
            .partitions
            .len() as i32;
        let partitions: Vec<i32> = if only_partitions.is_empty() {
            (0..count).collect()
        } else {
            only_partitions.to_vec()
        };
        if let Some(p) = partitions.iter().find(|p| !(0..count).contains(*p)) {
            return Err(fail!(
                "unknown partition {p} of topic {topic:?} (it has {count} partitions)"
            ));
        }
        let spec = |s: OffsetSpec| -> Vec<(TopicPartition, OffsetSpec)> {
            partitions
                .iter()
                .map(|p| (TopicPartition::new(topic, *p), s))
                .collect()
        };
        let lo = offsets(admin, &spec(OffsetSpec::Earliest))?;
        let hi = offsets(admin, &spec(OffsetSpec::Latest))?;
        let at = match target {
            Target::Time(ts) => Some(offsets(admin, &spec(OffsetSpec::Timestamp(ts)))?),
            _ => None,
        };
        let mut new = Vec::new();
        for &p in &partitions {
            let tp = TopicPartition::new(topic, p);
            let get = |m: &BTreeMap<TopicPartition, tidelog::Result<Option<i64>>>| {
                m.get(&tp).cloned().unwrap_or(Ok(None))
            };
            let (Some(l), Some(h)) = (get(&lo)?, get(&hi)?) else {
                return Err(fail!(
                    "the leader of {tp} did not say where its log starts and ends"
                ));
            };
            let at_time = match &at {
                Some(at) => get(at)?,
                None => None,
            };
            new.push((p, target.resolve(l, h, at_time)));
        }
        Ok(new)
    }

    fn reset(
        admin: &AdminClient,
        out: &mut Out,
        group: &str,
        topic: &str,
        only_partitions: &[i32],
        target: Target,
        dry_run: bool,
    ) -> CliResult {
        // As kafka-consumer-groups: only an inactive group's offsets move (a group of
        // the consumer protocol is described by ConsumerGroupDescribe).
        let (state, members) = match described(admin, group)? {
            Described::Consumer(d) => (d.state, d.members.len()),
            Described::Classic(d) => (d.state, d.members.len()),
        };
        if members > 0 || !matches!(state.as_str(), "Empty" | "Dead") {
            let e = AdminError::new(
                Resource::Group(group.to_string()),
                ErrorCode::NON_EMPTY_GROUP,
                Some(format!(
                    "assignments can only be reset if the group is inactive, but its state is {state} with {members} members"
                )),
            );
            return Err(tidelog::Error::from(e).into());
        }
        let new = new_offsets(admin, topic, only_partitions, target)?;
        if !dry_run {
            let commits: Vec<(TopicPartition, i64)> = new
                .iter()
                .map(|&(p, o)| (TopicPartition::new(topic, p), o))
                .collect();
            for (_, result) in admin.alter_consumer_group_offsets(group, &commits)? {
                result?;
            }
        }
        print_reset(out, group, topic, &new, dry_run)
    }
}

/// Without the `server` feature there is no Kafka client: `--bootstrap` is refused.
#[cfg(not(feature = "server"))]
mod remote {
    use super::{CliResult, GroupsCmd, Target};
    use std::path::Path;

    pub(super) fn run(
        _: &str,
        _: &crate::cli::Bootstrap,
        _: Option<&Path>,
        _: &GroupsCmd,
        _: Option<&Target>,
    ) -> CliResult {
        Err(crate::common::no_admin_client())
    }
}
