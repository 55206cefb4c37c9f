//! `tidelog leader-election`, `tidelog log-dirs describe` and `tidelog reassign`, as
//! Kafka's kafka-leader-election, kafka-log-dirs and kafka-reassign-partitions: on a
//! running cluster over the Kafka protocol (`--bootstrap`), with Kafka's JSON files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args, Subcommand};
use serde_json::{Value, json};
use tidelog::admin::{AdminClient, ElectionType, ErrorCode, TopicPartition};

use crate::cli::Bootstrap;
use crate::common::admin_client;
use crate::out::Out;
use crate::reassign_dirs::ReplicaDir;
use crate::{CliResult, Fail, fail};

/// `tidelog leader-election --bootstrap ADDRS --election-type preferred|unclean ...`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["all_topic_partitions", "topic", "path_to_json_file"])))]
pub(crate) struct LeaderElectionArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    /// PREFERRED: the first replica leads again where it is alive and in sync.
    /// UNCLEAN: a partition without a leader is led by any live replica, even out of
    /// sync, losing what only the old in-sync replicas had.
    #[arg(long, value_name = "TYPE")]
    pub election_type: String,
    /// Every partition of the cluster.
    #[arg(long)]
    pub all_topic_partitions: bool,
    /// The topic of the partition to elect (with --partition).
    #[arg(long, value_name = "TOPIC", requires = "partition")]
    pub topic: Option<String>,
    /// The partition to elect (with --topic).
    #[arg(long, value_name = "N", requires = "topic")]
    pub partition: Option<i32>,
    /// A JSON file of the partitions: {"partitions": [{"topic": "t", "partition": 0}, ...]}.
    #[arg(long, value_name = "FILE")]
    pub path_to_json_file: Option<PathBuf>,
}

/// `tidelog log-dirs ...`.
#[derive(Debug, Args)]
pub(crate) struct LogDirsArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    #[command(subcommand)]
    pub cmd: LogDirsCmd,
}

/// `tidelog log-dirs describe|move`.
#[derive(Debug, Subcommand)]
pub(crate) enum LogDirsCmd {
    /// Each broker's data directories with the partition logs in them and their sizes,
    /// as one JSON object (as kafka-log-dirs --describe).
    Describe {
        /// Only these topics (comma-separated).
        #[arg(long, value_name = "T1,T2", value_delimiter = ',')]
        topic_list: Vec<String>,
        /// Only these brokers (comma-separated ids).
        #[arg(long, value_name = "ID,ID", value_delimiter = ',')]
        broker_list: Vec<i32>,
    },
    /// Move partitions of a broker into another of its log directories (as
    /// kafka-reassign-partitions with log_dirs): the broker copies them in the
    /// background; --wait waits until they are moved.
    Move(crate::log_dirs::MoveArgs),
}

/// `tidelog reassign --bootstrap ADDRS --generate|--execute|--verify|--cancel|--list`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("action").required(true).args(["generate", "execute", "verify", "cancel", "list"])))]
pub(crate) struct ReassignArgs {
    #[command(flatten)]
    pub target: Bootstrap,
    /// Print the current assignment of --topics and a balanced one over --brokers, in
    /// the JSON of --reassignment-json-file.
    #[arg(long)]
    pub generate: bool,
    /// Start the moves of --reassignment-json-file (prints the current assignment
    /// first, to roll back with).
    #[arg(long)]
    pub execute: bool,
    /// Tell, per partition of --reassignment-json-file, whether its move completed.
    #[arg(long)]
    pub verify: bool,
    /// Cancel the moves of --reassignment-json-file in progress, and remove the
    /// replication throttles of their topics and of every broker (unless
    /// --preserve-throttles).
    #[arg(long)]
    pub cancel: bool,
    /// With --cancel: keep the replication throttles (Kafka's `--preserve-throttles`;
    /// a later --verify removes them).
    #[arg(long, requires = "cancel")]
    pub preserve_throttles: bool,
    /// List the moves in progress.
    #[arg(long)]
    pub list: bool,
    /// With --generate: the topics to move (comma-separated).
    #[arg(long, value_name = "T1,T2", value_delimiter = ',')]
    pub topics: Vec<String>,
    /// With --generate: the brokers to place them on (comma-separated ids).
    #[arg(long, value_name = "ID,ID", value_delimiter = ',')]
    pub brokers: Vec<i32>,
    /// With --generate: place replicas without regard to racks (by default, when every
    /// broker given has a rack, each partition's replicas go to as many racks as they
    /// can; when only some have one, the plan is refused without this flag).
    #[arg(long)]
    pub disable_rack_aware: bool,
    /// Kafka's reassignment JSON: {"version": 1, "partitions": [{"topic": "t",
    /// "partition": 0, "replicas": [1, 2, 3]}, ...]}, with "log_dirs" (one per replica,
    /// "any" or the log directory to put that replica in) if wanted.
    #[arg(long, value_name = "FILE")]
    pub reassignment_json_file: Option<PathBuf>,
    /// With --execute: throttle the moves' replication to BYTES per second on every
    /// broker involved (Kafka's `leader.replication.throttled.rate` and
    /// `follower.replication.throttled.rate`); --verify removes the throttle once every
    /// move of the plan completed.
    #[arg(long, value_name = "BYTES", requires = "execute")]
    pub throttle: Option<i64>,
}

