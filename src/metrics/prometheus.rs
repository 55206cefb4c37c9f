//! A [`Metrics`] snapshot in the Prometheus text format (version 0.0.4), written by the
//! `prometheus-client` crate: names, help, types, label escaping and histogram buckets
//! are its, not ours.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::{HistogramSnapshot, Metrics};

/// The `Content-Type` of [`prometheus_text`]'s output.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Renders `metrics` in the Prometheus text format (version 0.0.4, [`CONTENT_TYPE`]),
/// every name prefixed `tidelog_`: per partition (labels `topic`, `partition`) records
/// and bytes in and out, offsets, size and segments; per group (label `group`) state,
/// generation, members, and per partition committed offset and lag; the server's
/// connections, request latency per API (label `api`), errors per code (labels `code`,
/// `error`) and sendfile bytes; storage fsync latency, prefault work and recovery
/// totals.
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

/// A metric family of one value per `T`: name, help, type, and the value.
type FamilyOf<T> = (&'static str, &'static str, MetricType, fn(&T) -> Value);

/// One metric family: name, help, type, and its labelled values.
fn family<T>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    items: &[T],
    mut value: impl FnMut(&T) -> Option<(Labels, Value)>,
) -> Result<(), std::fmt::Error> {
    let values: Vec<(Labels, Value)> = items.iter().filter_map(&mut value).collect();
    if values.is_empty() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in &values {
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
        let m = &self.0;
        let enc = &mut enc;
        let part = |p: &super::PartitionMetrics| -> Labels {
            vec![
                ("topic", p.topic.clone()),
                ("partition", p.partition.to_string()),
            ]
        };
        let partition_families: [FamilyOf<super::PartitionMetrics>; 9] = [
            (
                "partition_records_in",
                "Records appended to the partition since its log was opened",
                MetricType::Counter,
                |p| Value::Counter(p.records_in),
            ),
            (
                "partition_bytes_in",
                "Bytes of batches appended to the partition since its log was opened",
                MetricType::Counter,
                |p| Value::Counter(p.bytes_in),
            ),
            (
                "partition_records_out",
                "Offsets handed out by reads of the partition (consumers, fetches, replica fetches) since its log was opened",
                MetricType::Counter,
                |p| Value::Counter(p.records_out),
            ),
            (
                "partition_bytes_out",
                "Bytes of batches handed out by reads of the partition since its log was opened",
                MetricType::Counter,
                |p| Value::Counter(p.bytes_out),
            ),
            (
                "partition_log_start_offset",
                "First offset still in the partition's log",
                MetricType::Gauge,
                |p| gauge(p.log_start_offset),
            ),
            (
                "partition_log_end_offset",
                "Offset the next record of the partition will get",
                MetricType::Gauge,
                |p| gauge(p.log_end_offset),
            ),
            (
                "partition_high_watermark",
                "The partition's high watermark: consumers read below it",
                MetricType::Gauge,
                |p| gauge(p.high_watermark),
            ),
            (
                "partition_size_bytes",
                "Bytes of the partition's log on disk",
                MetricType::Gauge,
                |p| gauge(p.size_bytes),
            ),
            (
                "partition_segments",
                "Segments of the partition's log",
                MetricType::Gauge,
                |p| gauge(p.segments),
            ),
        ];
        for (name, help, kind, value) in partition_families {
            family(enc, name, help, kind, &m.partitions, |p| {
                Some((part(p), value(p)))
            })?;
        }

        let group = |g: &super::GroupMetrics| -> Labels { vec![("group", g.group_id.clone())] };
        family(
            enc,
            "group_state",
            "The consumer group's state (1 for the state it is in)",
            MetricType::Gauge,
            &m.groups,
            |g| {
                let mut l = group(g);
                l.push(("state", g.state.to_string()));
                Some((l, Value::Gauge(1)))
            },
        )?;
        family(
            enc,
            "group_generation",
            "The consumer group's generation",
            MetricType::Gauge,
            &m.groups,
            |g| Some((group(g), gauge(g.generation))),
        )?;
        family(
            enc,
            "group_members",
            "Members of the consumer group's generation",
            MetricType::Gauge,
            &m.groups,
            |g| Some((group(g), gauge(g.members))),
        )?;
        let offsets: Vec<(String, super::GroupOffsetMetrics)> = m
            .groups
            .iter()
            .flat_map(|g| g.offsets.iter().map(|o| (g.group_id.clone(), o.clone())))
            .collect();
        let offset_labels = |(g, o): &(String, super::GroupOffsetMetrics)| -> Labels {
            vec![
                ("group", g.clone()),
                ("topic", o.topic.clone()),
                ("partition", o.partition.to_string()),
            ]
        };
        family(
            enc,
            "group_committed_offset",
            "The consumer group's committed offset of the partition",
            MetricType::Gauge,
            &offsets,
            |x| Some((offset_labels(x), gauge(x.1.committed))),
        )?;
        family(
            enc,
            "group_lag",
            "The partition's high watermark minus the consumer group's committed offset",
            MetricType::Gauge,
            &offsets,
            |x| x.1.lag.map(|lag| (offset_labels(x), gauge(lag))),
        )?;

        if let Some(s) = &m.server {
            let one = std::slice::from_ref(s);
            family(
                enc,
                "server_connections",
                "Client connections open",
                MetricType::Gauge,
                one,
                |s| Some((vec![], gauge(s.connections_open))),
            )?;
            family(
                enc,
                "server_connections_accepted",
                "Client connections accepted and served",
                MetricType::Counter,
                one,
                |s| Some((vec![], Value::Counter(s.connections_accepted))),
            )?;
            family(
                enc,
                "server_connections_refused",
                "Client connections refused (max connections or the open-files limit)",
                MetricType::Counter,
                one,
                |s| Some((vec![], Value::Counter(s.connections_refused))),
            )?;
            family(
                enc,
                "server_request_duration_seconds",
                "Time from a request read to its response written, per Kafka API",
                MetricType::Histogram,
                &s.requests,
                |r| {
                    Some((
                        vec![("api", r.api.clone())],
                        Value::Histogram(r.latency.clone()),
                    ))
                },
            )?;
            family(
                enc,
                "server_errors",
                "Error codes in responses (one per failed partition, topic or group), per Kafka error code",
                MetricType::Counter,
                &s.errors,
                |e| {
                    Some((
                        vec![("code", e.code.to_string()), ("error", e.name.clone())],
                        Value::Counter(e.count),
                    ))
                },
            )?;
            family(
                enc,
                "server_sendfile_bytes",
                "Bytes sent to clients with sendfile(2) (zero-copy) by this process",
                MetricType::Counter,
                one,
                |s| Some((vec![], Value::Counter(s.sendfile_bytes))),
            )?;
        }

        let st = std::slice::from_ref(&m.storage);
        family(
            enc,
            "storage_fsync_duration_seconds",
            "Segment fsyncs (data and indexes of one segment) by latency",
            MetricType::Histogram,
            st,
            |s| Some((vec![], Value::Histogram(s.fsync.clone()))),
        )?;
        let kinds = [
            (
                "write",
                m.storage.prefault.write_ranges,
                m.storage.prefault.write_bytes,
            ),
            (
                "read",
                m.storage.prefault.read_ranges,
                m.storage.prefault.read_bytes,
            ),
        ];
        family(
            enc,
            "storage_prefault_ranges",
            "Ranges the prefault thread faulted in ahead of writers (write) and sequential readers (read)",
            MetricType::Counter,
            &kinds,
            |k| Some((vec![("kind", k.0.to_string())], Value::Counter(k.1))),
        )?;
        family(
            enc,
            "storage_prefault_bytes",
            "Bytes the prefault thread faulted in, by kind",
            MetricType::Counter,
            &kinds,
            |k| Some((vec![("kind", k.0.to_string())], Value::Counter(k.2))),
        )?;
        family(
            enc,
            "storage_prefault_busy_seconds",
            "Time the prefault thread spent faulting pages in",
            MetricType::Counter,
            st,
            |s| Some((vec![], Value::CounterF(s.prefault.busy_seconds))),
        )?;
        family(
            enc,
            "storage_prefault_refused",
            "Ranges the prefault thread was too busy to take (the writer or reader faulted them)",
            MetricType::Counter,
            st,
            |s| Some((vec![], Value::Counter(s.prefault.refused_ranges))),
        )?;
        let r = &m.storage.recovery;
        let recovery: [(&str, &str, u64); 10] = [
            ("recovery_logs", "Partition logs open", r.logs),
            (
                "recovery_logs_repaired",
                "Logs whose recovery changed something on disk when they were opened",
                r.logs_repaired,
            ),
            (
                "recovery_segments_trusted",
                "Segments opened without validation (below the recovery point)",
                r.segments_trusted,
            ),
            (
                "recovery_segments_validated",
                "Segments validated batch by batch when their logs were opened",
                r.segments_validated,
            ),
            (
                "recovery_bytes_validated",
                "Bytes of batches validated when the logs were opened",
                r.bytes_validated,
            ),
            (
                "recovery_truncations",
                "Places where recovery cut a log at a torn or corrupt batch",
                r.truncations,
            ),
            (
                "recovery_indexes_rebuilt",
                "Index files recovery rebuilt",
                r.indexes_rebuilt,
            ),
            (
                "recovery_segments_removed",
                "Segments recovery removed because they followed a cut",
                r.segments_removed,
            ),
            (
                "recovery_checkpoints_damaged",
                "Damaged partition checkpoints recovery ignored",
                r.checkpoints_damaged,
            ),
            (
                "recovery_producer_batches_replayed",
                "Batch headers read to rebuild idempotent producers' state",
                r.producer_batches_replayed,
            ),
        ];
        for (name, help, v) in recovery {
            family(enc, name, help, MetricType::Gauge, &[v], |v| {
                Some((vec![], gauge(*v)))
            })?;
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
        };
        let text = prometheus_text(&m);
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
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in:\n{text}"
            );
        }
    }
}
