//! What `tidelog serve` logs from the layers below the server, through `tracing` (the
//! subscriber `serve` sets up): segments deleted by retention, group rebalances and a
//! static member back under a new member id at info level, a client connection with its
//! client id and address at debug level, a connection closed for being idle with
//! `connections.max.idle.ms`.
#![cfg(all(feature = "server", feature = "cli", feature = "testing"))]

use std::io::{Read, Write};

use std::net::{SocketAddr, TcpStream};

use std::time::Duration;
use tidelog::testing::CapturedLogs;

use tidelog::{BatchBuilder, Broker, GroupConfig, GroupConsumer, OffsetReset, Server, TopicConfig};

fn batch(value: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new();
    b.push(1_000, None, Some(value), &[]);
    b.finish()
}

#[test]
fn retention_rebalances_and_connections_are_logged() {
    let logs = CapturedLogs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .init();

    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::builder(dir.path())
        .retention_check_interval(Duration::from_millis(50))
        .group_min_session_timeout(Duration::from_millis(100))
        .open()
        .unwrap();
    // Three segments of one record each, then a retention of 1 ms: the next pass
    // deletes sealed segments (each took one offset with it).
    let p = broker
        .create_topic("aged", 1, TopicConfig::new())
        .and_then(|()| broker.topic("aged"))
        .unwrap()
        .partition(0)
        .unwrap();
    for v in [b"a", b"b", b"c"] {
        p.append_batch(&batch(v)).unwrap();
        p.log().roll().unwrap();
    }
    broker
        .alter_topic_config("aged", TopicConfig::new().set("retention.ms", "1"))
        .unwrap();
    let deleted = logs
        .wait_for_line(
            &[
                "INFO",
                "segments deleted by retention",
                "partition=\"aged-0\"",
            ],
            Duration::from_secs(10),
        )
        .unwrap();
    let field = |name: &str| -> u64 {
        deleted
            .split(&format!("{name}="))
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {deleted}"))
    };
    assert!(field("segments") >= 1, "{deleted}");
    assert_eq!(field("segments"), field("log_start_offset"), "{deleted}");

    // A member joins: generation 1 with one member; it leaves: the group is empty.
    let mut member = GroupConsumer::join(
        &broker,
        GroupConfig::new("loggers", &["aged"]).auto_offset_reset(OffsetReset::Earliest),
    )
    .unwrap();
    member.poll(Duration::from_millis(100)).unwrap();
    let rebalanced = logs
        .wait_for_line(
            &["INFO", "consumer group rebalanced", "group=\"loggers\""],
            Duration::from_secs(10),
        )
        .unwrap();
    assert!(
        rebalanced.contains("generation=1") && rebalanced.contains("members=1"),
        "{rebalanced}"
    );
    member.close();
    logs.wait_for_line(
        &["INFO", "consumer group is empty", "group=\"loggers\""],
        Duration::from_secs(10),
    )
    .unwrap();

    // A static member comes back under a new member id: logged as such, not as a
    // rebalance.
    let c = broker.group_coordinator();
    let join = tidelog::coordinator::JoinGroupRequest {
        group_id: "statics".into(),
        group_instance_id: Some("host-1".into()),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Vec::new())],
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(10),
        origin: tidelog::coordinator::MemberOrigin::InProcess,
        ..Default::default()
    };
    let first = c.join_group(join.clone(), Duration::from_secs(10)).unwrap();
    c.sync_group(
        tidelog::coordinator::SyncGroupRequest {
            group_id: "statics".into(),
            generation_id: first.generation_id,
            member_id: first.member_id.clone(),
            group_instance_id: Some("host-1".into()),
            assignments: vec![(first.member_id.clone(), vec![1])],
            ..Default::default()
        },
        Duration::from_secs(10),
    )
    .unwrap();
    let again = c.join_group(join, Duration::from_secs(10)).unwrap();
    let rejoined = logs
        .wait_for_line(
            &["INFO", "static member rejoined", "group=\"statics\""],
            Duration::from_secs(10),
        )
        .unwrap();
    assert!(
        rejoined.contains(&format!("member={:?}", again.member_id))
            && rejoined.contains(&format!("old_member={:?}", first.member_id))
            && rejoined.contains("instance=\"host-1\""),
        "{rejoined}"
    );

    // A client connection, with the client id of its first request, at debug level.
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .start()
        .unwrap();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    let local = s.local_addr().unwrap();
    let mut request = Vec::new();
    request.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    request.extend_from_slice(&0i16.to_be_bytes()); // v0
    request.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    request.extend_from_slice(&10i16.to_be_bytes());
    request.extend_from_slice(b"log-client");
    s.write_all(&(request.len() as i32).to_be_bytes()).unwrap();
    s.write_all(&request).unwrap();
    let mut size = [0u8; 4];
    s.read_exact(&mut size).unwrap();
    let connected = logs
        .wait_for_line(
            &["DEBUG", "client connected", "client_id=log-client"],
            Duration::from_secs(10),
        )
        .unwrap();
    assert!(connected.contains(&format!("peer={local}")), "{connected}");
    drop(s);
    logs.wait_for_line(
        &[
            "DEBUG",
            "client disconnected",
            "client_id=log-client",
            "requests=1",
        ],
        Duration::from_secs(10),
    )
    .unwrap();
    server.shutdown().unwrap();

    // A connection idle past connections.max.idle.ms is closed, and logged as such (it
    // used to be "read failed: Resource temporarily unavailable").
    let server = Server::builder(broker.clone())
        .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
        .idle_timeout(Duration::from_millis(300))
        .start()
        .unwrap();
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    let local = s.local_addr().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "closed by the server");
    let idle = logs
        .wait_for_line(
            &[
                "INFO",
                "connection idle for connections.max.idle.ms = 300 ms: closed",
            ],
            Duration::from_secs(10),
        )
        .unwrap();
    assert!(idle.contains(&format!("peer={local}")), "{idle}");
    assert!(
        logs.lines_with(&["Resource temporarily unavailable"])
            .is_empty(),
        "{idle}"
    );
    server.shutdown().unwrap();
}