fn connect(target: &Bootstrap, data: Option<&Path>, what: &str) -> CliResult<AdminClient> {
    let bootstrap = target.bootstrap.as_deref().ok_or_else(|| {
        fail!("{what} acts on a running cluster: give --bootstrap HOST:PORT[,HOST:PORT...]")
    })?;
    admin_client(bootstrap, target, data)
}

fn read_json(path: &Path) -> CliResult<Value> {
    let text =
        std::fs::read_to_string(path).map_err(|e| fail!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| fail!("{} is not JSON: {e}", path.display()))
}

/// The `partitions` array of a plan file, each entry an object.
fn entries<'a>(plan: &'a Value, path: &Path) -> CliResult<&'a Vec<Value>> {
    plan.get("partitions")
        .and_then(Value::as_array)
        .ok_or_else(|| fail!("{}: no \"partitions\" array", path.display()))
}

/// An entry's `topic` and `partition`.
fn topic_partition(e: &Value, path: &Path, at: usize) -> CliResult<TopicPartition> {
    let topic = e.get("topic").and_then(Value::as_str);
    let partition = e
        .get("partition")
        .and_then(Value::as_i64)
        .and_then(|p| i32::try_from(p).ok());
    match (topic, partition) {
        (Some(t), Some(p)) if p >= 0 => Ok(TopicPartition::new(t, p)),
        _ => Err(fail!(
            "{}: partitions[{at}] needs a \"topic\" string and a \"partition\" number of 0 or more: {e}",
            path.display()
        )),
    }
}

/// The partitions of a plan file, each once.
fn unique(list: Vec<TopicPartition>, path: &Path) -> CliResult<Vec<TopicPartition>> {
    let mut seen = BTreeSet::new();
    for tp in &list {
        if !seen.insert(tp.clone()) {
            return Err(fail!("{}: partition {tp} is listed twice", path.display()));
        }
    }
    Ok(list)
}

