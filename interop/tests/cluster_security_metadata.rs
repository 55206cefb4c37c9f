//! Users and ACLs are cluster metadata: on three `tidelog serve` child processes with
//! `--authorizer`, each with a PLAINTEXT listener (whose `User:ANONYMOUS` is the super
//! user the nodes replicate and administer as) and a SASL_PLAINTEXT listener, a user and
//! an ACL created through node 1 with `tidelog users|acls add --bootstrap` authenticate
//! and authorize on node 2's SASL listener: the right password passes and the wrong one
//! gets SASL_AUTHENTICATION_FAILED; Metadata shows the topic the ACL lets the user read
//! and refuses another with TOPIC_AUTHORIZATION_FAILED; CreateTopics is refused. A
//! user added while node 3 is down authenticates on node 3 once it is back, node 2
//! still knows everything after a restart, and an ACL removed through node 3 stops
//! authorizing on node 1. `users list` and `acls list` agree on every node; offline,
//! `tidelog users` refuses a cluster node's data directory.

use std::process::Command;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tidelog_interop::cluster::{KafkaConn, Processes, cli_ok, eventually, free_ports};

const WAIT: Duration = Duration::from_secs(45);
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Authenticates with SASL PLAIN on `addr`: the SaslAuthenticate error code and, on
/// success, the connection to go on with. None if the node does not answer.
fn login(addr: &str, user: &str, password: &str) -> Option<(i16, KafkaConn)> {
    let mut conn = KafkaConn::connect(addr, Duration::from_secs(5))?;
    let hs = conn.call(
        &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
        1,
    )?;
    assert_eq!(hs.error_code, 0, "PLAIN is enabled");
    let token = format!("\0{user}\0{password}");
    let auth = conn.call(
        &SaslAuthenticateRequest::default().with_auth_bytes(token.into_bytes().into()),
        1,
    )?;
    Some((auth.error_code, conn))
}

/// The error code Metadata answers for `topic` to an authenticated connection.
fn topic_error(conn: &mut KafkaConn, topic: &str) -> Option<i16> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(s(topic)))),
        ]))
        .with_allow_auto_topic_creation(false);
    let response = conn.call(&request, 8)?;
    Some(response.topics.first()?.error_code)
}

/// Waits until `user` authenticates on `addr` with `password`; the connection.
fn logged_in(addr: &str, user: &str, password: &str) -> KafkaConn {
    eventually(&format!("{user} authenticates on {addr}"), WAIT, || {
        login(addr, user, password).and_then(|(code, conn)| (code == 0).then_some(conn))
    })
}

