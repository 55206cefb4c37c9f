//! In-process clusters: three nodes on loopback (quorum listeners bound to port 0 first)
//! elect a controller, place and serve topics identically, fence a stopped node, and
//! take it back; a lagging node catches up through a snapshot; data directories of
//! another node or a single node are refused.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;
use crate::server::{Server, ServerHandle};

const WAIT: Duration = Duration::from_secs(30);
const SESSION: Duration = Duration::from_millis(2000);
/// `replica.lag.time.max.ms` of the test clusters.
const LAG: Duration = Duration::from_millis(1000);
/// `offsets.topic.num.partitions` of the test clusters.
const OFFSETS_PARTITIONS: i32 = 6;
/// `share.coordinator.state.topic.num.partitions` of the test clusters: Kafka's 50 would
/// have every node open 50 logs when the first share group starts, for nothing the tests
/// need (a node busy opening many logs is `many_logs`'s test).
const SHARE_STATE_PARTITIONS: i32 = 6;

mod acked_writes;
mod broker_epoch;
mod brokers;
mod client_quotas;
mod describe_producers;
mod describe_topic_partitions;
mod drain;
mod duplicate_proposal;
mod durable_acks;
mod failed_log_dir;
mod failover;
mod features;
mod group_configs;
mod group_coordinators;
mod log_dir_moves;
mod lost_directory;
mod many_logs;
mod metadata_visibility;
mod pipelined_commits;
mod pipelined_produce;
mod quorum_api;
mod quorum_forgery;
mod quorum_forwarding;
mod racks;
mod read_barrier;
mod reassignment;
mod replication;
mod replication_throttle;
mod share_groups;
mod transactions;
mod unclean_election;
mod voter_changes;

/// Polls `cond` every 20 ms for at most [`WAIT`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A loopback listener for a node's quorum address, on a port below Linux's ephemeral
/// range (32768-60999). A node restarted on its address rebinds that port after it was
/// free for a while; a port from `bind(0)` could meanwhile have been handed to another
/// test's listener or outgoing connection ("Address already in use"). Ports here come
/// from this process's own turn through 20000-31999 (started at its pid): no other
/// test of the process takes one again, and nothing the kernel hands out lands there.
fn quorum_listener() -> TcpListener {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 20_000;
    const SPAN: u32 = 12_000;
    let start = std::process::id().wrapping_mul(7919) % SPAN;
    for _ in 0..SPAN {
        let port = FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", port as u16)) {
            return l;
        }
    }
    panic!("no free loopback port in {FIRST}-{}", FIRST + SPAN - 1);
}

#[test]
fn quorum_listeners_are_distinct_and_below_the_ephemeral_range() {
    let listeners: Vec<TcpListener> = (0..8).map(|_| quorum_listener()).collect();
    let mut ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    assert!(
        ports.iter().all(|p| (20_000..32_000).contains(p)),
        "{ports:?}"
    );
    drop(listeners);
    // Freed, they are still not handed out again: a restarted node finds its port.
    ports.extend((0..8).map(|_| quorum_listener().local_addr().unwrap().port()));
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 16, "{ports:?}");
}

struct TestCluster {
    dirs: Vec<tempfile::TempDir>,
    addrs: Vec<SocketAddr>,
    quorum: String,
    nodes: Vec<Option<ServerHandle>>,
    snapshot_after: usize,
    lag: Duration,
    /// Each node also listens on a `REPLICATION` listener, named the inter-broker one.
    inter_broker: bool,
    /// The nodes take follower fetches without a broker epoch (a rolling upgrade).
    fetch_without_epoch: bool,
    /// The node that never records its directory id with the quorum, if any.
    unrecorded: Option<usize>,
    /// Node `i` is in rack `rack-{i + 1}`, and consumers are sent to the replica of their
    /// rack (`RackAwareReplicaSelector`).
    racks: bool,
    /// The highest `transaction.version` node `i` supports, where not this build's.
    tv_max: std::collections::BTreeMap<usize, i16>,
    /// Node `i`'s second log directory (`log.dirs`), when the nodes have one.
    extra_dirs: Vec<tempfile::TempDir>,
}

