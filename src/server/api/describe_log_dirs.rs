//! DescribeLogDirs (key 35), versions 1-4: Kafka's `kafka-log-dirs --describe`. Each
//! node answers for each of its log directories (the data directory first, then those
//! of `--log-dirs`; a failed one with KAFKA_STORAGE_ERROR and no partition),
//! listing the partition logs each holds with their size on disk and offset lag
//! (how far the log end is below the high watermark; 0 for a current log, as Kafka's),
//! and a partition moving into it (AlterReplicaLogDirs) as a future log
//! (`is_future_key`) with the bytes copied so far and how far its copy is behind.
//! `topics` null lists every log; otherwise only the named partitions this node holds
//! (a partition not here is left out, as Kafka does). The volume's total and usable
//! bytes (version 4) are -1, unknown. Needs Describe on the cluster: without it the
//! answer is CLUSTER_AUTHORIZATION_FAILED (version 3+) with no directory.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};

use super::{Ctx, Fatal, Reply, Request, kstr};
use crate::security::acl::{AclOperation, CLUSTER_RESOURCE_NAME, ResourceType};
use kafka_protocol::ResponseError;

/// Kafka's `UNKNOWN_VOLUME_BYTES`.
const UNKNOWN_VOLUME_BYTES: i64 = -1;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: DescribeLogDirsRequest = req.decode()?;
    if let Err((code, message)) = ctx.check(
        AclOperation::Describe,
        ResourceType::Cluster,
        CLUSTER_RESOURCE_NAME,
    ) {
        tracing::debug!(peer = %ctx.peer, "DescribeLogDirs refused: {message}");
        let code = if req.version() >= 3 { code } else { 0 };
        return req.respond(&DescribeLogDirsResponse::default().with_error_code(code));
    }
    let wanted: Option<BTreeMap<String, Vec<i32>>> = request.topics.map(|topics| {
        let mut m: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for t in topics {
            m.entry(t.topic.0.to_string())
                .or_default()
                .extend(t.partitions);
        }
        m
    });
    let backend = ctx.backend();
    // By log directory, then topic.
    type Topics = BTreeMap<String, Vec<DescribeLogDirsPartition>>;
    let mut by_dir: BTreeMap<std::path::PathBuf, Topics> = BTreeMap::new();
    for log in backend.local_logs() {
        let listed = wanted.as_ref().is_none_or(|w| {
            w.get(&log.topic)
                .is_some_and(|ps| ps.contains(&log.partition))
        });
        if !listed {
            continue;
        }
        by_dir
            .entry(log.dir)
            .or_default()
            .entry(log.topic)
            .or_default()
            .push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(log.partition)
                    .with_partition_size(i64::try_from(log.size).unwrap_or(i64::MAX))
                    .with_offset_lag(log.offset_lag)
                    .with_is_future_key(log.is_future),
            );
    }
    let mut results = Vec::new();
    for (dir, failure) in backend.log_dir_states() {
        let topics = match failure {
            // A failed directory is listed with its error and nothing in it, as Kafka.
            Some(_) => Vec::new(),
            None => by_dir
                .remove(&dir)
                .unwrap_or_default()
                .into_iter()
                .map(|(name, mut partitions)| {
                    partitions.sort_by_key(|p| p.partition_index);
                    DescribeLogDirsTopic::default()
                        .with_name(TopicName(kstr(name)))
                        .with_partitions(partitions)
                })
                .collect(),
        };
        let code = if failure.is_some() {
            ResponseError::KafkaStorageError.code()
        } else {
            0
        };
        let shown = std::fs::canonicalize(&dir).unwrap_or(dir);
        results.push(
            DescribeLogDirsResult::default()
                .with_error_code(code)
                .with_log_dir(kstr(shown.display().to_string()))
                .with_topics(topics)
                .with_total_bytes(UNKNOWN_VOLUME_BYTES)
                .with_usable_bytes(UNKNOWN_VOLUME_BYTES),
        );
    }
    req.respond(&DescribeLogDirsResponse::default().with_results(results))
}
