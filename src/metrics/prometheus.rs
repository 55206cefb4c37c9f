//! A [`Metrics`] snapshot in the Prometheus text format (version 0.0.4), written by the
//! `prometheus-client` crate: names, help, types, label escaping and histogram buckets
//! are its, not ours.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::{
    ForwardStatus, GroupMetrics, GroupOffsetMetrics, HistogramSnapshot, Metrics, PartitionMetrics,
    PartitionStatus, ReplicationThrottleMetrics, ServerMetrics,
};

/// The `Content-Type` of [`prometheus_text`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Renders `metrics` in the Prometheus text format (version 0.0.4, [`CONTENT_TYPE`]),
/// every name prefixed `tidelog_`: per partition (labels `topic`, `partition`) records
/// and bytes in and out, offsets, size and segments; per group (label `group`) state,
/// generation, members, and per partition committed offset and lag; the server's
/// connections, request latency per API (label `api`), errors per code (labels `code`,
/// `error`) and sendfile bytes; storage fsync latency, prefault work, log directories
/// (offline ones, label `dir`; offline partitions, future logs) and recovery totals;
/// per running forwarder (label `forwarder`) records, bytes, skipped and lost records,
/// sessions and errors, whether it is failing and its last error, and per partition it
/// forwards (labels `forwarder`, `topic`, `partition`, `remote_topic`) its position and
/// the records and bytes behind.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// let broker = tidelog::Broker::open(dir.path())?;
/// broker.create_topic("events", 1, tidelog::TopicConfig::new())?;
/// let text = tidelog::metrics::prometheus_text(&broker.metrics());
/// assert!(text.contains("tidelog_partition_log_end_offset{topic=\"events\",partition=\"0\"} 0"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn prometheus_text(metrics: &Metrics) -> String {
    let mut registry = Registry::with_prefix("tidelog");
    registry.register_collector(Box::new(Snapshot(metrics.clone())));
    let mut out = String::new();
    // Writing into a String cannot fail, and every value here encodes.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
    out
}

/// The snapshot, encoded at scrape time.
#[derive(Debug)]
struct Snapshot(Metrics);

