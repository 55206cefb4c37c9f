//! `tidelog format`, as kafka-storage format (KIP-853): each mode writes
//! `meta.properties`, bad input and a formatted directory are refused with one `error:`
//! line (`--ignore-formatted` leaves it as it is), and formatted nodes serve: a
//! standalone node with the cluster id it was given, a node formatted to join as an
//! observer until `tidelog quorum add-voter` makes it a voter by the directory id it was
//! formatted with, and three initial controllers under the directory ids they were
//! given.
#![cfg(all(feature = "cli", feature = "server"))]

mod cli_support;

use std::path::Path;

use cli_support::{
    Run, err, loopback_quorum, ok, run_until, serve, serve_nodes, stop_all, tidelog, tidelog_raw,
};

const CLUSTER: &str = "MkU3OEVBNTcwNTJENDM2Qg";
const DIR_1: &str = "JEXY6aqzQY-32P5TStzaFg";
const DIR_2: &str = "b5rPmJ4LR0CGX3ULwdIPAQ";

/// `tidelog --data DIR format ARGS...`.
fn format(dir: &Path, args: &[&str]) -> Run {
    let mut all = vec!["format"];
    all.extend_from_slice(args);
    tidelog(dir, &all, "")
}

/// The `directory.id` of `dir`'s meta.properties.
fn directory_id(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("meta.properties")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("directory.id="))
        .unwrap_or_else(|| panic!("no directory.id: {text}"))
        .to_string()
}

#[test]
fn each_mode_writes_meta_properties_and_bad_input_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let d = |name: &str| root.path().join(name);
    let controllers = format!("1@127.0.0.1:9093:{DIR_1},2@127.0.0.1:9193:{DIR_2}");

    let out = ok(format(
        &d("standalone"),
        &["--cluster-id", CLUSTER, "--node-id", "1", "--standalone"],
    ));
    assert!(
        out.contains(&format!("as node 1 of cluster {CLUSTER}")) && out.contains("voters [1]"),
        "{out}"
    );
    let text = std::fs::read_to_string(d("standalone").join("meta.properties")).unwrap();
    assert!(
        text.contains(&format!(
            "version=1\nnode.id=1\ncluster.id={CLUSTER}\ndirectory.id="
        )),
        "{text}"
    );
    assert!(out.contains(&directory_id(&d("standalone"))), "{out}");

    let out = ok(format(
        &d("initial"),
        &[
            "--cluster-id",
            CLUSTER,
            "--node-id",
            "2",
            "--initial-controllers",
            &controllers,
        ],
    ));
    assert!(out.contains("voters [1, 2]"), "{out}");
    assert_eq!(
        directory_id(&d("initial")),
        DIR_2,
        "its entry's directory id"
    );

    let out = ok(format(
        &d("joiner"),
        &[
            "--cluster-id",
            CLUSTER,
            "--node-id",
            "3",
            "--no-initial-controllers",
        ],
    ));
    assert!(out.contains("add-voter --node-id 3"), "{out}");

    // A formatted directory is formatted once.
    err(
        format(
            &d("standalone"),
            &["--cluster-id", CLUSTER, "--node-id", "1", "--standalone"],
        ),
        1,
        "formatted already, as node 1",
    );
    let out = ok(format(
        &d("standalone"),
        &[
            "--cluster-id",
            CLUSTER,
            "--node-id",
            "1",
            "--standalone",
            "--ignore-formatted",
        ],
    ));
    assert!(out.contains("left as it is"), "{out}");

    // Bad input: one `error:` line, nothing written.
    for (cluster, node, mode, value, needle) in [
        (
            "nope",
            "1",
            "--standalone",
            None,
            "\"nope\" is not a cluster id",
        ),
        (
            CLUSTER,
            "3",
            "--initial-controllers",
            Some(controllers.as_str()),
            "node 3 is not among the initial controllers",
        ),
        (
            CLUSTER,
            "1",
            "--initial-controllers",
            Some("1@h:9093"),
            "is not a directory id",
        ),
    ] {
        let mut args = vec!["--cluster-id", cluster, "--node-id", node, mode];
        args.extend(value);
        err(format(&d("bad"), &args), 1, needle);
    }
    assert!(!d("bad").exists());
    // Exactly one mode (clap's usage errors).
    let run = format(&d("bad"), &["--cluster-id", CLUSTER, "--node-id", "1"]);
    assert_eq!(run.code, 2, "{run:?}");
    let run = format(
        &d("bad"),
        &[
            "--cluster-id",
            CLUSTER,
            "--node-id",
            "1",
            "--standalone",
            "--no-initial-controllers",
        ],
    );
    assert_eq!(run.code, 2, "{run:?}");
    // A single node's data directory is no cluster node's to format.
    ok(tidelog(&d("single"), &["topics", "create", "orders"], ""));
    err(
        format(
            &d("single"),
            &["--cluster-id", CLUSTER, "--node-id", "1", "--standalone"],
        ),
        1,
        "is not empty",
    );
}

