//! Three `tidelog serve --node-id N --quorum ...` child processes on loopback: they elect
//! a controller, and real clients see the cluster: librdkafka's admin client creates a
//! topic with replication factor 3 and 6 partitions, its metadata lists 3 brokers and
//! every partition's replicas and ISR with leaders spread over the nodes, and `kcat -L`
//! (where installed) shows the same. A SIGTERM'd node moves its leaderships away
//! (controlled shutdown) before it exits.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tidelog_interop::cluster::free_ports;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::metadata::Metadata;

/// Kills the nodes when the test ends, however it ends.
struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn metadata(bootstrap: &str, topic: Option<&str>) -> Option<Metadata> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "metadata-reader")
        .create()
        .ok()?;
    consumer.fetch_metadata(topic, Duration::from_secs(5)).ok()
}

/// Polls `f` every 200 ms for at most 30 s.
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn three_nodes_serve_replicated_topic_metadata() {
    let bin = tidelog_interop::tidelog_bin();
    let ports = free_ports(6);
    let quorum = (0..3)
        .map(|i| format!("{}@127.0.0.1:{}", i + 1, ports[3 + i]))
        .collect::<Vec<_>>()
        .join(",");
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = Nodes(Vec::new());
    for i in 0..3 {
        nodes.0.push(
            Command::new(&bin)
                .arg("serve")
                .arg("--data")
                .arg(dirs[i].path())
                .arg("--listen")
                .arg(format!("127.0.0.1:{}", ports[i]))
                .arg("--node-id")
                .arg((i + 1).to_string())
                .arg("--quorum")
                .arg(&quorum)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    let bootstrap = format!("127.0.0.1:{}", ports[0]);
    eventually("3 brokers and a controller", || {
        metadata(&bootstrap, None).filter(|m| m.brokers().len() == 3)
    });

    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let runtime = futures_executor_block_on(admin.create_topics(
        &[NewTopic::new("replicated", 6, TopicReplication::Fixed(3))],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(20))),
    ));
    for r in runtime.unwrap() {
        r.unwrap();
    }

    // Every node answers the same: 3 brokers, 6 partitions of 3 replicas all in sync,
    // leaders spread over the nodes.
    for port in &ports[..3] {
        let m = eventually("the topic's metadata", || {
            metadata(&format!("127.0.0.1:{port}"), Some("replicated")).filter(|m| {
                m.topics()
                    .first()
                    .is_some_and(|t| t.partitions().len() == 6)
            })
        });
        assert_eq!(m.brokers().len(), 3);
        let t = &m.topics()[0];
        assert!(t.error().is_none());
        let mut leaders = BTreeMap::new();
        for p in t.partitions() {
            assert_eq!(p.replicas().len(), 3, "{:?}", p.replicas());
            assert_eq!(p.isr().len(), 3, "{:?}", p.isr());
            assert!(p.replicas().contains(&p.leader()));
            *leaders.entry(p.leader()).or_insert(0) += 1;
        }
        assert_eq!(
            leaders.values().copied().collect::<Vec<_>>(),
            vec![2, 2, 2],
            "{leaders:?}"
        );
    }

    // kcat, where installed, shows the same cluster.
    if let Ok(out) = Command::new("kcat")
        .args(["-b", &bootstrap, "-L", "-t", "replicated", "-m", "10"])
        .output()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("3 brokers"), "{text}");
        assert_eq!(text.matches("replicas: ").count(), 6, "{text}");
        assert!(text.contains("isrs: "), "{text}");
    }

    // SIGTERM node 3: controlled shutdown moves its leaderships to the other replicas.
    let pid = nodes.0[2].id();
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = eventually("node 3 to exit", || nodes.0[2].try_wait().unwrap());
    assert!(status.success(), "{status:?}");
    let m = eventually("leaders moved off node 3", || {
        metadata(&bootstrap, Some("replicated")).filter(|m| {
            m.brokers().len() == 2
                && m.topics()[0]
                    .partitions()
                    .iter()
                    .all(|p| p.leader() != 3 && p.leader() >= 0)
        })
    });
    for p in m.topics()[0].partitions() {
        assert!(!p.isr().contains(&3), "{:?}", p.isr());
    }
}

/// Runs a future to completion on this thread (the admin client's futures need no
/// runtime of their own).
fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park_timeout(Duration::from_millis(50)),
        }
    }
}