type Labels = Vec<(&'static str, String)>;

/// The labelled series of one metric family.
type Series = Vec<(Labels, Value)>;

/// One metric family: its name (after the `tidelog_` prefix), help, type, and how to
/// read its series from a snapshot. A family without series is left out.
type Family = (
    &'static str,
    &'static str,
    MetricType,
    fn(&Metrics) -> Series,
);

/// Every family, in the order they are written.
const FAMILIES: &[Family] = &[
    // Per partition (labels `topic`, `partition`).
    (
        "partition_records_in",
        "Records appended to the partition since its log was opened",
        MetricType::Counter,
        |m| per_partition(m, |p| Value::Counter(p.records_in)),
    ),
    (
        "partition_bytes_in",
        "Bytes of batches appended to the partition since its log was opened",
        MetricType::Counter,
        |m| per_partition(m, |p| Value::Counter(p.bytes_in)),
    ),
    (
        "partition_records_out",
        "Offsets handed out by reads of the partition (consumers, fetches, replica fetches) since its log was opened",
        MetricType::Counter,
        |m| per_partition(m, |p| Value::Counter(p.records_out)),
    ),
    (
        "partition_bytes_out",
        "Bytes of batches handed out by reads of the partition since its log was opened",
        MetricType::Counter,
        |m| per_partition(m, |p| Value::Counter(p.bytes_out)),
    ),
    (
        "partition_log_start_offset",
        "First offset still in the partition's log",
        MetricType::Gauge,
        |m| per_partition(m, |p| gauge(p.log_start_offset)),
    ),
    (
        "partition_log_end_offset",
        "Offset the next record of the partition will get",
        MetricType::Gauge,
        |m| per_partition(m, |p| gauge(p.log_end_offset)),
    ),
    (
        "partition_high_watermark",
        "The partition's high watermark: consumers read below it",
        MetricType::Gauge,
        |m| per_partition(m, |p| gauge(p.high_watermark)),
    ),
    (
        "partition_size_bytes",
        "Bytes of the partition's log on disk",
        MetricType::Gauge,
        |m| per_partition(m, |p| gauge(p.size_bytes)),
    ),
    (
        "partition_segments",
        "Segments of the partition's log",
        MetricType::Gauge,
        |m| per_partition(m, |p| gauge(p.segments)),
    ),
    // Per group (label `group`; per committed partition also `topic`, `partition`).
    (
        "group_state",
        "The consumer group's state (1 for the state it is in)",
        MetricType::Gauge,
        |m| {
            m.groups
                .iter()
                .map(|g| {
                    let labels = vec![
                        ("group", g.group_id.clone()),
                        ("state", g.state.to_string()),
                    ];
                    (labels, Value::Gauge(1))
                })
                .collect()
        },
    ),
    (
        "group_generation",
        "The consumer group's generation",
        MetricType::Gauge,
        |m| per_group(m, |g| gauge(g.generation)),
    ),
    (
        "group_members",
        "Members of the consumer group's generation",
        MetricType::Gauge,
        |m| per_group(m, |g| gauge(g.members)),
    ),
    (
        "group_committed_offset",
        "The consumer group's committed offset of the partition",
        MetricType::Gauge,
        |m| per_group_offset(m, |o| Some(gauge(o.committed))),
    ),
    (
        "group_lag",
        "The partition's high watermark minus the consumer group's committed offset",
        MetricType::Gauge,
        |m| per_group_offset(m, |o| o.lag.map(gauge)),
    ),
    // The server's (only when one runs).
    (
        "server_connections",
        "Client connections open",
        MetricType::Gauge,
        |m| of_server(m, |s| gauge(s.connections_open)),
    ),
    (
        "server_connections_accepted",
        "Client connections accepted and served",
        MetricType::Counter,
        |m| of_server(m, |s| Value::Counter(s.connections_accepted)),
    ),
    (
        "server_connections_refused",
        "Client connections refused (max connections or the open-files limit)",
        MetricType::Counter,
        |m| of_server(m, |s| Value::Counter(s.connections_refused)),
    ),
    (
        "server_request_duration_seconds",
        "Time from a request read to its response written, per Kafka API",
        MetricType::Histogram,
        |m| {
            let requests = m.server.iter().flat_map(|s| &s.requests);
            requests
                .map(|r| {
                    (
                        vec![("api", r.api.clone())],
                        Value::Histogram(r.latency.clone()),
                    )
                })
                .collect()
        },
    ),
    (
        "server_errors",
        "Error codes in responses (one per failed partition, topic or group), per Kafka error code",
        MetricType::Counter,
        |m| {
            let errors = m.server.iter().flat_map(|s| &s.errors);
            errors
                .map(|e| {
                    let labels = vec![("code", e.code.to_string()), ("error", e.name.clone())];
                    (labels, Value::Counter(e.count))
                })
                .collect()
        },
    ),
    (
        "server_sendfile_bytes",
        "Bytes sent to clients with sendfile(2) (zero-copy) by this process",
        MetricType::Counter,
        |m| of_server(m, |s| Value::Counter(s.sendfile_bytes)),
    ),
    // A cluster node's replication throttle (label `quota`: Kafka's `LeaderReplication`
    // or `FollowerReplication`).
    (
        "replication_throttled_bytes",
        "Bytes moved for throttled replicas that are not in sync, per replication quota",
        MetricType::Counter,
        |m| per_replication_quota(m, |t| Value::Counter(t.throttled_bytes)),
    ),
    (
        "replication_throttled_byte_rate",
        "Bytes per second moved for throttled replicas over the last 11 seconds (Kafka's byte-rate)",
        MetricType::Gauge,
        |m| per_replication_quota(m, |t| gauge(t.byte_rate.round() as i64)),
    ),
    (
        "replication_throttle_time_seconds",
        "Time the replication quota held throttled replicas back (Kafka's throttle-time)",
        MetricType::Counter,
        |m| per_replication_quota(m, |t| Value::CounterF(t.throttle_time_seconds)),
    ),
    // Store-and-forward, per running forwarder (label `forwarder`; per partition also
    // `topic`, `partition`, `remote_topic`).
    (
        "forward_records_behind",
        "Records of the local partition not forwarded yet",
        MetricType::Gauge,
        |m| per_forward_partition(m, |p| gauge(p.records_behind())),
    ),
    (
        "forward_bytes_behind",
        "Bytes of the local partition not forwarded yet",
        MetricType::Gauge,
        |m| per_forward_partition(m, |p| gauge(p.bytes_behind)),
    ),
    (
        "forward_position",
        "The first local offset not acknowledged by the remote cluster",
        MetricType::Gauge,
        |m| per_forward_partition(m, |p| gauge(p.position)),
    ),
    (
        "forward_records",
        "Records forwarded and acknowledged by the remote cluster",
        MetricType::Counter,
        |m| per_forwarder(m, |f| Value::Counter(f.records_forwarded)),
    ),
    (
        "forward_bytes",
        "Bytes of the records forwarded (keys, values and headers)",
        MetricType::Counter,
        |m| per_forwarder(m, |f| Value::Counter(f.bytes_forwarded)),
    ),
    (
        "forward_records_skipped",
        "Records found forwarded already when a session resumed",
        MetricType::Counter,
        |m| per_forwarder(m, |f| Value::Counter(f.records_skipped)),
    ),
    (
        "forward_records_lost",
        "Records deleted by local retention before they were forwarded",
        MetricType::Counter,
        |m| per_forwarder(m, |f| Value::Counter(f.records_lost)),
    ),
    (
        "forward_sessions",
        "Forwarding sessions started (the first, and one after each failure)",
        MetricType::Counter,
        |m| per_forwarder(m, |f| Value::Counter(f.sessions)),
    ),
    (
        "forward_errors",
        "Forwarding sessions that failed (each retried after a backoff)",
        MetricType::Counter,
        |m| per_forwarder(m, |f| Value::Counter(f.errors)),
    ),
    (
        "forward_error",
        "1 while the forwarder's last session failed, else 0",
        MetricType::Gauge,
        |m| per_forwarder(m, |f| gauge(u8::from(f.last_error.is_some()))),
    ),
    (
        "forward_last_error_info",
        "The forwarder's last error (label error), while its last session failed",
        MetricType::Gauge,
        |m| {
            let failing = m
                .forwarders
                .iter()
                .filter_map(|f| Some((f, f.last_error.as_ref()?)));
            failing
                .map(|(f, e)| {
                    let labels = vec![("forwarder", f.name.clone()), ("error", e.clone())];
                    (labels, Value::Gauge(1))
                })
                .collect()
        },
    ),
    // Storage.
    (
        "storage_fsync_duration_seconds",
        "Segment fsyncs (data and indexes of one segment) by latency",
        MetricType::Histogram,
        |m| one(Value::Histogram(m.storage.fsync.clone())),
    ),
    (
        "storage_prefault_ranges",
        "Ranges the prefault thread faulted in ahead of writers (write) and sequential readers (read)",
        MetricType::Counter,
        |m| {
            let p = &m.storage.prefault;
            by_kind([("write", p.write_ranges), ("read", p.read_ranges)])
        },
    ),
    (
        "storage_prefault_bytes",
        "Bytes the prefault thread faulted in, by kind",
        MetricType::Counter,
        |m| {
            let p = &m.storage.prefault;
            by_kind([("write", p.write_bytes), ("read", p.read_bytes)])
        },
    ),
    (
        "storage_prefault_busy_seconds",
        "Time the prefault thread spent faulting pages in",
        MetricType::Counter,
        |m| one(Value::CounterF(m.storage.prefault.busy_seconds)),
    ),
    (
        "storage_prefault_refused",
        "Ranges the prefault thread was too busy to take (the writer or reader faulted them)",
        MetricType::Counter,
        |m| one(Value::Counter(m.storage.prefault.refused_ranges)),
    ),
    // Log directories.
    (
        "storage_offline_log_directories",
        "Log directories offline (Kafka's OfflineLogDirectoryCount)",
        MetricType::Gauge,
        |m| one(gauge(m.storage.offline_log_dirs)),
    ),
    (
        "storage_log_directory_offline",
        "1 for a log directory that failed, 0 for a usable one (Kafka's LogDirectoryOffline)",
        MetricType::Gauge,
        |m| {
            m.storage
                .log_dirs
                .iter()
                .map(|d| (vec![("dir", d.dir.clone())], gauge(u8::from(d.offline))))
                .collect()
        },
    ),
    (
        "storage_offline_partitions",
        "Partitions offline because their log directory failed (Kafka's OfflineReplicaCount)",
        MetricType::Gauge,
        |m| one(gauge(m.storage.offline_partitions)),
    ),
    (
        "storage_future_logs",
        "Partitions moving between log directories (future logs)",
        MetricType::Gauge,
        |m| one(gauge(m.storage.future_logs)),
    ),
    // Recovery totals of the logs opened.
    (
        "recovery_logs",
        "Partition logs open",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.logs)),
    ),
    (
        "recovery_logs_repaired",
        "Logs whose recovery changed something on disk when they were opened",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.logs_repaired)),
    ),
    (
        "recovery_segments_trusted",
        "Segments opened without validation (below the recovery point)",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.segments_trusted)),
    ),
    (
        "recovery_segments_validated",
        "Segments validated batch by batch when their logs were opened",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.segments_validated)),
    ),
    (
        "recovery_bytes_validated",
        "Bytes of batches validated when the logs were opened",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.bytes_validated)),
    ),
    (
        "recovery_truncations",
        "Places where recovery cut a log at a torn or corrupt batch",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.truncations)),
    ),
    (
        "recovery_indexes_rebuilt",
        "Index files recovery rebuilt",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.indexes_rebuilt)),
    ),
    (
        "recovery_segments_removed",
        "Segments recovery removed because they followed a cut",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.segments_removed)),
    ),
    (
        "recovery_checkpoints_damaged",
        "Damaged partition checkpoints recovery ignored",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.checkpoints_damaged)),
    ),
    (
        "recovery_producer_batches_replayed",
        "Batch headers read to rebuild idempotent producers' state",
        MetricType::Gauge,
        |m| one(gauge(m.storage.recovery.producer_batches_replayed)),
    ),
];