fn names(list: &[TopicPartition]) -> String {
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs `tidelog leader-election`.
pub(crate) fn leader_election(data: Option<&Path>, args: &LeaderElectionArgs) -> CliResult {
    let (election, label) = match args.election_type.to_ascii_uppercase().as_str() {
        "PREFERRED" => (ElectionType::Preferred, "PREFERRED"),
        "UNCLEAN" => (ElectionType::Unclean, "UNCLEAN"),
        other => {
            return Err(fail!("--election-type {other:?}: PREFERRED or UNCLEAN"));
        }
    };
    let partitions: Option<Vec<TopicPartition>> =
        match (&args.topic, args.partition, &args.path_to_json_file) {
            (Some(t), Some(p), _) => Some(vec![TopicPartition::new(t, p)]),
            (_, _, Some(path)) => {
                let plan = read_json(path)?;
                let list = entries(&plan, path)?
                    .iter()
                    .enumerate()
                    .map(|(at, e)| topic_partition(e, path, at))
                    .collect::<CliResult<Vec<_>>>()?;
                if list.is_empty() {
                    return Err(fail!("{}: no partition listed", path.display()));
                }
                Some(unique(list, path)?)
            }
            _ => None,
        };
    if election == ElectionType::Unclean && partitions.is_none() {
        return Err(fail!(
            "an unclean election may lose acknowledged records: name its partitions (--topic and --partition, or --path-to-json-file), not --all-topic-partitions"
        ));
    }
    let admin = connect(&args.target, data, "leader-election")?;
    let results = admin.elect_leaders(election, partitions.as_deref())?;
    let mut elected = Vec::new();
    let mut not_needed = Vec::new();
    let mut failed = Vec::new();
    for (tp, r) in results {
        match r {
            Ok(()) => elected.push(tp),
            Err(tidelog::Error::Admin(e)) if e.code == ErrorCode::ELECTION_NOT_NEEDED => {
                not_needed.push(tp)
            }
            Err(e) => failed.push((tp, e)),
        }
    }
    let mut out = Out::new();
    if !elected.is_empty() {
        out.line(format!(
            "Successfully completed leader election ({label}) for partitions {}",
            names(&elected)
        ))?;
    }
    if !not_needed.is_empty() {
        out.line(format!(
            "Valid replica already elected for partitions {}",
            names(&not_needed)
        ))?;
    }
    if elected.is_empty() && not_needed.is_empty() && failed.is_empty() {
        out.line("No partition needed an election")?;
    }
    out.flush()?;
    for (tp, e) in &failed {
        eprintln!("Error completing leader election ({label}) for partition {tp}: {e}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(fail!("{} replica(s) could not be elected", failed.len()))
    }
}

/// Runs `tidelog log-dirs describe` (and `move`, in `log_dirs.rs`).
pub(crate) fn log_dirs(data: Option<&Path>, args: &LogDirsArgs) -> CliResult {
    let (topic_list, broker_list) = match &args.cmd {
        LogDirsCmd::Describe {
            topic_list,
            broker_list,
        } => (topic_list, broker_list),
        LogDirsCmd::Move(m) => return crate::log_dirs::run_move(data, &args.target, m),
    };
    let admin = connect(&args.target, data, "log-dirs")?;
    let all = admin.describe_log_dirs()?;
    if let Some(b) = broker_list.iter().find(|b| !all.contains_key(b)) {
        return Err(fail!(
            "broker {b} is not in the cluster (brokers: {:?})",
            all.keys().collect::<Vec<_>>()
        ));
    }
    let mut brokers = Vec::new();
    let mut answered = Vec::new();
    for (id, dirs) in all {
        if !broker_list.is_empty() && !broker_list.contains(&id) {
            continue;
        }
        let dirs = dirs.map_err(|e| fail!("broker {id}: {e}"))?;
        answered.push(id.to_string());
        let dirs: Vec<Value> = dirs
            .iter()
            .map(|d| {
                let partitions: Vec<Value> = d
                    .replicas
                    .iter()
                    .filter(|r| topic_list.is_empty() || topic_list.contains(&r.partition.topic))
                    .map(|r| {
                        json!({
                            "partition": r.partition.to_string(),
                            "size": r.size,
                            "offsetLag": r.offset_lag,
                            "isFuture": r.is_future,
                        })
                    })
                    .collect();
                json!({
                    "logDir": d.path,
                    "error": d.error.as_ref().map(|e| e.code.name()),
                    "partitions": partitions,
                })
            })
            .collect();
        brokers.push(json!({ "broker": id, "logDirs": dirs }));
    }
    let mut out = Out::new();
    out.line("Querying brokers for log directories information")?;
    out.line(format!(
        "Received log directory information from brokers {}",
        answered.join(",")
    ))?;
    out.line(json!({ "version": 1, "brokers": brokers }))?;
    out.flush()
}

/// A plan: each partition with its target replicas.
type Plan = Vec<(TopicPartition, Vec<i32>)>;

/// Kafka's reassignment JSON of `plan`.
fn plan_json(plan: &Plan) -> Value {
    let partitions: Vec<Value> = plan
        .iter()
        .map(|(tp, replicas)| {
            json!({
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": replicas,
                "log_dirs": vec!["any"; replicas.len()],
            })
        })
        .collect();
    json!({ "version": 1, "partitions": partitions })
}

/// Reads a reassignment file: each partition once, with its replicas (distinct node
/// ids) and, if given, `log_dirs` (one per replica, "any" or a directory); the plan and
/// the replicas given a directory.
fn read_plan(path: &Path) -> CliResult<(Plan, Vec<ReplicaDir>)> {
    let plan = read_json(path)?;
    let mut out = Vec::new();
    let mut dirs = Vec::new();
    for (at, e) in entries(&plan, path)?.iter().enumerate() {
        let tp = topic_partition(e, path, at)?;
        let bad = |why: &str| fail!("{}: partition {tp}: {why}", path.display());
        let replicas: Vec<i32> = e
            .get("replicas")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no \"replicas\" array"))?
            .iter()
            .map(|r| {
                r.as_i64()
                    .and_then(|r| i32::try_from(r).ok())
                    .filter(|r| *r >= 0)
            })
            .collect::<Option<_>>()
            .ok_or_else(|| bad("\"replicas\" must be node ids (numbers of 0 or more)"))?;
        if replicas.is_empty() {
            return Err(bad("\"replicas\" is empty"));
        }
        if replicas.iter().collect::<BTreeSet<_>>().len() != replicas.len() {
            return Err(bad(&format!(
                "\"replicas\" {replicas:?} names a node twice"
            )));
        }
        if let Some(given) = e.get("log_dirs") {
            let given: Vec<&str> = given
                .as_array()
                .and_then(|d| d.iter().map(Value::as_str).collect::<Option<_>>())
                .filter(|d: &Vec<&str>| {
                    d.len() == replicas.len() && d.iter().all(|x| !x.is_empty())
                })
                .ok_or_else(|| {
                    bad("\"log_dirs\" must give one directory (or \"any\") per replica")
                })?;
            for (broker, dir) in replicas.iter().zip(given) {
                if dir != "any" {
                    dirs.push(ReplicaDir {
                        partition: tp.clone(),
                        broker: *broker,
                        dir: dir.to_string(),
                    });
                }
            }
        }
        out.push((tp, replicas));
    }
    if out.is_empty() {
        return Err(fail!("{}: no partition listed", path.display()));
    }
    let tps = unique(out.iter().map(|(tp, _)| tp.clone()).collect(), path)?;
    debug_assert_eq!(tps.len(), out.len());
    Ok((out, dirs))
}