impl TestCluster {
    fn new(n: usize, snapshot_after: usize) -> TestCluster {
        TestCluster::with_lag(n, snapshot_after, LAG)
    }

    /// A cluster whose `replica.lag.time.max.ms` is `lag`.
    fn with_lag(n: usize, snapshot_after: usize, lag: Duration) -> TestCluster {
        TestCluster::build(n, snapshot_after, lag, false, None)
    }

    /// A cluster whose nodes replicate on a `REPLICATION` listener of their own, the
    /// inter-broker listener.
    fn with_inter_broker_listener(n: usize, lag: Duration) -> TestCluster {
        TestCluster::build(n, 1024, lag, true, None)
    }

    /// A cluster whose node `i` never records its directory id (its
    /// `RegisterVoterDirectory` is never applied anywhere).
    fn with_unrecorded_directory(n: usize, i: usize) -> TestCluster {
        TestCluster::build(n, 1024, LAG, false, Some(i))
    }

    /// A cluster whose node `i` never records its directory id and is not started with
    /// the others: [`TestCluster::restart`] starts it, on an empty directory, once the
    /// others made the cluster. The others' directories are formatted first with a
    /// cluster id (`tidelog format --initial-controllers`): voters on directories they
    /// format themselves found a cluster only with every voter.
    fn with_late_unrecorded_node(n: usize, i: usize) -> TestCluster {
        TestCluster::build_with(n, 1024, LAG, (false, Some(i), false, false), Some(i))
    }

    fn build(
        n: usize,
        snapshot_after: usize,
        lag: Duration,
        inter_broker: bool,
        unrecorded: Option<usize>,
    ) -> TestCluster {
        TestCluster::build_with(
            n,
            snapshot_after,
            lag,
            (inter_broker, unrecorded, false, false),
            None,
        )
    }

    /// A cluster whose node `i` is in rack `rack-{i + 1}`, with the rack-aware replica
    /// selector and `replica.lag.time.max.ms` `lag`.
    fn with_racks(n: usize, lag: Duration) -> TestCluster {
        TestCluster::build_with(n, 1024, lag, (false, None, true, false), None)
    }

    /// A cluster whose nodes each have a second log directory ([`TestCluster::extra_dir`])
    /// and `replica.lag.time.max.ms` `lag`.
    fn with_log_dirs(n: usize, lag: Duration) -> TestCluster {
        TestCluster::build_with(n, 1024, lag, (false, None, false, true), None)
    }

