//! Issue 15: two `tidelog consume --group G --bootstrap ADDR` processes against one
//! running server are members of one group, as two Kafka console consumers are: the
//! coordinator gives them disjoint partitions that together cover the topic, each
//! prints the records of its own partitions, every record is printed exactly once, and
//! on SIGTERM each commits the position of every partition it owns and leaves. A third
//! process joining rebalances them: the group settles on three disjoint pairs of
//! partitions, a partition that moves continues where its previous owner stopped (it
//! commits before it gives the partition up), and still no record is printed twice.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tidelog::admin::AdminClient;
use tidelog::{Broker, Producer, ProducerRecord};
use tidelog_interop::cluster::eventually;
use tidelog_interop::groups::{assert_disjoint, serve_topic, stable_assignment};

const TOPIC: &str = "events";
const GROUP: &str = "printers";
const PARTITIONS: i32 = 6;
const PER_PARTITION: i64 = 100;
const WAIT: Duration = Duration::from_secs(30);

/// `tidelog consume --group GROUP --bootstrap ADDR --from-beginning`, printing
/// "partition offset value" lines into `out`.
fn consumer(bootstrap: &str, out: &Path, err: &Path) -> Child {
    Command::new(tidelog_interop::tidelog_bin())
        .args([
            "consume",
            TOPIC,
            "--group",
            GROUP,
            "--bootstrap-server",
            bootstrap,
        ])
        .args(["--from-beginning", "-f", "%p %o %s\\n"])
        .stdout(Stdio::from(File::create(out).unwrap()))
        .stderr(Stdio::from(File::create(err).unwrap()))
        .spawn()
        .expect("run tidelog consume")
}

/// (partition, offset, value) of each line printed so far.
fn printed(out: &Path) -> Vec<(i32, i64, String)> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, ' ');
            let p = f.next().unwrap().parse().unwrap();
            let o = f.next().unwrap().parse().unwrap();
            (p, o, f.next().unwrap_or_default().to_string())
        })
        .collect()
}

/// Sends SIGTERM and waits (bounded) for a clean exit.
fn stop(mut child: Child, err: &Path) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let stderr = std::fs::read_to_string(err).unwrap_or_default();
            assert!(status.success(), "consume exited with {status}: {stderr}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("consume did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Appends `PER_PARTITION` records to each partition, valued `v<partition>-<offset>`
/// (the partitions hold `first` records each before).
fn produce(broker: &Broker, first: i64) {
    let producer = Producer::new(broker).unwrap();
    for i in first..first + PER_PARTITION {
        for p in 0..PARTITIONS {
            let value = format!("v{p}-{i}");
            producer
                .send(TOPIC, ProducerRecord::new(value.as_bytes()).partition(p))
                .unwrap();
        }
    }
    producer.flush().unwrap();
}

/// The partition sets of the members of one generation.
fn assignments(members: &BTreeMap<String, Vec<i32>>) -> BTreeSet<BTreeSet<i32>> {
    members
        .values()
        .map(|ps| ps.iter().copied().collect())
        .collect()
}

#[test]
fn console_consumers_split_the_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, server) = serve_topic(&dir.path().join("data"), TOPIC, PARTITIONS);
    let bootstrap = server.local_addr().to_string();

    let outs = ["a", "b", "c"].map(|n| dir.path().join(format!("{n}.out")));
    let errs = ["a", "b", "c"].map(|n| dir.path().join(format!("{n}.err")));
    let a = consumer(&bootstrap, &outs[0], &errs[0]);
    let b = consumer(&bootstrap, &outs[1], &errs[1]);

    // Both join; the group settles on two members with three partitions each.
    let (generation, members) = eventually("two members with partitions", WAIT, || {
        stable_assignment(&broker, GROUP)
            .filter(|(_, m)| m.len() == 2 && m.values().all(|ps| !ps.is_empty()))
    });
    assert_disjoint(generation, &members);
    let all: BTreeSet<i32> = members.values().flatten().copied().collect();
    assert_eq!(all, (0..PARTITIONS).collect(), "{members:?}");

    produce(&broker, 0);
    let total = (PER_PARTITION * PARTITIONS as i64) as usize;
    eventually("every record printed", WAIT, || {
        (printed(&outs[0]).len() + printed(&outs[1]).len() >= total).then_some(())
    });
    let (a1, b1) = (printed(&outs[0]), printed(&outs[1]));
    let parts = |lines: &[(i32, i64, String)]| -> BTreeSet<i32> {
        lines.iter().map(|(p, _, _)| *p).collect()
    };
    let (pa, pb) = (parts(&a1), parts(&b1));
    assert!(!pa.is_empty() && !pb.is_empty(), "{pa:?} {pb:?}");
    assert!(
        pa.is_disjoint(&pb),
        "both printed a partition: {pa:?} {pb:?}"
    );
    assert_eq!(
        assignments(&members),
        BTreeSet::from([pa, pb]),
        "each printed its own"
    );

    // A third member: two partitions each.
    let c = consumer(&bootstrap, &outs[2], &errs[2]);
    let (generation, members) = eventually("three members with two partitions", WAIT, || {
        stable_assignment(&broker, GROUP)
            .filter(|(_, m)| m.len() == 3 && m.values().all(|ps| ps.len() == 2))
    });
    assert_disjoint(generation, &members);
    produce(&broker, PER_PARTITION);
    eventually("the new records printed", WAIT, || {
        let n: usize = outs.iter().map(|o| printed(o).len()).sum();
        (n >= 2 * total).then_some(())
    });
    let round2: Vec<BTreeSet<i32>> = [a1.len(), b1.len(), 0]
        .iter()
        .zip(&outs)
        .map(|(&from, o)| parts(&printed(o)[from..]))
        .collect();
    assert_eq!(
        assignments(&members),
        round2.iter().cloned().collect(),
        "after the rebalance each printed its new partitions"
    );
    for (child, err) in [a, b, c].into_iter().zip(&errs) {
        stop(child, err);
    }

    let mut seen = BTreeMap::new();
    for (p, o, v) in outs.iter().flat_map(|o| printed(o)) {
        assert_eq!(v, format!("v{p}-{o}"), "record {p}@{o}");
        assert!(seen.insert((p, o), ()).is_none(), "{p}@{o} printed twice");
    }
    assert_eq!(seen.len(), 2 * total, "every record exactly once");

    // On exit each committed the end of its partitions.
    let admin = AdminClient::connect(&bootstrap).unwrap();
    let committed: BTreeMap<i32, i64> = admin
        .list_consumer_group_offsets(GROUP)
        .unwrap()
        .into_iter()
        .map(|c| (c.partition.partition, c.offset))
        .collect();
    let expected: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 2 * PER_PARTITION)).collect();
    assert_eq!(committed, expected);
    let group = broker.group_coordinator().describe_group(GROUP).unwrap();
    assert!(group.members.is_empty(), "all left: {:?}", group.members);
    server.shutdown().unwrap();
}