/// The current replicas of `topics`' partitions.
fn current(admin: &AdminClient, topics: &[&str]) -> CliResult<Plan> {
    let mut out = Vec::new();
    for (name, t) in admin.describe_topics(topics)? {
        let t = t.map_err(|e| fail!("topic {name:?}: {e}"))?;
        for p in t.partitions {
            out.push((TopicPartition::new(&name, p.partition), p.replicas));
        }
    }
    Ok(out)
}

fn plan_file<'a>(args: &'a ReassignArgs, action: &str) -> CliResult<&'a Path> {
    args.reassignment_json_file
        .as_deref()
        .ok_or_else(|| fail!("--{action} needs --reassignment-json-file FILE"))
}

/// The racks of the brokers given to `reassign --generate` for a rack-aware plan, as
/// Kafka's tool takes them: None for a rack-unaware one (no broker has a rack, or
/// `disable_rack_aware`), and refused when only some brokers have a rack.
fn plan_racks(
    racks: &[(i32, Option<String>)],
    disable_rack_aware: bool,
) -> Result<Option<Vec<(i32, String)>>, Fail> {
    if disable_rack_aware || racks.iter().all(|(_, r)| r.is_none()) {
        return Ok(None);
    }
    let unracked: Vec<i32> = racks
        .iter()
        .filter(|(_, r)| r.is_none())
        .map(|(id, _)| *id)
        .collect();
    if !unracked.is_empty() {
        return Err(fail!(
            "Not all brokers have rack information: node(s) {unracked:?} have none. Add --disable-rack-aware in command line to make replica assignment without rack information."
        ));
    }
    Ok(Some(
        racks
            .iter()
            .filter_map(|(id, r)| Some((*id, r.clone()?)))
            .collect(),
    ))
}

