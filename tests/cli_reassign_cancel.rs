//! `tidelog reassign --cancel` against three `tidelog serve --node-id N --quorum ...`
//! child processes: a move held back by a throttle of 1 KB/s is listed in progress
//! (`--list`), cancelled from the plan file, which removes the throttle (as Kafka's
//! `--cancel`), and then the original replicas stay, the added node's copy is deleted,
//! `--list` finds nothing, `--verify` of the plan says the replica set is not the
//! target, `--verify` of the rollback plan (what `--execute` printed) finds it
//! completed, a second cancellation is refused (NO_REASSIGNMENT_IN_PROGRESS), a move
//! cancelled with `--preserve-throttles` keeps its throttle until `--verify`, and every
//! record is still there.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::time::{Duration, Instant};

use cli_support::{
    json_after, loopback_quorum, ok, serve_nodes, stop_all, tidelog_raw, until, with_bootstrap,
    write_file,
};
use tidelog::admin::{AdminClient, ConfigSource};
use tidelog::producer::Acks;
use tidelog::{ClientConfig, Cluster, Producer, ProducerRecord};

const WAIT: Duration = Duration::from_secs(60);
/// Records of about 1 KiB each in the partition: 1 MiB, a thousand seconds at 1 KB/s.
const RECORDS: usize = 1024;

/// The replication throttles set: the topic's throttled replicas and the brokers'
/// throttled rates, by name.
fn throttles(admin: &AdminClient) -> Vec<String> {
    let mut set = Vec::new();
    for (_, entries) in admin.describe_configs(&["stay"]).unwrap() {
        set.extend(
            entries
                .unwrap()
                .into_iter()
                .filter(|e| {
                    e.name.contains("throttled.replicas") && e.source == ConfigSource::Topic
                })
                .map(|e| format!("stay {}={:?}", e.name, e.value)),
        );
    }
    for id in 1..=3 {
        set.extend(
            admin
                .describe_broker_configs(id)
                .unwrap()
                .into_iter()
                .filter(|e| {
                    e.name.contains("throttled.rate") && e.source == ConfigSource::DynamicBroker
                })
                .map(|e| format!("broker {id} {}={:?}", e.name, e.value)),
        );
    }
    set
}