    fn build_with(
        n: usize,
        snapshot_after: usize,
        lag: Duration,
        (inter_broker, unrecorded, racks, log_dirs): (bool, Option<usize>, bool, bool),
        late: Option<usize>,
    ) -> TestCluster {
        let listeners: Vec<TcpListener> = (0..n).map(|_| quorum_listener()).collect();
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let quorum = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}@{a}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut c = TestCluster {
            dirs: (0..n).map(|_| tempfile::tempdir().unwrap()).collect(),
            addrs,
            quorum,
            nodes: (0..n).map(|_| None).collect(),
            snapshot_after,
            lag,
            inter_broker,
            fetch_without_epoch: false,
            unrecorded,
            racks,
            tv_max: Default::default(),
            extra_dirs: match log_dirs {
                true => (0..n).map(|_| tempfile::tempdir().unwrap()).collect(),
                false => Vec::new(),
            },
        };
        if let Some(late) = late {
            let cluster_id =
                crate::storage::codec::uuid_base64(&crate::storage::codec::random_uuid());
            let controllers = c
                .addrs
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let directory_id =
                        crate::storage::codec::uuid_base64(&crate::storage::codec::random_uuid());
                    format!("{}@{a}:{directory_id}", i + 1)
                })
                .collect::<Vec<_>>()
                .join(",");
            for i in (0..n).filter(|i| *i != late) {
                format::format_node(
                    c.dir(i),
                    &cluster_id,
                    i as i32 + 1,
                    &format::NodeFormat::InitialControllers(controllers.clone()),
                    false,
                )
                .unwrap();
            }
        }
        for (i, l) in listeners.into_iter().enumerate() {
            if late != Some(i) {
                c.nodes[i] = Some(c.start_with(i, l));
            }
        }
        c
    }

    fn start_with(&self, i: usize, listener: TcpListener) -> ServerHandle {
        // A few `__consumer_offsets` and `__share_group_state` partitions, enough to place
        // groups and share-partition states on every node.
        let mut broker = crate::broker::Broker::builder(self.dirs[i].path())
            .offsets_topic_num_partitions(OFFSETS_PARTITIONS)
            .share(crate::config::ShareConfig {
                state_topic_partitions: SHARE_STATE_PARTITIONS,
                ..Default::default()
            });
        if let Some(extra) = self.extra_dirs.get(i) {
            broker = broker.log_dirs([extra.path()]);
        }
        let broker = broker.open().unwrap();
        let mut builder = Server::builder(broker).listen(SocketAddr::from(([127, 0, 0, 1], 0)));
        if self.inter_broker {
            builder = builder
                .add_named_listener(
                    "REPLICATION",
                    crate::security::SecurityProtocol::Plaintext,
                    "127.0.0.1:0",
                )
                .inter_broker_listener_name("REPLICATION");
        }
        if self.unrecorded == Some(i) {
            builder = builder.test_unrecorded_directory();
        }
        if let Some(max) = self.tv_max.get(&i) {
            builder = builder.test_supported_features(&[("transaction.version", 0, *max)]);
        }
        if self.racks {
            builder = builder
                .broker_rack(format!("rack-{}", i + 1))
                .replica_selector_class("org.apache.kafka.common.replica.RackAwareReplicaSelector")
                .unwrap();
        }
        builder
            .node_id(i as i32 + 1)
            .quorum(self.quorum.clone())
            .broker_session_timeout(SESSION)
            .replica_lag_time_max(self.lag)
            .follower_fetch_without_epoch(self.fetch_without_epoch)
            .test_cluster(listener, self.snapshot_after)
            .start()
            .unwrap()
    }

    fn restart(&mut self, i: usize) {
        let l = TcpListener::bind(self.addrs[i]).unwrap();
        self.nodes[i] = Some(self.start_with(i, l));
    }

    /// Stops node `i` as a crash would look to the others.
    fn halt(&mut self, i: usize) {
        self.nodes[i].take().unwrap().halt();
    }

    fn node(&self, i: usize) -> &ClusterNode {
        self.nodes[i].as_ref().unwrap().cluster_node().unwrap()
    }

    fn running(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_some())
            .collect()
    }

    fn dir(&self, i: usize) -> &Path {
        self.dirs[i].path()
    }

    /// Node `i`'s second log directory (a cluster made by [`TestCluster::with_log_dirs`]).
    fn extra_dir(&self, i: usize) -> &Path {
        self.extra_dirs[i].path()
    }

    /// Waits until every running node knows the cluster, a controller and every running
    /// broker unfenced, and has applied every running node's directory id: until then a
    /// voter on a new directory does not vote (`amnesia::may_vote`), so a test that stops
    /// the controller sooner could find no majority to elect another.
    fn wait_settled(&self) {
        let running: Vec<i32> = self.running().iter().map(|i| *i as i32 + 1).collect();
        wait_until("the cluster to settle", || {
            self.running().iter().all(|&i| {
                let img = self.node(i).image();
                img.cluster_id.is_some()
                    && self.node(i).controller_id().is_some()
                    && img.unfenced_brokers() == running
                    && self.running().iter().all(|&j| {
                        self.unrecorded == Some(j) || img.directories.contains_key(&(j as i32 + 1))
                    })
            })
        });
    }

    /// Waits until every running node has published the same image.
    fn wait_same_image(&self) -> Arc<MetadataImage> {
        let mut last = None;
        wait_until("identical images on every node", || {
            let images: Vec<_> = self
                .running()
                .iter()
                .map(|&i| self.node(i).image())
                .collect();
            let same = images.windows(2).all(|w| w[0] == w[1]);
            last = images.into_iter().next();
            same
        });
        last.unwrap()
    }

    fn shutdown(mut self) {
        self.stop_all();
    }

    /// Stops every running node as `ServerHandle::shutdown` does, but with every
    /// controlled shutdown first, while all the voters still run: one node after another,
    /// the last voters' would wait out their timeout for a majority already gone.
    fn stop_all(&mut self) {
        for i in self.running() {
            if self.node(i).controller_id().is_some() {
                // As a server stopping: a failed controlled shutdown is no reason not to
                // stop.
                let _ = self.node(i).controlled_shutdown(Duration::from_secs(5));
            }
        }
        for n in self.nodes.iter_mut() {
            if let Some(s) = n.take() {
                s.halt();
            }
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.stop_all();
        }
    }
}

