//! `tidelog log-dirs move`: moves partitions of one broker into another of its log
//! directories over the Kafka protocol (AlterReplicaLogDirs, as
//! kafka-reassign-partitions with `log_dirs`), and with `--wait` waits until the moves
//! are done (DescribeLogDirs lists no future log of them and each in its target).

use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use tidelog::admin::{AdminClient, TopicPartition};

use crate::cli::Bootstrap;
use crate::common::admin_client;
use crate::out::Out;
use crate::{CliResult, fail};

/// `tidelog log-dirs move --broker ID --log-dir DIR --partitions T-0,T-1 [--wait]`.
#[derive(Debug, Args)]
pub(crate) struct MoveArgs {
    /// The broker whose partitions move (the only one of a single node may be left out).
    #[arg(long, value_name = "ID")]
    pub broker: Option<i32>,
    /// The log directory they move into, as `log-dirs describe` shows it.
    #[arg(long, value_name = "DIR")]
    pub log_dir: String,
    /// The partitions, as TOPIC-PARTITION (comma-separated).
    #[arg(long, value_name = "T-0,T-1", value_delimiter = ',', required = true)]
    pub partitions: Vec<String>,
    /// Wait until every move is done (the partition served from DIR).
    #[arg(long)]
    pub wait: bool,
    /// With --wait: give up after this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 600_000)]
    pub timeout_ms: u64,
}

/// `events-3` as the partition 3 of `events`.
fn parse_partition(text: &str) -> CliResult<TopicPartition> {
    let bad = || fail!("{text:?} is not a partition: give TOPIC-PARTITION, e.g. orders-0");
    let (topic, p) = text.rsplit_once('-').ok_or_else(bad)?;
    let p: i32 = p.parse().map_err(|_| bad())?;
    if topic.is_empty() || p < 0 {
        return Err(bad());
    }
    Ok(TopicPartition::new(topic, p))
}

/// Runs `tidelog log-dirs move`.
pub(crate) fn run_move(data: Option<&Path>, target: &Bootstrap, args: &MoveArgs) -> CliResult {
    let bootstrap = target.bootstrap.as_deref().ok_or_else(|| {
        fail!("log-dirs move acts on a running node: give --bootstrap HOST:PORT[,HOST:PORT...]")
    })?;
    let partitions = args
        .partitions
        .iter()
        .map(|p| parse_partition(p))
        .collect::<CliResult<Vec<_>>>()?;
    let admin = admin_client(bootstrap, target, data)?;
    let broker = match args.broker {
        Some(b) => b,
        None => {
            let ids: Vec<i32> = admin.describe_log_dirs()?.into_keys().collect();
            match ids.as_slice() {
                [only] => *only,
                _ => return Err(fail!("the cluster has brokers {ids:?}: give --broker ID")),
            }
        }
    };
    let moves: Vec<(TopicPartition, String)> = partitions
        .iter()
        .map(|tp| (tp.clone(), args.log_dir.clone()))
        .collect();
    let answers = admin.alter_replica_log_dirs(broker, &moves)?;
    let mut out = Out::new();
    let mut failed = Vec::new();
    for (tp, answer) in &answers {
        match answer {
            Ok(()) => out.line(format!(
                "{tp}: moving to {} on broker {broker}",
                args.log_dir
            ))?,
            Err(e) => failed.push(e.to_string()),
        }
    }
    out.flush()?;
    if !failed.is_empty() {
        return Err(fail!(
            "{} partition(s) not moved: {}",
            failed.len(),
            failed.join("; ")
        ));
    }
    if args.wait {
        wait_moved(&admin, broker, &partitions, args)?;
        let mut out = Out::new();
        out.line(format!(
            "moved {} partition(s) to {}",
            partitions.len(),
            args.log_dir
        ))?;
        out.flush()?;
    }
    Ok(())
}

/// Polls DescribeLogDirs until every partition of `partitions` is a current log in the
/// target directory with no future log left, or the timeout.
fn wait_moved(
    admin: &AdminClient,
    broker: i32,
    partitions: &[TopicPartition],
    args: &MoveArgs,
) -> CliResult {
    let deadline = Instant::now() + Duration::from_millis(args.timeout_ms);
    loop {
        let dirs = admin
            .describe_log_dirs()?
            .remove(&broker)
            .ok_or_else(|| fail!("broker {broker} is no longer in the cluster"))?
            .map_err(|e| fail!("broker {broker}: {e}"))?;
        let pending: Vec<String> = partitions
            .iter()
            .filter(|tp| {
                let future = dirs
                    .iter()
                    .flat_map(|d| &d.replicas)
                    .any(|r| r.partition == **tp && r.is_future);
                let in_target = dirs.iter().any(|d| {
                    same_dir(&d.path, &args.log_dir)
                        && d.replicas
                            .iter()
                            .any(|r| r.partition == **tp && !r.is_future)
                });
                future || !in_target
            })
            .map(ToString::to_string)
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(fail!(
                "not moved to {} within {} ms: {}",
                args.log_dir,
                args.timeout_ms,
                pending.join(", ")
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// True if the paths name the same directory (as given, or canonicalized here, which
/// holds when the broker runs on this machine).
pub(crate) fn same_dir(a: &str, b: &str) -> bool {
    a == b
        || std::fs::canonicalize(a)
            .ok()
            .is_some_and(|x| std::fs::canonicalize(b).is_ok_and(|y| x == y))
}
