//! Metadata (key 3), versions 0-8: this broker as the only node and leader of every
//! partition, and the topics asked for, created on the fly when the request allows it
//! and the server is configured to (`auto_create_topics`: the broker's setting unless the
//! server builder says otherwise; `tidelog serve` turns it on).

use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};

use super::{Ctx, Fatal, NODE_ID, Reply, Request, error_code, kstr};

/// The name of the internal offsets topic, flagged `is_internal`.
const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// "Not requested" for the authorized-operations fields (v8).
const OPERATIONS_OMITTED: i32 = i32::MIN;

pub(super) fn handle(ctx: &Ctx<'_>, req: &mut Request) -> Result<Reply, Fatal> {
    let request: MetadataRequest = req.decode()?;
    let version = req.version();
    let backend = ctx.backend();
    // v0: an empty list means every topic; v1+: null means every topic.
    let wanted: Option<Vec<String>> = match request.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(
            t.into_iter()
                .filter_map(|t| t.name.map(|n| n.0.to_string()))
                .collect(),
        ),
    };
    let allow_create =
        (version < 4 || request.allow_auto_topic_creation) && ctx.shared.config.auto_create_topics;
    let names = match wanted {
        None => backend.topic_names(),
        Some(names) => names,
    };
    let mut topics = Vec::with_capacity(names.len());
    for name in names {
        let mut count = backend.partition_count(&name);
        let mut error = 0;
        if count.is_none() {
            if allow_create {
                match backend.create_topic(&name, -1, &[]) {
                    Ok(()) => {
                        tracing::info!(topic = %name, peer = %ctx.peer, "topic created by a Metadata request");
                    }
                    Err(crate::Error::TopicExists(_)) => {}
                    Err(e) => {
                        tracing::info!(topic = %name, error = %e, "cannot auto-create topic");
                        error = error_code(&e);
                    }
                }
                count = backend.partition_count(&name);
            }
            if count.is_none() && error == 0 {
                error = ResponseError::UnknownTopicOrPartition.code();
            }
        }
        let partitions = (0..count.unwrap_or(0))
            .map(|p| {
                MetadataResponsePartition::default()
                    .with_partition_index(p)
                    .with_leader_id(BrokerId(NODE_ID))
                    .with_leader_epoch(-1)
                    .with_replica_nodes(vec![BrokerId(NODE_ID)])
                    .with_isr_nodes(vec![BrokerId(NODE_ID)])
            })
            .collect();
        topics.push(
            MetadataResponseTopic::default()
                .with_error_code(error)
                .with_is_internal(name == OFFSETS_TOPIC)
                .with_name(Some(TopicName(kstr(name))))
                .with_partitions(partitions)
                .with_topic_authorized_operations(OPERATIONS_OMITTED),
        );
    }
    let (host, port) = ctx.advertised();
    let response = MetadataResponse::default()
        .with_brokers(vec![
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(NODE_ID))
                .with_host(kstr(host))
                .with_port(port),
        ])
        .with_cluster_id(Some(kstr(ctx.shared.cluster_id.clone())))
        .with_controller_id(BrokerId(NODE_ID))
        .with_topics(topics)
        .with_cluster_authorized_operations(OPERATIONS_OMITTED);
    req.respond(&response)
}