/// A metadata listener that remembers the local changes it was told about.
#[derive(Default)]
struct RoleRecorder {
    changes: parking_lot::Mutex<Vec<image::LocalPartitionChange>>,
}

impl MetadataListener for RoleRecorder {
    fn on_metadata(&self, update: &MetadataUpdate<'_>) {
        self.changes.lock().extend(update.local_changes().changed);
    }
}

impl RoleRecorder {
    /// Partitions of "events" whose latest role here is leader.
    fn leading(&self) -> usize {
        let mut latest = std::collections::BTreeMap::new();
        for c in self.changes.lock().iter().filter(|c| c.topic == "events") {
            latest.insert(
                c.partition,
                matches!(c.role, image::LocalRole::Leader { .. }),
            );
        }
        latest.values().filter(|l| **l).count()
    }

    /// True if this node was told it leads `partition` with an ISR without `gone`.
    fn saw_isr_change(&self, partition: i32, gone: i32) -> bool {
        self.changes.lock().iter().any(|c| {
            c.topic == "events"
                && c.partition == partition
                && matches!(&c.role, image::LocalRole::Leader { isr, .. } if !isr.contains(&gone))
        })
    }
}

fn partition_dir(dir: &Path, topic: &str, p: usize) -> PathBuf {
    dir.join(format!("{topic}-{p}"))
}