#[test]
fn a_standalone_node_serves_and_a_node_formatted_to_join_is_added_as_a_voter() {
    let root = tempfile::tempdir().unwrap();
    let (one, two) = (root.path().join("node-1"), root.path().join("node-2"));
    ok(format(
        &one,
        &["--cluster-id", CLUSTER, "--node-id", "1", "--standalone"],
    ));
    ok(format(
        &two,
        &[
            "--cluster-id",
            CLUSTER,
            "--node-id",
            "2",
            "--no-initial-controllers",
        ],
    ));
    let joiner_dir = directory_id(&two);
    let quorum = loopback_quorum(1);
    let nodes = vec![
        serve(&one, &["--node-id", "1", "--quorum", &quorum]),
        serve(&two, &["--node-id", "2", "--quorum", &quorum]),
    ];
    let bootstrap = format!("{},{}", nodes[0].addr, nodes[1].addr);
    let until = |args: &[&str], needle: &str| {
        run_until(args, |r: &Run| r.code == 0 && r.stdout.contains(needle)).stdout
    };
    let out = until(
        &["cluster", "describe", "--bootstrap", &bootstrap],
        "ClusterId: ",
    );
    assert!(out.contains(&format!("ClusterId: {CLUSTER}")), "{out}");
    let describe = ["quorum", "describe", "--bootstrap", &bootstrap];
    let out = until(&describe, "CurrentObservers:  [2]");
    assert!(out.contains("CurrentVoters:     [1]"), "{out}");
    // Added by the directory id it was formatted with.
    until(&describe, &joiner_dir);
    let out = ok(tidelog_raw(
        &[
            "quorum",
            "add-voter",
            "--node-id",
            "2",
            "--directory-id",
            &joiner_dir,
            "--bootstrap",
            &bootstrap,
        ],
        "",
    ));
    assert!(out.contains("node 2 is a voter"), "{out}");
    until(&describe, "CurrentVoters:     [1,2]");
    // The cluster serves: a topic on both nodes.
    until(
        &[
            "topics",
            "create",
            "formatted",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
            "--bootstrap",
            &bootstrap,
        ],
        "",
    );
    until(
        &["cluster", "describe", "--bootstrap", &bootstrap],
        "formatted-0",
    );
    assert!(
        !two.join("__cluster_metadata-0").join("joining").exists(),
        "the joiner's directory id is recorded"
    );
    stop_all(nodes);
}

#[test]
fn nodes_formatted_with_the_initial_controllers_elect_a_controller_of_the_given_cluster() {
    let root = tempfile::tempdir().unwrap();
    let quorum = loopback_quorum(3);
    let dirs = [DIR_1, DIR_2, "OEj3iGqXSdCCbdwWhU7lfQ"];
    let controllers: Vec<String> = quorum
        .split(',')
        .zip(dirs)
        .map(|(voter, dir)| format!("{voter}:{dir}"))
        .collect();
    let controllers = controllers.join(",");
    for (id, dir) in ["1", "2", "3"].iter().zip(dirs) {
        let data = root.path().join(format!("node-{id}"));
        ok(format(
            &data,
            &["--cluster-id", CLUSTER, "--node-id", id, "-I", &controllers],
        ));
        assert_eq!(directory_id(&data), dir);
    }
    let (served, bootstrap) = serve_nodes(root.path(), &quorum, &["1", "2", "3"]);
    let describe = ["quorum", "describe", "--bootstrap", &bootstrap];
    let out = run_until(&describe, |r: &Run| {
        r.code == 0 && dirs.iter().all(|d| r.stdout.contains(d))
    })
    .stdout;
    assert!(out.contains("CurrentVoters:     [1,2,3]"), "{out}");
    let out = run_until(
        &["cluster", "describe", "--bootstrap", &bootstrap],
        |r: &Run| r.code == 0 && r.stdout.contains("ClusterId: "),
    )
    .stdout;
    assert!(out.contains(&format!("ClusterId: {CLUSTER}")), "{out}");
    stop_all(served);
}
