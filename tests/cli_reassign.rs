//! `tidelog reassign`, `leader-election` and `log-dirs describe` against three `tidelog
//! serve --node-id N --quorum ...` child processes: a generated plan is Kafka's JSON, a
//! partition moves to the node that lacked it (`--execute`, then `--verify` until it
//! completed, the removed node's copy gone from `log-dirs describe`; its replicas put in
//! the log directories the plan's `log_dirs` names; under `--throttle`,
//! which `--verify` removes once it completed), a preferred
//! election makes the new first replica lead, and bad plans are refused with the reason.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use cli_support::{
    err, json_after, loopback_quorum, ok, serve_nodes_with, stop_all, tidelog_raw, until,
    write_file,
};
use serde_json::Value;

#[test]
fn a_partition_moves_to_another_node_and_its_first_replica_leads() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    // Each node has a second log directory, `disk2-ID`.
    let disk2 = root.path().join("disk2-{id}").display().to_string();
    let (nodes, bootstrap) = serve_nodes_with(
        root.path(),
        &quorum,
        &["1", "2", "3"],
        &["--log-dirs", &disk2],
    );
    let data_dir = |id: i64| root.path().join(format!("node-{id}"));
    let disk2_dir = |id: i64| root.path().join(format!("disk2-{id}"));
    until(
        &[
            "topics",
            "create",
            "moves",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
        ],
        &bootstrap,
        "the topic created",
        |r| r.code == 0,
    );

    // --generate: the current assignment and a balanced one, in Kafka's JSON.
    let generated = until(
        &[
            "reassign",
            "--generate",
            "--topics",
            "moves",
            "--brokers",
            "1,2,3",
        ],
        &bootstrap,
        "a plan",
        |r| r.code == 0,
    );
    let now = json_after(&generated.stdout, "Current partition replica assignment");
    let proposed = json_after(
        &generated.stdout,
        "Proposed partition reassignment configuration",
    );
    assert_eq!(proposed["version"], 1);
    let p = &proposed["partitions"][0];
    assert_eq!(
        (p["topic"].as_str(), p["partition"].as_i64()),
        (Some("moves"), Some(0))
    );
    assert_eq!(p["replicas"].as_array().unwrap().len(), 2);
    assert_eq!(p["log_dirs"], serde_json::json!(["any", "any"]));
    let current: Vec<i64> = now["partitions"][0]["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_i64().unwrap())
        .collect();
    let (kept, dropped) = (current[0], current[1]);
    let added = (1..=3).find(|b| !current.contains(b)).unwrap();

    // Bad plans are refused before anything is sent.
    let twice = write_file(
        root.path(),
        "twice.json",
        r#"{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[1]},{"topic":"moves","partition":0,"replicas":[2]}]}"#,
    );
    err(
        tidelog_raw(
            &[
                "reassign",
                "--execute",
                "--reassignment-json-file",
                &twice,
                "--bootstrap",
                &bootstrap,
            ],
            "",
        ),
        1,
        "partition moves-0 is listed twice",
    );
    let dirs = write_file(
        root.path(),
        "dirs.json",
        r#"{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[1],"log_dirs":["/data"]}]}"#,
    );
    err(
        tidelog_raw(
            &[
                "reassign",
                "--execute",
                "--reassignment-json-file",
                &dirs,
                "--bootstrap",
                &bootstrap,
            ],
            "",
        ),
        1,
        "LOG_DIR_NOT_FOUND: /data is not a log directory of broker 1",
    );
    err(
        tidelog_raw(
            &[
                "leader-election",
                "--election-type",
                "unclean",
                "--all-topic-partitions",
                "--bootstrap",
                &bootstrap,
            ],
            "",
        ),
        1,
        "name its partitions",
    );

    // Move: the dropped replica is replaced by the node that had none, first, in its
    // data directory; the kept replica moves into its other log directory.
    let (kept_from, kept_to) = match data_dir(kept).join("moves-0").is_dir() {
        true => (data_dir(kept), disk2_dir(kept)),
        false => (disk2_dir(kept), data_dir(kept)),
    };
    let added_to = data_dir(added);
    let (added_to, kept_to) = (added_to.display(), kept_to.display());
    let plan = write_file(
        root.path(),
        "plan.json",
        &format!(
            r#"{{"version":1,"partitions":[{{"topic":"moves","partition":0,"replicas":[{added},{kept}],"log_dirs":["{added_to}","{kept_to}"]}}]}}"#
        ),
    );
    let file = ["--reassignment-json-file", plan.as_str()];
    let executed = ok(tidelog_raw(
        &[
            &["reassign", "--execute", "--throttle", "10000000"][..],
            &file,
            &["--bootstrap", &bootstrap],
        ]
        .concat(),
        "",
    ));
    assert!(
        executed
            .contains("Save this to use as the --reassignment-json-file option during rollback"),
        "{executed}"
    );
    assert!(
        executed.contains("Successfully started partition reassignments for moves-0"),
        "{executed}"
    );
    assert!(
        executed.contains("The inter-broker throttle limit was set to 10000000 B/s"),
        "{executed}"
    );
    assert!(
        executed.contains(&format!(
            "Successfully started log directory moves for: moves-0 on broker {added}, moves-0 on broker {kept}"
        )),
        "{executed}"
    );
    // The first --verify that finds the move completed removes the throttle (the
    // rates of the three brokers, the topic's throttled replicas); the next finds none.
    let verified = until(
        &[&["reassign", "--verify"][..], &file].concat(),
        &bootstrap,
        "the move to complete",
        |r| {
            r.code == 0
                && r.stdout
                    .contains("Reassignment of partition moves-0 is completed.")
                && [added, kept].iter().all(|b| {
                    r.stdout.contains(&format!(
                        "Reassignment of replica moves-0 on broker {b} completed successfully."
                    ))
                })
        },
    );
    assert!(!kept_from.join("moves-0").exists(), "{verified:?}");
    assert!(data_dir(added).join("moves-0").is_dir(), "{verified:?}");
    assert!(
        verified
            .stdout
            .contains("Clearing broker-level throttles on brokers 1,2,3")
            && verified
                .stdout
                .contains("Clearing topic-level throttles on topics moves"),
        "{verified:?}"
    );
    let again = ok(tidelog_raw(
        &[
            &["reassign", "--verify"][..],
            &file,
            &["--bootstrap", &bootstrap],
        ]
        .concat(),
        "",
    ));
    assert!(!again.contains("Clearing"), "{again}");
    let listed = ok(tidelog_raw(
        &["reassign", "--list", "--bootstrap", &bootstrap],
        "",
    ));
    assert!(
        listed.contains("No partition reassignments found."),
        "{listed}"
    );
    // The removed node's copy is deleted; the new one is there.
    let described = until(
        &["log-dirs", "describe", "--topic-list", "moves"],
        &bootstrap,
        "the old copy deleted",
        |r| {
            let Ok(v) = r
                .stdout
                .lines()
                .last()
                .map(serde_json::from_str::<Value>)
                .transpose()
            else {
                return false;
            };
            let holds = |b: i64| {
                v.as_ref().is_some_and(|v| {
                    v["brokers"].as_array().unwrap().iter().any(|x| {
                        x["broker"] == b
                            && x["logDirs"].as_array().unwrap().iter().any(|d| {
                                d["partitions"]
                                    .as_array()
                                    .unwrap()
                                    .iter()
                                    .any(|p| p["partition"] == "moves-0")
                            })
                    })
                })
            };
            r.code == 0 && holds(added) && holds(kept) && !holds(dropped)
        },
    );
    assert!(
        described
            .stdout
            .contains("Received log directory information from brokers 1,2,3"),
        "{described:?}"
    );

    // A preferred election leads the partition from its new first replica.
    let elected = until(
        &[
            "leader-election",
            "--election-type",
            "PREFERRED",
            "--topic",
            "moves",
            "--partition",
            "0",
        ],
        &bootstrap,
        "the election",
        |r| r.code == 0,
    );
    assert!(
        elected
            .stdout
            .contains("Successfully completed leader election (PREFERRED) for partitions moves-0")
            || elected
                .stdout
                .contains("Valid replica already elected for partitions moves-0"),
        "{elected:?}"
    );
    until(
        &["topics", "describe", "moves"],
        &bootstrap,
        "the new leader",
        |r| {
            r.stdout
                .contains(&format!("Leader: {added}\tReplicas: {added},{kept}"))
        },
    );
    stop_all(nodes);
}