#[test]
fn three_nodes_elect_place_fail_over_and_rejoin() {
    let mut c = TestCluster::new(3, 1024);
    c.wait_settled();
    // meta.properties names each node and the one cluster id.
    let cluster_id = c.node(0).image().cluster_id.clone().unwrap();
    for i in 0..3 {
        let props = meta_properties::read(c.dir(i)).unwrap().unwrap();
        assert_eq!(props.node_id, i as i32 + 1);
        assert_eq!(props.cluster_id, cluster_id);
    }
    // The internal topic is created by the controller with 3 replicas.
    wait_until("__consumer_offsets", || {
        c.node(0)
            .image()
            .topic(crate::broker::OFFSETS_TOPIC)
            .is_some()
    });
    let offsets = c
        .node(0)
        .image()
        .topic(crate::broker::OFFSETS_TOPIC)
        .unwrap()
        .clone();
    assert!(offsets.internal);
    assert_eq!(offsets.partitions[0].replicas.len(), 3);

    // A topic with replication factor 3 and 6 partitions, created through node 2.
    let topic = NewTopic {
        name: "events".into(),
        partitions: 6,
        replication_factor: 3,
        ..Default::default()
    };
    c.node(1).create_topic(&topic, false, WAIT).unwrap();
    let img = c.wait_same_image();
    let t = img.topic("events").unwrap();
    let mut leaders = std::collections::BTreeMap::new();
    for p in &t.partitions {
        assert_eq!(p.replicas.len(), 3);
        assert_eq!(p.isr.len(), 3);
        *leaders.entry(p.leader).or_insert(0) += 1;
    }
    assert_eq!(
        leaders.len(),
        3,
        "leaders spread over every node: {leaders:?}"
    );
    assert!(leaders.values().all(|n| *n == 2), "{leaders:?}");
    // The replica manager's interface: a listener learns this node's roles; the leader
    // shrinks an ISR with AlterPartition, and a stale change is refused.
    let roles = Arc::new(RoleRecorder::default());
    c.node(0).add_listener(roles.clone());
    assert_eq!(
        roles.leading(),
        leaders[&1],
        "node 1 is told which partitions it leads"
    );
    assert_eq!(c.node(0).config().min_insync_replicas, 1);
    let (pi, p) = t
        .partitions
        .iter()
        .enumerate()
        .find(|(_, p)| p.leader == 1)
        .unwrap();
    let follower = *p.isr.iter().find(|r| **r != 1).unwrap();
    let shrink = AlterPartition {
        topic: "events".into(),
        topic_id: t.id,
        partition: pi as i32,
        broker_id: 1,
        broker_epoch: c.node(0).broker_epoch().unwrap(),
        leader_epoch: p.leader_epoch,
        partition_epoch: p.partition_epoch,
        new_isr: p.isr.iter().copied().filter(|r| *r != follower).collect(),
    };
    c.node(0)
        .alter_partition(shrink.clone(), WAIT)
        .and_then(Proposal::wait)
        .unwrap();
    assert!(matches!(
        c.node(0)
            .alter_partition(shrink, WAIT)
            .and_then(Proposal::wait),
        Err(crate::error::Error::InvalidUpdateVersion { .. })
    ));
    // (The leader's replica manager may add the caught-up follower back at once: the
    // shrink is seen in the published images, not necessarily in the latest one.)
    wait_until("the ISR change applied", || {
        roles.saw_isr_change(pi as i32, follower)
    });
    // Every node opened a log for each partition it hosts (all 6), with the topic id.
    let id = codec::uuid_base64(&t.id);
    for i in 0..3 {
        let broker = crate::broker::Broker::open(c.dir(i));
        assert!(matches!(
            broker,
            Err(crate::error::Error::DirectoryLocked(_))
        ));
        for p in 0..6 {
            let meta = std::fs::read_to_string(
                partition_dir(c.dir(i), "events", p).join("partition.metadata"),
            )
            .unwrap();
            assert!(meta.contains(&id), "{meta}");
        }
    }
    // validate_only creates nothing; a replication factor above the brokers is refused.
    let too_many = NewTopic {
        name: "wide".into(),
        partitions: 1,
        replication_factor: 4,
        ..Default::default()
    };
    assert!(matches!(
        c.node(0).create_topic(&too_many, false, WAIT),
        Err(crate::error::Error::InvalidReplicationFactor { .. })
    ));
    let fine = NewTopic {
        name: "checked".into(),
        partitions: 2,
        replication_factor: 2,
        ..Default::default()
    };
    c.node(0).create_topic(&fine, true, WAIT).unwrap();
    assert!(c.node(0).image().topic("checked").is_none());

    // In-process admin on a cluster node goes through the controller: default
    // replication factor 1, so each partition lives on one node only.
    let img = {
        c.node(2)
            .create_topic(
                &NewTopic {
                    name: "solo".into(),
                    partitions: 3,
                    replication_factor: -1,
                    ..Default::default()
                },
                false,
                WAIT,
            )
            .unwrap();
        c.wait_same_image()
    };
    for (p, part) in img.topic("solo").unwrap().partitions.iter().enumerate() {
        assert_eq!(part.replicas.len(), 1);
        for i in 0..3 {
            let hosted = part.replicas[0] == i as i32 + 1;
            assert_eq!(
                partition_dir(c.dir(i), "solo", p).exists(),
                hosted,
                "solo-{p} on node {}",
                i + 1
            );
        }
    }
    // Deleting removes the logs everywhere.
    c.node(0).delete_topic("solo", WAIT).unwrap();
    c.wait_same_image();
    for i in 0..3 {
        for p in 0..3 {
            assert!(!partition_dir(c.dir(i), "solo", p).exists());
        }
    }

    // Stop the controller: another is elected, the stopped node is fenced after the
    // session timeout, leaves every ISR and leads nothing.
    let controller = c.node(0).controller_id().unwrap();
    let ci = (controller - 1) as usize;
    c.halt(ci);
    let others = c.running();
    wait_until("a new controller", || {
        others
            .iter()
            .all(|&i| c.node(i).controller_id().is_some_and(|n| n != controller))
    });
    wait_until("the stopped node fenced", || {
        others
            .iter()
            .all(|&i| !c.node(i).image().is_unfenced(controller))
    });
    // (The data plane may grow an ISR back meanwhile, never with a fenced node.)
    let img = c.wait_same_image();
    for p in &img.topic("events").unwrap().partitions {
        assert_ne!(p.leader, controller);
        assert!(p.leader != NO_LEADER);
        assert!(p.isr.contains(&p.leader), "{:?}", p.isr);
        assert!(!p.isr.contains(&controller), "{:?}", p.isr);
    }
    // A proposal still commits with two of three voters.
    c.node(others[0])
        .create_topic(
            &NewTopic {
                name: "while-down".into(),
                partitions: 1,
                replication_factor: 2,
                ..Default::default()
            },
            false,
            WAIT,
        )
        .unwrap();

    // It restarts on its data directory and rejoins: registered again, unfenced, with
    // the same image as the others (including what was created while it was down).
    c.restart(ci);
    c.wait_settled();
    let img = c.wait_same_image();
    assert!(img.topic("while-down").is_some());
    assert!(img.is_unfenced(controller));
    assert!(c.node(ci).broker_epoch().unwrap() > 0);
    c.shutdown();
}