#[test]
fn a_throttled_move_is_cancelled_from_the_cli_and_the_original_replicas_stay() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    let (nodes, bootstrap) = serve_nodes(root.path(), &quorum, &["1", "2", "3"]);
    let b = bootstrap.as_str();
    let data_dir = |id: i64| root.path().join(format!("node-{id}"));
    until(
        &[
            "topics",
            "create",
            "stay",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
        ],
        b,
        "the topic created",
        |r| r.code == 0,
    );
    // (`tidelog produce` writes to a data directory, not over the network.)
    let remote = Cluster::connect(ClientConfig::new(bootstrap.clone())).unwrap();
    let producer = Producer::builder(&remote).acks(Acks::All).build().unwrap();
    for i in 0..RECORDS {
        let v = format!("{i:06}-{}", "r".repeat(1000));
        producer
            .send_nowait("stay", ProducerRecord::new(v.as_bytes()).partition(0))
            .unwrap();
    }
    producer.flush().unwrap();
    producer.close().unwrap();
    drop(remote);

    // Replace the second replica by the node without one, at 1 KB/s.
    let generated = until(
        &[
            "reassign",
            "--generate",
            "--topics",
            "stay",
            "--brokers",
            "1,2,3",
        ],
        b,
        "a plan",
        |r| r.code == 0,
    );
    let now = json_after(&generated.stdout, "Current partition replica assignment");
    let current: Vec<i64> = now["partitions"][0]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_i64().unwrap())
        .collect();
    let (kept, dropped) = (current[0], current[1]);
    let added = (1..=3).find(|b| !current.contains(b)).unwrap();
    let plan = write_file(
        root.path(),
        "plan.json",
        &format!(
            r#"{{"version":1,"partitions":[{{"topic":"stay","partition":0,"replicas":[{kept},{added}]}}]}}"#
        ),
    );
    let file = ["--reassignment-json-file", plan.as_str()];
    let executed = ok(tidelog_raw(
        &with_bootstrap(
            &[&["reassign", "--execute", "--throttle", "1000"][..], &file].concat(),
            b,
        ),
        "",
    ));
    assert!(
        executed.contains("Successfully started partition reassignments for stay-0"),
        "{executed}"
    );
    let rollback = json_after(&executed, "Current partition replica assignment");
    let rollback = write_file(root.path(), "rollback.json", &rollback.to_string());
    let admin = AdminClient::connect(b).unwrap();
    assert!(!throttles(&admin).is_empty(), "--throttle set nothing");

    // In progress: the added node has started a copy it cannot finish.
    let listed = ok(tidelog_raw(&with_bootstrap(&["reassign", "--list"], b), ""));
    assert!(
        listed.contains(&format!(
            "stay-0: replicas: {kept},{added},{dropped}. adding: {added}. removing: {dropped}."
        )),
        "{listed}"
    );
    let deadline = Instant::now() + WAIT;
    while !data_dir(added).join("stay-0").is_dir() {
        assert!(Instant::now() < deadline, "node {added} never made stay-0");
        std::thread::sleep(Duration::from_millis(100));
    }
    let verified = ok(tidelog_raw(
        &with_bootstrap(&[&["reassign", "--verify"][..], &file].concat(), b),
        "",
    ));
    assert!(
        verified.contains("Reassignment of partition stay-0 is still in progress."),
        "the throttle lets the move finish at once: {verified}"
    );

    // Cancelled from the plan file.
    let cancelled = ok(tidelog_raw(
        &with_bootstrap(&[&["reassign", "--cancel"][..], &file].concat(), b),
        "",
    ));
    assert!(
        cancelled.contains("Successfully cancelled partition reassignments for stay-0"),
        "{cancelled}"
    );
    // As Kafka's --cancel: the throttle goes with the moves.
    assert!(cancelled.contains("Clearing"), "{cancelled}");
    assert_eq!(throttles(&admin), Vec::<String>::new());
    until(&["reassign", "--list"], b, "nothing in progress", |r| {
        r.code == 0 && r.stdout.contains("No partition reassignments found.")
    });
    let deadline = Instant::now() + WAIT;
    while data_dir(added).join("stay-0").exists() {
        assert!(
            Instant::now() < deadline,
            "node {added}'s copy of stay-0 never deleted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for id in [kept, dropped] {
        assert!(
            data_dir(id).join("stay-0").is_dir(),
            "node {id} kept stay-0"
        );
    }
    let verified = ok(tidelog_raw(
        &with_bootstrap(&[&["reassign", "--verify"][..], &file].concat(), b),
        "",
    ));
    assert!(
        verified.contains(&format!(
            "There is no active reassignment of partition stay-0, but replica set is [{kept}, {dropped}] rather than [{kept}, {added}]."
        )),
        "{verified}"
    );
    assert!(!verified.contains("Clearing"), "{verified}");
    // The rollback plan is what the partition has: complete.
    let back = ok(tidelog_raw(
        &with_bootstrap(
            &[
                "reassign",
                "--verify",
                "--reassignment-json-file",
                &rollback,
            ],
            b,
        ),
        "",
    ));
    assert!(
        back.contains("Reassignment of partition stay-0 is completed."),
        "{back}"
    );
    let described = ok(tidelog_raw(
        &with_bootstrap(&["topics", "describe", "stay"], b),
        "",
    ));
    assert!(
        described.contains(&format!("Replicas: {kept},{dropped}\t")),
        "{described}"
    );

    // Nothing left to cancel.
    let again = tidelog_raw(
        &with_bootstrap(&[&["reassign", "--cancel"][..], &file].concat(), b),
        "",
    );
    assert_eq!(again.code, 1, "{again:?}");
    assert!(
        again
            .stderr
            .contains("Error in the cancellation of partition stay-0")
            && again.stderr.contains("1 partition cancellation(s) failed"),
        "{again:?}"
    );
    eprintln!("second cancellation: {}", again.stderr.trim_end());

    // Cancelled again with --preserve-throttles: the throttle stays until --verify.
    let executed = ok(tidelog_raw(
        &with_bootstrap(
            &[&["reassign", "--execute", "--throttle", "1000"][..], &file].concat(),
            b,
        ),
        "",
    ));
    assert!(
        executed.contains("Successfully started partition reassignments for stay-0"),
        "{executed}"
    );
    let preserved = ok(tidelog_raw(
        &with_bootstrap(
            &[&["reassign", "--cancel", "--preserve-throttles"][..], &file].concat(),
            b,
        ),
        "",
    ));
    assert!(
        preserved.contains("Successfully cancelled partition reassignments for stay-0")
            && !preserved.contains("Clearing"),
        "{preserved}"
    );
    assert!(
        !throttles(&admin).is_empty(),
        "--preserve-throttles kept nothing"
    );
    until(&["reassign", "--list"], b, "nothing in progress", |r| {
        r.code == 0 && r.stdout.contains("No partition reassignments found.")
    });
    let verified = ok(tidelog_raw(
        &with_bootstrap(&[&["reassign", "--verify"][..], &file].concat(), b),
        "",
    ));
    assert!(verified.contains("Clearing"), "{verified}");
    assert_eq!(throttles(&admin), Vec::<String>::new());

    // Every record is still there.
    let consumed = ok(tidelog_raw(
        &with_bootstrap(&["consume", "stay", "--from-beginning", "-e"], b),
        "",
    ));
    assert_eq!(consumed.lines().count(), RECORDS);
    assert!(consumed.starts_with("000000-"), "{}", &consumed[..20]);
    drop(admin);
    stop_all(nodes);
}