/// One series per partition, labelled `topic` and `partition`.
fn per_partition(m: &Metrics, value: fn(&PartitionMetrics) -> Value) -> Series {
    let labels = |p: &PartitionMetrics| -> Labels {
        vec![
            ("topic", p.topic.clone()),
            ("partition", p.partition.to_string()),
        ]
    };
    m.partitions.iter().map(|p| (labels(p), value(p))).collect()
}

/// One series per group, labelled `group`.
fn per_group(m: &Metrics, value: fn(&GroupMetrics) -> Value) -> Series {
    let labels = |g: &GroupMetrics| -> Labels { vec![("group", g.group_id.clone())] };
    m.groups.iter().map(|g| (labels(g), value(g))).collect()
}

/// One series per committed partition of each group, labelled `group`, `topic` and
/// `partition`; none for an offset without a value.
fn per_group_offset(m: &Metrics, value: fn(&GroupOffsetMetrics) -> Option<Value>) -> Series {
    let labels = |g: &GroupMetrics, o: &GroupOffsetMetrics| -> Labels {
        vec![
            ("group", g.group_id.clone()),
            ("topic", o.topic.clone()),
            ("partition", o.partition.to_string()),
        ]
    };
    m.groups
        .iter()
        .flat_map(|g| g.offsets.iter().map(move |o| (g, o)))
        .filter_map(|(g, o)| value(o).map(|v| (labels(g, o), v)))
        .collect()
}