#[test]
fn a_lagging_node_catches_up_through_a_snapshot() {
    let mut c = TestCluster::new(3, 8);
    c.wait_settled();
    let behind = c.node(2).image().index;
    c.halt(2);
    wait_until("node 3 fenced", || !c.node(0).image().is_unfenced(3));
    for n in 0..12 {
        c.node(n % 2)
            .create_topic(
                &NewTopic {
                    name: format!("t{n}"),
                    partitions: 1,
                    replication_factor: 2,
                    ..Default::default()
                },
                false,
                WAIT,
            )
            .unwrap();
    }
    // The others compacted their logs past what node 3 has: the entries it lacks are
    // gone, so it can only catch up from a snapshot.
    let meta = |i: usize| c.dir(i).join(CLUSTER_METADATA_DIR);
    let (meta0, meta1, meta2) = (meta(0), meta(1), meta(2));
    wait_until("both running nodes compacted past node 3", || {
        storage::stored_snapshot_index(&meta0) > behind
            && storage::stored_snapshot_index(&meta1) > behind
    });
    assert!(storage::stored_snapshot_index(&meta2) <= behind);
    c.restart(2);
    c.wait_settled();
    let img = c.wait_same_image();
    assert!((0..12).all(|n| img.topic(&format!("t{n}")).is_some()));
    assert!(
        storage::stored_snapshot_index(&meta2) > behind,
        "node 3 installed the controller's snapshot"
    );
    // And a restart of a compacted node replays only its tail, to the same image (its
    // unclean restart took it out of the ISRs and it may already be back in some, so only
    // the topics and replicas match the image from before).
    c.halt(0);
    c.restart(0);
    wait_until("node 1 registered again and unfenced everywhere", || {
        c.node(0).broker_epoch().is_some_and(|epoch| {
            c.running().iter().all(|&i| {
                let img = c.node(i).image();
                img.brokers
                    .get(&1)
                    .is_some_and(|b| b.epoch == epoch && !b.fenced)
            })
        })
    });
    let after = c.wait_same_image();
    let replicas = |img: &MetadataImage| -> Vec<(String, Vec<Vec<i32>>)> {
        img.topics
            .values()
            .map(|t| {
                (
                    t.name.clone(),
                    t.partitions.iter().map(|p| p.replicas.clone()).collect(),
                )
            })
            .collect()
    };
    assert_eq!(replicas(&after), replicas(&img));
    // Node 1 catches up at once on partitions without records and may be back in their
    // ISRs by now: each ISR is only checked to be a set of the replicas led from inside.
    for t in after.topics.values() {
        for p in &t.partitions {
            assert!(p.isr.contains(&p.leader), "{}: {p:?}", t.name);
            assert!(
                p.isr.iter().all(|r| p.replicas.contains(r)),
                "{}: {p:?}",
                t.name
            );
        }
    }
    c.shutdown();
}

