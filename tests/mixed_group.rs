//! An in-process member and a "remote" member speaking the group protocol with the bytes
//! a Kafka client sends (kafka-python's ConsumerProtocol v0, written out by hand here)
//! share one group: the in-process leader's assignment splits the partitions between
//! them, and the remote member leaving gives them back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tidelog::coordinator::{GroupError, JoinGroupRequest, LeavingMember, SyncGroupRequest};
use tidelog::{Broker, GroupConfig, GroupConsumer, TopicConfig};

/// kafka-python's subscription to ["mixed"]: version 0, one topic, empty user data.
const SUBSCRIPTION: &[u8] = &[
    0, 0, 0, 0, 0, 1, 0, 5, b'm', b'i', b'x', b'e', b'd', 0, 0, 0, 0,
];

/// Reads a ConsumerProtocol v0 assignment by hand: the partitions of topic "mixed".
fn parse_assignment(b: &[u8]) -> Vec<i32> {
    let i16_at = |i: usize| i16::from_be_bytes([b[i], b[i + 1]]);
    let i32_at = |i: usize| i32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    assert_eq!(i16_at(0), 0, "assignment version");
    let mut out = Vec::new();
    let mut pos = 2;
    for _ in 0..i32_at(pos) {
        pos += 4;
        let len = i16_at(pos) as usize;
        assert_eq!(&b[pos + 2..pos + 2 + len], b"mixed");
        pos += 2 + len;
        let n = i32_at(pos);
        for _ in 0..n {
            pos += 4;
            out.push(i32_at(pos));
        }
    }
    out
}

#[test]
fn an_in_process_leader_assigns_to_a_protocol_level_member() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path()).expect("open");
    broker
        .create_topic("mixed", 4, TopicConfig::new())
        .expect("topic");

    // The in-process member, polling on its thread and publishing what it owns.
    let owned = Arc::new(Mutex::new((0, Vec::<i32>::new())));
    let stop = Arc::new(AtomicBool::new(false));
    let mut local = GroupConsumer::join(
        &broker,
        GroupConfig::new("shared", &["mixed"]).heartbeat_interval(Duration::from_millis(10)),
    )
    .expect("join");
    let thread = {
        let (owned, stop) = (Arc::clone(&owned), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                local.poll(Duration::from_millis(10)).expect("poll");
                let parts = local.assignment().into_iter().map(|(_, p)| p).collect();
                *owned.lock() = (local.generation(), parts);
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while owned.lock().1.len() != 4 {
        assert!(
            Instant::now() < deadline,
            "the local member never got the partitions"
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    // The remote member: JoinGroup v4+ (member id required), as a Kafka client does.
    let c = broker.group_coordinator();
    let mut req = JoinGroupRequest {
        group_id: "shared".into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), SUBSCRIPTION.to_vec())],
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(10),
        require_known_member_id: true,
        client_id: "kafka-python".into(),
        ..Default::default()
    };
    let first = c.join_group(req.clone(), Duration::from_secs(10));
    let Err(GroupError::MemberIdRequired { member_id }) = first else {
        panic!("a v4 join with no member id must get MEMBER_ID_REQUIRED: {first:?}");
    };
    req.member_id = member_id;
    let joined = c
        .join_group(req, Duration::from_secs(20))
        .expect("join with the given id");
    assert_ne!(
        joined.leader, joined.member_id,
        "the in-process member stays leader"
    );
    let synced = c
        .sync_group(
            SyncGroupRequest {
                group_id: "shared".into(),
                generation_id: joined.generation_id,
                member_id: joined.member_id.clone(),
                ..Default::default()
            },
            Duration::from_secs(20),
        )
        .expect("sync");
    let remote = parse_assignment(&synced.assignment);
    assert_eq!(remote.len(), 2, "{remote:?}");
    // The local member takes the new generation when its join is answered, and its
    // partitions once its SyncGroup is (a poll may return between the two, with the
    // eager assignor's partitions all revoked): wait for both.
    loop {
        let (generation, parts) = owned.lock().clone();
        if generation == joined.generation_id && !parts.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "the local member never synced");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut all = owned.lock().1.clone();
    all.extend(&remote);
    all.sort_unstable();
    assert_eq!(
        all,
        vec![0, 1, 2, 3],
        "each partition has exactly one owner"
    );
    c.heartbeat("shared", joined.generation_id, &joined.member_id, None)
        .expect("heartbeat of a stable member");

    // The remote member leaves: the local one takes everything back.
    let left = c
        .leave_group(
            "shared",
            &[LeavingMember {
                member_id: joined.member_id.clone(),
                group_instance_id: None,
            }],
        )
        .expect("leave");
    assert!(left[0].is_ok(), "{left:?}");
    loop {
        let (generation, parts) = owned.lock().clone();
        if generation > joined.generation_id && parts.len() == 4 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the local member never took the partitions back"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, Ordering::Release);
    thread.join().expect("member thread");
}
