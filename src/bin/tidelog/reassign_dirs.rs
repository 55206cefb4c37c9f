//! `tidelog reassign` with `log_dirs` in its plan, as kafka-reassign-partitions: a
//! replica given a directory other than "any" is put there. `--execute` checks every
//! such directory against its broker's (DescribeLogDirs) before anything is sent
//! (LOG_DIR_NOT_FOUND, or KAFKA_STORAGE_ERROR for a failed one), then, once the
//! reassignment started, moves each replica into its directory (AlterReplicaLogDirs,
//! retried while a new replica is not made on its broker yet); `--verify` tells per
//! replica whether it is in its directory.

use std::time::{Duration, Instant};

use tidelog::admin::{AdminClient, ErrorCode, LogDirDescription, TopicPartition};

use crate::log_dirs::same_dir;
use crate::out::Out;
use crate::{CliResult, fail};

/// How long `--execute` waits for a new replica to be made on its broker.
const REPLICA_WAIT: Duration = Duration::from_secs(30);

/// One replica of a plan with the log directory it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplicaDir {
    /// The partition.
    pub partition: TopicPartition,
    /// The broker holding the replica.
    pub broker: i32,
    /// The directory, as `log-dirs describe` shows it.
    pub dir: String,
}

impl std::fmt::Display for ReplicaDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on broker {}", self.partition, self.broker)
    }
}

/// Refuses the plan unless every directory of `wanted` is a usable log directory of its
/// broker. Sends nothing but DescribeLogDirs.
pub(crate) fn check(admin: &AdminClient, wanted: &[ReplicaDir]) -> CliResult {
    if wanted.is_empty() {
        return Ok(());
    }
    let all = admin.describe_log_dirs()?;
    for r in wanted {
        let dirs = match all.get(&r.broker) {
            Some(Ok(dirs)) => dirs,
            Some(Err(e)) => return Err(fail!("broker {}: {e}", r.broker)),
            None => return Err(fail!("{r}: broker {} is not in the cluster", r.broker)),
        };
        match dirs.iter().find(|d| same_dir(&d.path, &r.dir)) {
            None => {
                let paths: Vec<&str> = dirs.iter().map(|d| d.path.as_str()).collect();
                return Err(fail!(
                    "{r}: {}: {} is not a log directory of broker {} (it has {})",
                    ErrorCode::LOG_DIR_NOT_FOUND.name(),
                    r.dir,
                    r.broker,
                    paths.join(", ")
                ));
            }
            Some(d) if d.error.is_some() => {
                return Err(fail!(
                    "{r}: {}: the log directory {} of broker {} failed",
                    ErrorCode::KAFKA_STORAGE_ERROR.name(),
                    r.dir,
                    r.broker
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Starts moving each replica of `wanted` into its directory (AlterReplicaLogDirs),
/// waiting up to [`REPLICA_WAIT`] for a replica its broker does not hold yet (one the
/// reassignment adds); prints each move started, fails naming the refused ones.
pub(crate) fn start(out: &mut Out, admin: &AdminClient, wanted: &[ReplicaDir]) -> CliResult {
    let deadline = Instant::now() + REPLICA_WAIT;
    let mut started = Vec::new();
    let mut failed = Vec::new();
    for r in wanted {
        loop {
            let answer = admin
                .alter_replica_log_dirs(r.broker, &[(r.partition.clone(), r.dir.clone())])?
                .remove(&r.partition)
                .unwrap_or(Ok(()));
            match answer {
                Ok(()) => started.push(r.to_string()),
                // Not made on its broker yet (the topic or the replica unknown there).
                Err(tidelog::Error::Admin(e))
                    if [
                        ErrorCode::UNKNOWN_TOPIC_OR_PARTITION,
                        ErrorCode::NOT_LEADER_OR_FOLLOWER,
                    ]
                    .contains(&e.code)
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
                Err(e) => failed.push(format!("{r}: {e}")),
            }
            break;
        }
    }
    if !started.is_empty() {
        out.line(format!(
            "Successfully started log directory moves for: {}",
            started.join(", ")
        ))?;
    }
    out.flush()?;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(fail!(
            "{} log directory move(s) not started: {}",
            failed.len(),
            failed.join("; ")
        ))
    }
}

/// Prints, per replica of `wanted`, whether it is in its directory; true if all are.
pub(crate) fn verify(out: &mut Out, admin: &AdminClient, wanted: &[ReplicaDir]) -> CliResult<bool> {
    if wanted.is_empty() {
        return Ok(true);
    }
    out.line("Status of replica log directory movement:")?;
    let all = admin.describe_log_dirs()?;
    let mut all_done = true;
    for r in wanted {
        let dirs: &[LogDirDescription] = match all.get(&r.broker) {
            Some(Ok(dirs)) => dirs,
            Some(Err(e)) => return Err(fail!("broker {}: {e}", r.broker)),
            None => &[],
        };
        let held = |future: bool| {
            dirs.iter().find(|d| {
                d.replicas
                    .iter()
                    .any(|x| x.partition == r.partition && x.is_future == future)
            })
        };
        let line = match (held(false), held(true)) {
            (Some(d), None) if same_dir(&d.path, &r.dir) => {
                format!("Reassignment of replica {r} completed successfully.")
            }
            (_, Some(d)) if same_dir(&d.path, &r.dir) => {
                all_done = false;
                format!("Reassignment of replica {r} is still in progress.")
            }
            (Some(d), _) => {
                all_done = false;
                format!(
                    "Partition {} on broker {} is in {}, not being moved to {}.",
                    r.partition, r.broker, d.path, r.dir
                )
            }
            (None, _) => {
                all_done = false;
                format!(
                    "Partition {} cannot be found in any live log directory on broker {}.",
                    r.partition, r.broker
                )
            }
        };
        out.line(line)?;
    }
    Ok(all_done)
}
