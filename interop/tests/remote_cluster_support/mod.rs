//! Shared setup of the tests that drive tidelog's own network client against three
//! `tidelog serve` child processes: replication factor 3, `min.insync.replicas=2`,
//! short session and lag timeouts so a killed leader is replaced quickly.

use std::path::Path;
use std::time::Duration;

use tidelog::{ClientConfig, Cluster, TopicConfig};
use tidelog_interop::cluster::{Processes, eventually};

/// How long each setup step may take.
pub const WAIT: Duration = Duration::from_secs(60);

/// Client settings that retry quickly through a leader change and give a send long
/// enough to outlive one.
pub fn config(bootstrap: &str) -> ClientConfig {
    ClientConfig::new(bootstrap)
        .set("retry.backoff.ms", 50)
        .set("request.timeout.ms", 5000)
        .set("delivery.timeout.ms", 90_000)
}

/// Three nodes under `root` with a topic of `partitions` partitions whose replicas are
/// all in sync: the nodes, their bootstrap list, a `Cluster` connected to them and the
/// leader of partition 0.
pub fn three_nodes_with_topic(
    root: &Path,
    topic: &str,
    partitions: i32,
) -> (Processes, String, Cluster, i32) {
    let nodes = Processes::start(
        tidelog_interop::tidelog_bin(),
        root,
        3,
        &[
            "--broker-session-timeout-ms",
            "2000",
            "--replica-lag-time-max-ms",
            "3000",
            "--default-replication-factor",
            "3",
            "--min-insync-replicas",
            "2",
        ],
    );
    let bootstrap = nodes.layout.bootstrap();
    let cluster = eventually("three brokers", WAIT, || {
        Cluster::connect(config(&bootstrap))
            .ok()
            .filter(|c| c.brokers().len() == 3)
    });
    eventually("the topic", WAIT, || {
        cluster
            .create_topic_if_missing(topic, partitions, TopicConfig::new())
            .ok()
    });
    let leader = eventually("in-sync leaders", WAIT, || {
        let t = cluster.describe_topic(topic).ok()?;
        let all_in_sync = t.partitions.iter().all(|p| p.isr.len() == 3);
        all_in_sync.then_some(t.partitions[0].leader?)
    });
    (nodes, bootstrap, cluster, leader)
}
