//! The snapshot [`Broker::metrics`] returns, collected from the broker's topics, logs,
//! group coordinator, servers and running forwarders (the counters themselves are the
//! `metrics` layer's), and the registry of those forwarders.

use std::sync::Weak;

use parking_lot::Mutex;

use super::Broker;
use crate::coordinator::GroupType;
use crate::metrics::{
    BrokerStats, ForwardStatus, GroupMetrics, GroupOffsetMetrics, HistogramSnapshot, LogDirMetrics,
    Metrics, PartitionMetrics, RecoveryMetrics,
};
use crate::storage::LogManager;

/// A store-and-forward forwarder as the broker's metrics see it. The `forward` layer,
/// above this one, implements it and registers its forwarders
/// ([`Broker::register_forwarder`](super::Broker::register_forwarder)).
pub(crate) trait ForwarderProbe: Send + Sync {
    /// Its status now; None once it is stopping.
    fn forwarder_status(&self) -> Option<ForwardStatus>;
}

/// The forwarders running on a broker's topics, held weakly: one dropped (or stopped,
/// which drops it) leaves by itself.
#[derive(Default)]
pub(crate) struct Forwarders(Mutex<Vec<Weak<dyn ForwarderProbe>>>);

impl std::fmt::Debug for Forwarders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarders")
            .field("registered", &self.0.lock().len())
            .finish()
    }
}

impl Forwarders {
    /// Adds `probe` while it lives (the ones gone are swept out here).
    #[cfg(feature = "client")]
    pub(crate) fn register(&self, probe: Weak<dyn ForwarderProbe>) {
        let mut all = self.0.lock();
        all.retain(|p| p.strong_count() > 0);
        all.push(probe);
    }

    /// The metrics of every forwarder running, sorted by name.
    fn snapshot(&self) -> Vec<ForwardStatus> {
        // Upgrade under the lock, ask outside it: a probe takes its own lock.
        let live: Vec<_> = {
            let mut all = self.0.lock();
            all.retain(|p| p.strong_count() > 0);
            all.iter().filter_map(Weak::upgrade).collect()
        };
        let mut out: Vec<ForwardStatus> =
            live.iter().filter_map(|p| p.forwarder_status()).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

/// Takes the snapshot [`Broker::metrics`](crate::Broker::metrics) returns.
pub(crate) fn collect(
    broker: &Broker,
    stats: &BrokerStats,
    forwarders: &Forwarders,
    logs: Option<LogManager>,
) -> Metrics {
    let mut m = Metrics::default();
    let mut fsync = HistogramSnapshot::empty();
    for name in broker.topic_names() {
        let Ok(topic) = broker.registered_topic(&name) else {
            continue; // deleted meanwhile
        };
        for p in topic.partitions().iter() {
            let log = p.log();
            let t = log.stats().traffic();
            log.stats().add_fsyncs_to(&mut fsync);
            add_recovery(&mut m.storage.recovery, log.recovery_report());
            m.partitions.push(PartitionMetrics {
                topic: name.clone(),
                partition: p.index(),
                internal: topic.is_internal(),
                records_in: t.records_in,
                bytes_in: t.bytes_in,
                records_out: t.records_out,
                bytes_out: t.bytes_out,
                log_start_offset: p.log_start_offset(),
                log_end_offset: p.log_end_offset(),
                high_watermark: p.high_watermark(),
                size_bytes: p.size_bytes(),
                segments: p.segment_count(),
            });
        }
    }
    m.storage.fsync = fsync;
    if let Some(logs) = logs {
        m.storage.prefault = logs.prefault_stats();
        add_log_dirs(&mut m, broker, &logs);
    }
    m.groups = groups(broker);
    m.server = stats.servers();
    m.replication = broker
        .is_cluster_node()
        .then(|| stats.replication.snapshot());
    m.forwarders = forwarders.snapshot();
    m
}

/// The log directories, the offline ones and the partitions they took offline.
fn add_log_dirs(m: &mut Metrics, broker: &Broker, logs: &LogManager) {
    let states = logs.log_dir_states();
    for (dir, why) in &states {
        m.storage.log_dirs.push(LogDirMetrics {
            dir: dir.display().to_string(),
            offline: why.is_some(),
        });
    }
    m.storage.offline_log_dirs = states.iter().filter(|(_, why)| why.is_some()).count() as u64;
    for name in broker.topic_names() {
        let Ok(topic) = broker.registered_topic(&name) else {
            continue;
        };
        m.storage.offline_partitions += super::offline_partitions_of(&topic, &states).len() as u64;
    }
    m.storage.future_logs = logs.future_logs().len() as u64;
}

fn add_recovery(into: &mut RecoveryMetrics, r: &crate::storage::RecoveryReport) {
    into.logs += 1;
    into.logs_repaired += u64::from(!r.is_clean());
    into.segments_trusted += r.segments_trusted as u64;
    into.segments_validated += r.segments_validated as u64;
    into.bytes_validated += r.bytes_validated;
    into.truncations += r.truncated.len() as u64;
    into.indexes_rebuilt += r.indexes_rebuilt.len() as u64;
    into.segments_removed += r.segments_removed.len() as u64;
    into.checkpoints_damaged += u64::from(r.checkpoint_damaged);
    into.producer_batches_replayed += r.producer_batches_replayed;
}

/// Every group the coordinator knows, with its committed offsets and their lag.
fn groups(broker: &Broker) -> Vec<GroupMetrics> {
    let coordinator = broker.group_coordinator();
    let Ok(listed) = coordinator.list_typed_groups(&[], &[]) else {
        return Vec::new();
    };
    listed
        .into_iter()
        .filter_map(|g| {
            // A consumer-protocol group's epoch stands for the generation.
            let (state, generation, members) = match g.group_type {
                GroupType::Classic => {
                    let d = coordinator.describe_group(&g.group_id).ok()?;
                    (d.state.as_str(), d.generation_id, d.members.len())
                }
                GroupType::Consumer => {
                    let d = coordinator.consumer_group_describe(&g.group_id).ok()?;
                    (d.state.as_str(), d.group_epoch, d.members.len())
                }
            };
            let mut offsets: Vec<GroupOffsetMetrics> = coordinator
                .offset_fetch(&g.group_id, None)
                .unwrap_or_default()
                .into_iter()
                .filter(|o| o.offset >= 0)
                .map(|o| {
                    let hw = broker
                        .registered_topic(&o.topic)
                        .and_then(|t| t.partition(o.partition))
                        .map(|p| p.high_watermark())
                        .ok();
                    GroupOffsetMetrics {
                        lag: hw.map(|hw| (hw - o.offset).max(0)),
                        topic: o.topic,
                        partition: o.partition,
                        committed: o.offset,
                        high_watermark: hw,
                    }
                })
                .collect();
            offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            Some(GroupMetrics {
                group_id: g.group_id,
                state,
                generation,
                members,
                offsets,
            })
        })
        .collect()
}