/// Runs `tidelog reassign`.
pub(crate) fn reassign(data: Option<&Path>, args: &ReassignArgs) -> CliResult {
    let mut out = Out::new();
    if args.generate {
        if args.topics.is_empty() || args.brokers.is_empty() {
            return Err(fail!("--generate needs --topics T1,T2 and --brokers ID,ID"));
        }
        let mut brokers = args.brokers.clone();
        brokers.sort_unstable();
        brokers.dedup();
        let admin = connect(&args.target, data, "reassign")?;
        let live = admin.metadata()?.brokers;
        let known: BTreeSet<i32> = live.iter().map(|b| b.id).collect();
        if let Some(b) = brokers.iter().find(|b| !known.contains(b)) {
            return Err(fail!(
                "--brokers: node {b} is not a live broker of the cluster ({known:?})"
            ));
        }
        let racks: Vec<(i32, Option<String>)> = brokers
            .iter()
            .map(|id| {
                let rack = live
                    .iter()
                    .find(|b| b.id == *id)
                    .and_then(|b| b.rack.clone());
                (*id, rack)
            })
            .collect();
        let racked = plan_racks(&racks, args.disable_rack_aware)?;
        let topics: Vec<&str> = args.topics.iter().map(String::as_str).collect();
        let now = current(&admin, &topics)?;
        let mut proposed = Vec::new();
        for topic in &args.topics {
            let parts: Vec<&(TopicPartition, Vec<i32>)> =
                now.iter().filter(|(tp, _)| &tp.topic == topic).collect();
            let rf = parts.first().map_or(1, |(_, r)| r.len());
            if rf > brokers.len() {
                return Err(fail!(
                    "topic {topic:?} has {rf} replicas per partition, more than the {} brokers given",
                    brokers.len()
                ));
            }
            // Spread each topic from another start, as Kafka's random one does.
            let seed = topic
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            let n = brokers.len();
            let (count, start, shift) = (parts.len() as i32, seed % n, (seed / n) % n);
            let placed = match &racked {
                Some(racked) => {
                    tidelog::admin::assign_replicas_rack_aware(racked, count, rf, 0, start, shift)
                }
                None => tidelog::admin::assign_replicas(&brokers, count, rf, 0, start, shift),
            };
            for ((tp, _), replicas) in parts.into_iter().zip(placed) {
                proposed.push((tp.clone(), replicas));
            }
        }
        out.line("Current partition replica assignment")?;
        out.line(plan_json(&now))?;
        out.line("")?;
        out.line("Proposed partition reassignment configuration")?;
        out.line(plan_json(&proposed))?;
        return out.flush();
    }
    if args.list {
        let admin = connect(&args.target, data, "reassign")?;
        let ongoing = admin.list_partition_reassignments(None)?;
        if ongoing.is_empty() {
            out.line("No partition reassignments found.")?;
        } else {
            out.line("Current partition reassignments:")?;
            for (tp, r) in ongoing {
                let ids = |v: &[i32]| {
                    v.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                };
                out.line(format!(
                    "{tp}: replicas: {}. adding: {}. removing: {}.",
                    ids(&r.replicas),
                    ids(&r.adding),
                    ids(&r.removing)
                ))?;
            }
        }
        return out.flush();
    }
    let action = if args.execute {
        "execute"
    } else if args.verify {
        "verify"
    } else {
        "cancel"
    };
    let path = plan_file(args, action)?;
    let (plan, dirs) = read_plan(path)?;
    let admin = connect(&args.target, data, "reassign")?;
    let partitions: Vec<TopicPartition> = plan.iter().map(|(tp, _)| tp.clone()).collect();
    match action {
        "execute" => {
            let topics: BTreeSet<&str> = plan.iter().map(|(tp, _)| tp.topic.as_str()).collect();
            let topics: Vec<&str> = topics.into_iter().collect();
            let now: Plan = current(&admin, &topics)?
                .into_iter()
                .filter(|(tp, _)| partitions.contains(tp))
                .collect();
            if let Some(tp) = partitions
                .iter()
                .find(|tp| !now.iter().any(|(n, _)| n == *tp))
            {
                return Err(fail!("{}: partition {tp} does not exist", path.display()));
            }
            crate::reassign_dirs::check(&admin, &dirs)?;
            out.line("Current partition replica assignment")?;
            out.line("")?;
            out.line(plan_json(&now))?;
            out.line("")?;
            out.line("Save this to use as the --reassignment-json-file option during rollback")?;
            if let Some(rate) = args.throttle {
                crate::reassign_throttle::set(&mut out, &admin, rate, &now, &plan)?;
            }
            let moves: Vec<(TopicPartition, Option<Vec<i32>>)> =
                plan.into_iter().map(|(tp, r)| (tp, Some(r))).collect();
            let results = admin.alter_partition_reassignments(&moves)?;
            report(&mut out, results, "started", "reassignment")?;
            crate::reassign_dirs::start(&mut out, &admin, &dirs)
        }
        "cancel" => {
            let moves: Vec<(TopicPartition, Option<Vec<i32>>)> =
                partitions.into_iter().map(|tp| (tp, None)).collect();
            let results = admin.alter_partition_reassignments(&moves)?;
            report(&mut out, results, "cancelled", "cancellation")?;
            if !args.preserve_throttles {
                // As Kafka's --cancel: the moves are over, so are their throttles.
                let topics: BTreeSet<&str> = plan.iter().map(|(tp, _)| tp.topic.as_str()).collect();
                let topics: Vec<&str> = topics.into_iter().collect();
                crate::reassign_throttle::clear(&mut out, &admin, &topics)?;
            }
            out.flush()
        }
        _ => {
            let ongoing = admin.list_partition_reassignments(Some(&partitions))?;
            let topics: BTreeSet<&str> = plan.iter().map(|(tp, _)| tp.topic.as_str()).collect();
            let topics: Vec<&str> = topics.into_iter().collect();
            let now: BTreeMap<TopicPartition, Vec<i32>> =
                current(&admin, &topics)?.into_iter().collect();
            out.line("Status of partition reassignment:")?;
            let mut all_done = true;
            for (tp, target) in &plan {
                let line = if ongoing.contains_key(tp) {
                    all_done = false;
                    format!("Reassignment of partition {tp} is still in progress.")
                } else {
                    match now.get(tp) {
                        Some(r) if r == target => {
                            format!("Reassignment of partition {tp} is completed.")
                        }
                        Some(r) => format!(
                            "There is no active reassignment of partition {tp}, but replica set is {r:?} rather than {target:?}."
                        ),
                        None => format!("Partition {tp} does not exist."),
                    }
                };
                out.line(line)?;
            }
            if all_done {
                crate::reassign_throttle::clear(&mut out, &admin, &topics)?;
            }
            crate::reassign_dirs::verify(&mut out, &admin, &dirs)?;
            out.flush()
        }
    }
}