/// One series per running forwarder, labelled `forwarder`.
fn per_forwarder(m: &Metrics, value: fn(&ForwardStatus) -> Value) -> Series {
    let labels = |f: &ForwardStatus| -> Labels { vec![("forwarder", f.name.clone())] };
    m.forwarders.iter().map(|f| (labels(f), value(f))).collect()
}

/// One series per partition of each running forwarder, labelled `forwarder`, `topic`,
/// `partition` and `remote_topic`.
fn per_forward_partition(m: &Metrics, value: fn(&PartitionStatus) -> Value) -> Series {
    let labels = |f: &ForwardStatus, p: &PartitionStatus| -> Labels {
        vec![
            ("forwarder", f.name.clone()),
            ("topic", p.topic.clone()),
            ("partition", p.partition.to_string()),
            ("remote_topic", p.remote_topic.clone()),
        ]
    };
    m.forwarders
        .iter()
        .flat_map(|f| f.partitions.iter().map(move |p| (labels(f, p), value(p))))
        .collect()
}

/// One series per side of a cluster node's replication throttle, none on a single node.
fn per_replication_quota(m: &Metrics, value: fn(&ReplicationThrottleMetrics) -> Value) -> Series {
    let sides = m.replication.iter().flat_map(|r| {
        [
            ("LeaderReplication", &r.leader),
            ("FollowerReplication", &r.follower),
        ]
    });
    sides
        .map(|(quota, t)| (vec![("quota", quota.to_string())], value(t)))
        .collect()
}