#[test]
fn users_and_acls_are_replicated_metadata() {
    let root = tempfile::tempdir().unwrap();
    let sasl = free_ports(3);
    let sasl_addr = |i: usize| format!("127.0.0.1:{}", sasl[i]);
    let mut nodes = Processes::start_each(
        tidelog_interop::tidelog_bin(),
        root.path(),
        3,
        &[
            "--authorizer",
            "--super-users",
            "User:ANONYMOUS",
            "--broker-session-timeout-ms",
            "2000",
        ],
        "info",
        |i| {
            vec![
                "--listen".into(),
                format!("SASL_PLAINTEXT://{}", sasl_addr(i)),
            ]
        },
    );
    let plain = |i: usize| nodes.layout.addr(i);
    let (n1, n2, n3) = (plain(0), plain(1), plain(2));
    eventually("the cluster creates topics", WAIT, || {
        cli_ok(
            &n1,
            &["topics", "create", "events", "--replication-factor", "3"],
        )
    });
    eventually("the second topic", WAIT, || {
        cli_ok(&n1, &["topics", "create", "secret", "--if-not-exists"])
    });

    // A user and an ACL, through node 1.
    let out = cli_ok(
        &n1,
        &["users", "add", "alice", "--password", "alice-secret"],
    )
    .unwrap_or_else(|| panic!("users add\n{}", nodes.logs()));
    assert!(out.contains("user alice"), "{out}");
    let out = cli_ok(
        &n1,
        &[
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "events",
        ],
    )
    .unwrap_or_else(|| panic!("acls add\n{}", nodes.logs()));
    assert!(out.contains("added 1 ACL"), "{out}");

    // Authenticated and authorized on node 2.
    let mut conn = logged_in(&sasl_addr(1), "alice", "alice-secret");
    eventually("the ACL reaches node 2", WAIT, || {
        (topic_error(&mut conn, "events")? == 0).then_some(())
    });
    assert_eq!(
        topic_error(&mut conn, "secret"),
        Some(TOPIC_AUTHORIZATION_FAILED)
    );
    let create = CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(TopicName(s("alice-topic")))
                .with_num_partitions(1)
                .with_replication_factor(-1),
        ])
        .with_timeout_ms(10_000);
    let created = conn.call(&create, 4).expect("a CreateTopics answer");
    assert_eq!(created.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    let (code, _) = login(&sasl_addr(1), "alice", "wrong").expect("an answer");
    assert_eq!(code, SASL_AUTHENTICATION_FAILED);

    // Node 3 is down while bob is added and alice's password changes; it catches up.
    nodes.kill(2);
    eventually("bob is added without node 3", WAIT, || {
        cli_ok(&n1, &["users", "add", "bob", "--password", "bob-secret"])
    });
    cli_ok(&n2, &["users", "add", "alice", "--password", "alice-new"])
        .expect("alice's new password");
    nodes.restart(2);
    logged_in(&sasl_addr(2), "bob", "bob-secret");
    let (code, _) = login(&sasl_addr(2), "alice", "alice-secret").expect("an answer");
    assert_eq!(code, SASL_AUTHENTICATION_FAILED, "the old password");
    let mut conn3 = logged_in(&sasl_addr(2), "alice", "alice-new");
    eventually("node 3 authorizes alice", WAIT, || {
        (topic_error(&mut conn3, "events")? == 0).then_some(())
    });

    // Node 2 restarts and still knows both users and the ACL.
    assert!(nodes.terminate(1), "node 2 shuts down cleanly");
    nodes.restart(1);
    let mut conn2 = logged_in(&sasl_addr(1), "bob", "bob-secret");
    assert_eq!(
        topic_error(&mut conn2, "events"),
        Some(TOPIC_AUTHORIZATION_FAILED),
        "bob has no ACL"
    );
    let mut conn2 = logged_in(&sasl_addr(1), "alice", "alice-new");
    eventually("node 2 authorizes alice after its restart", WAIT, || {
        (topic_error(&mut conn2, "events")? == 0).then_some(())
    });

    // Every node lists the same users and ACLs.
    for addr in [&n1, &n2, &n3] {
        let users = eventually("users list", WAIT, || cli_ok(addr, &["users", "list"]));
        let names: Vec<&str> = users
            .lines()
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(names, ["alice", "bob"], "{users}");
        let acls = eventually("acls list", WAIT, || cli_ok(addr, &["acls", "list"]));
        assert!(
            acls.contains("principal=User:alice, host=*, operation=READ, permissionType=ALLOW"),
            "{acls}"
        );
    }

    // A cluster node's data directory is not where its users are.
    let offline = Command::new(tidelog_interop::tidelog_bin())
        .args(["users", "list", "--data"])
        .arg(nodes.dir(0))
        .output()
        .expect("run tidelog");
    let stderr = String::from_utf8_lossy(&offline.stderr);
    assert!(!offline.status.success());
    assert!(
        stderr.contains("cluster node's data directory") && stderr.contains("--bootstrap"),
        "{stderr}"
    );

    // An ACL removed through node 3 stops authorizing on node 1.
    let out = cli_ok(
        &n3,
        &[
            "acls",
            "remove",
            "--allow-principal",
            "User:alice",
            "--topic",
            "events",
        ],
    )
    .expect("acls remove");
    assert!(out.contains("removed 1 ACL"), "{out}");
    let mut conn1 = logged_in(&sasl_addr(0), "alice", "alice-new");
    eventually("node 1 no longer authorizes alice", WAIT, || {
        (topic_error(&mut conn1, "events")? == TOPIC_AUTHORIZATION_FAILED).then_some(())
    });
    let out = cli_ok(&n1, &["users", "delete", "bob"]).expect("users delete");
    assert!(out.contains("deleted"), "{out}");
    let (code, _) = login(&sasl_addr(0), "bob", "bob-secret").expect("an answer");
    assert_eq!(code, SASL_AUTHENTICATION_FAILED, "a deleted user");
}