/// Prints what an AlterPartitionReassignments did per partition; fails if any was
/// refused.
fn report(
    out: &mut Out,
    results: BTreeMap<TopicPartition, tidelog::Result<()>>,
    done: &str,
    what: &str,
) -> CliResult {
    let ok: Vec<TopicPartition> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(tp, _)| tp.clone())
        .collect();
    if !ok.is_empty() {
        out.line(format!(
            "Successfully {done} partition reassignments for {}",
            names(&ok)
        ))?;
    }
    out.flush()?;
    let failed: Vec<_> = results
        .into_iter()
        .filter_map(|(tp, r)| r.err().map(|e| (tp, e)))
        .collect();
    for (tp, e) in &failed {
        eprintln!("Error in the {what} of partition {tp}: {e}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Fail::Msg(format!(
            "{} partition {what}(s) failed",
            failed.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn racks(pairs: &[(i32, Option<&str>)]) -> Vec<(i32, Option<String>)> {
        pairs
            .iter()
            .map(|(id, r)| (*id, r.map(str::to_string)))
            .collect()
    }

    #[test]
    fn a_partly_racked_plan_is_refused_unless_rack_unaware() {
        let partly = racks(&[(1, Some("a")), (2, None), (3, Some("b"))]);
        match plan_racks(&partly, false) {
            Err(Fail::Msg(m)) => assert!(
                m.contains("Not all brokers have rack information")
                    && m.contains("[2]")
                    && m.contains("--disable-rack-aware"),
                "{m}"
            ),
            other => panic!("not refused: {:?}", other.ok()),
        }
        assert_eq!(plan_racks(&partly, true).ok(), Some(None));
        let none = racks(&[(1, None), (2, None)]);
        assert_eq!(plan_racks(&none, false).ok(), Some(None));
        let all = racks(&[(1, Some("a")), (2, Some("b"))]);
        assert_eq!(
            plan_racks(&all, false).ok(),
            Some(Some(vec![(1, "a".to_string()), (2, "b".to_string())]))
        );
    }
}