/// One unlabelled series if a server runs, else none.
fn of_server(m: &Metrics, value: fn(&ServerMetrics) -> Value) -> Series {
    m.server.iter().map(|s| (vec![], value(s))).collect()
}

/// One unlabelled series.
fn one(value: Value) -> Series {
    vec![(vec![], value)]
}

/// A counter per kind (label `kind`).
fn by_kind(kinds: [(&str, u64); 2]) -> Series {
    kinds
        .into_iter()
        .map(|(kind, n)| (vec![("kind", kind.to_string())], Value::Counter(n)))
        .collect()
}

/// Writes one metric family, unless it has no series.
fn family(
    enc: &mut DescriptorEncoder<'_>,
    (name, help, kind, read): &Family,
    metrics: &Metrics,
) -> Result<(), std::fmt::Error> {
    let series = read(metrics);
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, *kind)?;
    for (labels, v) in &series {
        let mut m = metric.encode_family(labels)?;
        match v {
            Value::Counter(c) => m.encode_counter::<NoLabelSet, _, u64>(c, None)?,
            Value::CounterF(c) => m.encode_counter::<NoLabelSet, _, u64>(c, None)?,
            Value::Gauge(g) => m.encode_gauge(g)?,
            Value::Histogram(h) => {
                m.encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &h.buckets, None)?
            }
        }
    }
    Ok(())
}

/// A value of one labelled series.
enum Value {
    Counter(u64),
    CounterF(f64),
    Gauge(i64),
    Histogram(HistogramSnapshot),
}