#[test]
fn a_data_directory_of_another_node_or_a_single_node_is_refused() {
    let single = |dir: &Path, id: i32| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let quorum = format!("{id}@{}", l.local_addr().unwrap());
        Server::builder(crate::broker::Broker::open(dir).unwrap())
            .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
            .node_id(id)
            .quorum(quorum)
            .test_cluster(l, 1024)
            .start()
    };
    // A one-voter cluster elects itself and is ready.
    let dir = tempfile::tempdir().unwrap();
    let s = single(dir.path(), 5).unwrap();
    let node = s.cluster_node().unwrap().clone();
    wait_until("a one-node cluster", || {
        node.image().is_unfenced(5) && node.image().topic(crate::broker::OFFSETS_TOPIC).is_some()
    });
    assert_eq!(
        node.image()
            .topic(crate::broker::OFFSETS_TOPIC)
            .unwrap()
            .partitions[0]
            .replicas,
        vec![5]
    );
    // Garbage on the quorum port closes that connection only.
    for junk in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        &transport::frame(b"not a hello")[..],
        &[0xff; 64][..],
    ] {
        let mut conn = std::net::TcpStream::connect(node.quorum_addr()).unwrap();
        std::io::Write::write_all(&mut conn, junk).unwrap();
    }
    let t = NewTopic {
        name: "after-junk".into(),
        partitions: 1,
        replication_factor: 1,
        ..Default::default()
    };
    node.create_topic(&t, false, WAIT).unwrap();
    s.shutdown().unwrap();
    // As another node: refused, naming both ids.
    let e = single(dir.path(), 6).unwrap_err().to_string();
    assert!(e.contains("node 5") && e.contains("node 6"), "{e}");
    // Without a node id: refused.
    let e = Server::builder(crate::broker::Broker::open(dir.path()).unwrap())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap_err()
        .to_string();
    assert!(e.contains("cluster node"), "{e}");
    // A plain broker on it has no topics and refuses admin operations.
    let b = crate::broker::Broker::open(dir.path()).unwrap();
    assert!(
        b.create_topic("x", 1, crate::config::TopicConfig::new())
            .is_err()
    );
    drop(b);
    // The same node again: back with its topics.
    let s = single(dir.path(), 5).unwrap();
    let node = s.cluster_node().unwrap().clone();
    wait_until("the node back", || node.image().is_unfenced(5));
    s.shutdown().unwrap();

    // A single node's data directory with topics is refused; a fresh one is adopted.
    let dir = tempfile::tempdir().unwrap();
    let b = crate::broker::Broker::open(dir.path()).unwrap();
    b.create_topic("mine", 1, crate::config::TopicConfig::new())
        .unwrap();
    drop(b);
    let e = single(dir.path(), 1).unwrap_err().to_string();
    assert!(e.contains("mine"), "{e}");
    assert!(!dir.path().join(CLUSTER_METADATA_DIR).exists());
}

#[test]
fn the_quorum_syntax() {
    let v = parse_quorum("1@127.0.0.1:9093, 2@localhost:9193,3@[::1]:9293").unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(
        v[1],
        Voter {
            id: 2,
            addr: "localhost:9193".into()
        }
    );
    for bad in [
        "",
        "1@h",
        "x@h:1",
        "1@h:1,1@h:2",
        "1@h:0",
        "-1@h:1",
        "1:h:1",
    ] {
        assert!(parse_quorum(bad).is_err(), "{bad:?} accepted");
    }
}
