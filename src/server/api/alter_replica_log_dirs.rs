//! AlterReplicaLogDirs (key 34), versions 1-2: Kafka's `kafka-reassign-partitions`
//! with `log_dirs`, moving partitions between this node's log directories. Needs Alter
//! on the cluster (CLUSTER_AUTHORIZATION_FAILED per partition, as Kafka). Per partition:
//! LOG_DIR_NOT_FOUND for a path that is not one of the node's log directories,
//! UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR when either directory failed, or
//! the broker's refusal (a coordinator's internal topic). A cluster node's replica keeps
//! its role across the move.
//! As Kafka, the answer comes at once and the move goes on in the background: the
//! files are copied into a future log while the partition serves (DescribeLogDirs
//! shows it with `is_future_key`), then the partition is offline for the copy of the
//! tail and the swap (NOT_LEADER_OR_FOLLOWER, which clients retry).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse};

use super::{Ctx, Fatal, Reply, Request, error_code};
use crate::security::acl::AclOperation;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: AlterReplicaLogDirsRequest = req.decode()?;
    let authorized = ctx.allowed_on_cluster(AclOperation::Alter);
    let backend = ctx.backend();
    let dirs = backend.log_dir_states();
    let mut results = Vec::new();
    for d in &request.dirs {
        let path = std::path::PathBuf::from(d.path.to_string());
        let wanted = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let known = dirs
            .iter()
            .find(|(dir, _)| *dir == path || std::fs::canonicalize(dir).is_ok_and(|c| c == wanted));
        for t in &d.topics {
            let topic = t.name.0.to_string();
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    let code = if !authorized {
                        ResponseError::ClusterAuthorizationFailed.code()
                    } else {
                        match known {
                            None => ResponseError::LogDirNotFound.code(),
                            Some((_, Some(_))) => ResponseError::KafkaStorageError.code(),
                            Some((dir, None)) => match backend.move_to_log_dir(&topic, p, dir) {
                                Ok(()) => 0,
                                Err(e) => {
                                    tracing::info!(peer = %ctx.peer, topic = %topic, partition = p, "AlterReplicaLogDirs refused: {e}");
                                    error_code(&e)
                                }
                            },
                        }
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
    }
    req.respond(&AlterReplicaLogDirsResponse::default().with_results(results))
}