fn gauge(v: impl TryInto<i64>) -> Value {
    Value::Gauge(v.try_into().unwrap_or(i64::MAX))
}

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in FAMILIES {
            family(&mut enc, f, &self.0)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    #[test]
    fn the_text_has_labels_types_and_histograms() {
        let mut latency = HistogramSnapshot::empty();
        latency.buckets[0].1 = 2;
        latency.buckets[3].1 = 1;
        latency.count = 3;
        latency.sum_seconds = 0.0012;
        let m = Metrics {
            partitions: vec![PartitionMetrics {
                topic: "a\"b".into(),
                partition: 2,
                internal: false,
                records_in: 7,
                bytes_in: 700,
                records_out: 3,
                bytes_out: 300,
                log_start_offset: 0,
                log_end_offset: 7,
                high_watermark: 7,
                size_bytes: 900,
                segments: 1,
            }],
            groups: vec![GroupMetrics {
                group_id: "g".into(),
                state: "Stable",
                generation: 4,
                members: 2,
                offsets: vec![GroupOffsetMetrics {
                    topic: "t".into(),
                    partition: 0,
                    committed: 5,
                    high_watermark: Some(9),
                    lag: Some(4),
                }],
            }],
            storage: StorageMetrics::default(),
            server: Some(ServerMetrics {
                requests: vec![RequestMetrics {
                    api: "Produce".into(),
                    api_key: 0,
                    latency,
                }],
                errors: vec![ErrorMetrics {
                    code: 3,
                    name: "UNKNOWN_TOPIC_OR_PARTITION".into(),
                    count: 5,
                }],
                ..ServerMetrics::default()
            }),
            replication: Some(ReplicationMetrics {
                leader: ReplicationThrottleMetrics::default(),
                follower: ReplicationThrottleMetrics {
                    throttled_bytes: 4000,
                    byte_rate: 363.6,
                    throttle_time_seconds: 2.5,
                },
            }),
            forwarders: vec![ForwardStatus {
                name: "edge".into(),
                partitions: vec![PartitionStatus {
                    topic: "t".into(),
                    partition: 1,
                    remote_topic: "site.t".into(),
                    position: 40,
                    end: 45,
                    bytes_behind: 500,
                }],
                records_forwarded: 40,
                sessions: 2,
                errors: 1,
                last_error: Some("no \"broker\"".into()),
                ..ForwardStatus::default()
            }],
        };
        let text = prometheus_text(&m);
        let single = prometheus_text(&Metrics::default());
        assert!(!single.contains("replication_throttle"), "{single}");
        assert!(!single.contains("forward"), "{single}");
        for line in [
            "# TYPE tidelog_partition_records_in_total counter",
            "tidelog_partition_records_in_total{topic=\"a\\\"b\",partition=\"2\"} 7",
            "tidelog_partition_high_watermark{topic=\"a\\\"b\",partition=\"2\"} 7",
            "tidelog_group_state{group=\"g\",state=\"Stable\"} 1",
            "tidelog_group_lag{group=\"g\",topic=\"t\",partition=\"0\"} 4",
            "tidelog_group_committed_offset{group=\"g\",topic=\"t\",partition=\"0\"} 5",
            "# TYPE tidelog_server_request_duration_seconds histogram",
            "tidelog_server_request_duration_seconds_bucket{api=\"Produce\",le=\"5e-05\"} 2",
            "tidelog_server_request_duration_seconds_bucket{api=\"Produce\",le=\"0.0005\"} 3",
            "tidelog_server_request_duration_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 3",
            "tidelog_server_request_duration_seconds_count{api=\"Produce\"} 3",
            "tidelog_server_errors_total{code=\"3\",error=\"UNKNOWN_TOPIC_OR_PARTITION\"} 5",
            "tidelog_storage_fsync_duration_seconds_count 0",
            "tidelog_recovery_logs 0",
            "tidelog_replication_throttled_bytes_total{quota=\"LeaderReplication\"} 0",
            "tidelog_replication_throttled_bytes_total{quota=\"FollowerReplication\"} 4000",
            "tidelog_replication_throttled_byte_rate{quota=\"FollowerReplication\"} 364",
            "tidelog_replication_throttle_time_seconds_total{quota=\"FollowerReplication\"} 2.5",
            "tidelog_forward_records_behind{forwarder=\"edge\",topic=\"t\",partition=\"1\",remote_topic=\"site.t\"} 5",
            "tidelog_forward_bytes_behind{forwarder=\"edge\",topic=\"t\",partition=\"1\",remote_topic=\"site.t\"} 500",
            "tidelog_forward_position{forwarder=\"edge\",topic=\"t\",partition=\"1\",remote_topic=\"site.t\"} 40",
            "# TYPE tidelog_forward_records_total counter",
            "tidelog_forward_records_total{forwarder=\"edge\"} 40",
            "tidelog_forward_records_lost_total{forwarder=\"edge\"} 0",
            "tidelog_forward_sessions_total{forwarder=\"edge\"} 2",
            "tidelog_forward_errors_total{forwarder=\"edge\"} 1",
            "tidelog_forward_error{forwarder=\"edge\"} 1",
            "tidelog_forward_last_error_info{forwarder=\"edge\",error=\"no \\\"broker\\\"\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in:\n{text}"
            );
        }
    }
}
