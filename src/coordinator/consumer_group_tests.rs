use super::*;

fn cfg() -> CoordinatorConfig {
    CoordinatorConfig::default()
}

fn topics() -> TopicsImage {
    BTreeMap::from([
        ("t".to_string(), 4),
        ("orders-eu".to_string(), 2),
        ("orders-us".to_string(), 2),
        ("__consumer_offsets".to_string(), 50),
    ])
}

fn join(member: &str) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned_partitions: Some(Vec::new()),
        ..Default::default()
    }
}

fn beat(member: &str, epoch: i32, owned: &TopicPartitionList) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned_partitions: Some(owned.clone()),
        ..Default::default()
    }
}

fn parts(list: &TopicPartitionList) -> usize {
    list.iter().map(|(_, p)| p.len()).sum()
}

/// Heartbeats `member` (with what it owns, as a client does) until its answer stops
/// changing; returns its epoch and assignment.
fn settle(
    g: &mut ConsumerGroup,
    member: &str,
    epoch: i32,
    owned: &TopicPartitionList,
    now: Instant,
) -> (i32, TopicPartitionList) {
    let (mut epoch, mut owned) = (epoch, owned.clone());
    for _ in 0..5 {
        let r = g
            .heartbeat(&beat(member, epoch, &owned), &topics(), &cfg(), now)
            .unwrap();
        epoch = r.member_epoch;
        match r.assignment {
            Some(a) if a != owned => owned = a,
            _ => break,
        }
    }
    (epoch, owned)
}

#[test]
fn first_member_joins_and_gets_every_partition() {
    let mut g = ConsumerGroup::new("g", 1);
    let now = Instant::now();
    let r = g.heartbeat(&join("a"), &topics(), &cfg(), now).unwrap();
    assert_eq!(r.member_id, "a");
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.heartbeat_interval, Duration::from_secs(5));
    assert_eq!(r.assignment, Some(vec![("t".into(), vec![0, 1, 2, 3])]));
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    // A version 0 client joins with no member id and is given one.
    let r = g.heartbeat(&join(""), &topics(), &cfg(), now).unwrap();
    assert!(r.member_id.starts_with("consumer-"), "{}", r.member_id);
}

#[test]
fn second_member_waits_for_the_first_to_revoke() {
    let mut g = ConsumerGroup::new("g", 1);
    let now = Instant::now();
    let a = g.heartbeat(&join("a"), &topics(), &cfg(), now).unwrap();
    let a_owned = a.assignment.unwrap();
    // b joins: the target splits t, but a still owns everything: b gets nothing yet.
    let b = g.heartbeat(&join("b"), &topics(), &cfg(), now).unwrap();
    assert_eq!(b.member_epoch, 2);
    assert_eq!(b.assignment, Some(Vec::new()));
    assert_eq!(g.state(), ConsumerGroupState::Reconciling);
    // a heartbeats: told to keep two partitions (revoke the rest) at its old epoch.
    let r = g
        .heartbeat(&beat("a", 1, &a_owned), &topics(), &cfg(), now)
        .unwrap();
    assert_eq!(r.member_epoch, 1, "the epoch waits for the revocation");
    let kept = r.assignment.unwrap();
    assert_eq!(parts(&kept), 2);
    // b still gets nothing: a has not acknowledged.
    let r = g
        .heartbeat(&beat("b", 2, &Vec::new()), &topics(), &cfg(), now)
        .unwrap();
    assert_eq!(r.assignment, None);
    // a acknowledges by heartbeating with only what it keeps: it moves to epoch 2.
    let r = g
        .heartbeat(&beat("a", 1, &kept), &topics(), &cfg(), now)
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    // Now b gets the released partitions.
    let r = g
        .heartbeat(&beat("b", 2, &Vec::new()), &topics(), &cfg(), now)
        .unwrap();
    let b_owned = r.assignment.unwrap();
    assert_eq!(parts(&b_owned), 2);
    assert!(b_owned[0].1.iter().all(|p| !kept[0].1.contains(p)));
    assert_eq!(g.state(), ConsumerGroupState::Stable);
}

#[test]
fn a_leaving_member_hands_its_partitions_over() {
    let mut g = ConsumerGroup::new("g", 1);
    let now = Instant::now();
    g.heartbeat(&join("a"), &topics(), &cfg(), now).unwrap();
    let (ea, oa) = settle(&mut g, "a", 1, &vec![("t".into(), vec![0, 1, 2, 3])], now);
    g.heartbeat(&join("b"), &topics(), &cfg(), now).unwrap();
    let (ea, oa) = settle(&mut g, "a", ea, &oa, now);
    let (eb, ob) = settle(&mut g, "b", 2, &Vec::new(), now);
    assert_eq!((parts(&oa), parts(&ob)), (2, 2));
    let r = g
        .heartbeat(&beat("b", eb, &ob), &topics(), &cfg(), now)
        .unwrap();
    assert_eq!(r.member_epoch, eb);
    let mut leave = beat("b", LEAVE_EPOCH, &Vec::new());
    leave.owned_partitions = None;
    let r = g.heartbeat(&leave, &topics(), &cfg(), now).unwrap();
    assert_eq!(r.member_epoch, -1);
    let (_, oa) = settle(&mut g, "a", ea, &oa, now);
    assert_eq!(oa, vec![("t".into(), vec![0, 1, 2, 3])]);
    assert!(matches!(
        g.heartbeat(&beat("b", eb, &ob), &topics(), &cfg(), now),
        Err(GroupError::UnknownMemberId(_))
    ));
}

#[test]
fn a_silent_member_expires_after_the_session_timeout() {
    let mut g = ConsumerGroup::new("g", 1);
    let t0 = Instant::now();
    g.heartbeat(&join("a"), &topics(), &cfg(), t0).unwrap();
    let next = g.tick(&cfg(), t0 + Duration::from_secs(44));
    assert_eq!(next, Some(t0 + Duration::from_secs(45)));
    assert_eq!(g.member_ids(), vec!["a".to_string()]);
    g.tick(&cfg(), t0 + Duration::from_secs(45));
    assert!(g.is_empty());
    assert_eq!(g.state(), ConsumerGroupState::Empty);
    assert_eq!(g.group_epoch(), 2);
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_removed() {
    let mut g = ConsumerGroup::new("g", 1);
    let t0 = Instant::now();
    let mut j = join("a");
    j.rebalance_timeout_ms = 1000;
    let a = g.heartbeat(&j, &topics(), &cfg(), t0).unwrap();
    g.heartbeat(&join("b"), &topics(), &cfg(), t0).unwrap();
    g.heartbeat(&beat("a", 1, &a.assignment.unwrap()), &topics(), &cfg(), t0)
        .unwrap();
    g.heartbeat(
        &beat("b", 2, &Vec::new()),
        &topics(),
        &cfg(),
        t0 + Duration::from_millis(500),
    )
    .unwrap();
    g.tick(&cfg(), t0 + Duration::from_millis(1000));
    assert_eq!(g.member_ids(), vec!["b".to_string()]);
    let (_, ob) = settle(&mut g, "b", 2, &Vec::new(), t0);
    assert_eq!(parts(&ob), 4);
}

#[test]
fn a_static_member_keeps_its_assignment_across_a_restart() {
    let mut g = ConsumerGroup::new("g", 1);
    let now = Instant::now();
    let mut j = join("a1");
    j.instance_id = Some("host-a".into());
    g.heartbeat(&j, &topics(), &cfg(), now).unwrap();
    let (ea, oa) = settle(&mut g, "a1", 1, &vec![("t".into(), vec![0, 1, 2, 3])], now);
    g.heartbeat(&join("b"), &topics(), &cfg(), now).unwrap();
    let (ea, oa) = settle(&mut g, "a1", ea, &oa, now);
    let (eb, ob) = settle(&mut g, "b", 2, &Vec::new(), now);
    assert_eq!(parts(&oa), 2);
    // a1 leaves temporarily: it keeps its assignment, b does not get it.
    let mut leave = beat("a1", STATIC_LEAVE_EPOCH, &oa);
    leave.instance_id = Some("host-a".into());
    assert_eq!(
        g.heartbeat(&leave, &topics(), &cfg(), now)
            .unwrap()
            .member_epoch,
        -2
    );
    let (eb2, ob2) = settle(&mut g, "b", eb, &ob, now);
    assert_eq!((eb2, &ob2), (eb, &ob));
    // Another member with the same instance id is refused while a1 is active...
    let mut a2 = join("a2");
    a2.instance_id = Some("host-a".into());
    // ...a2 takes a1's place and assignment, at its epoch.
    let r = g.heartbeat(&a2, &topics(), &cfg(), now).unwrap();
    assert_eq!(r.member_epoch, ea);
    assert_eq!(r.assignment, Some(oa.clone()));
    assert_eq!(g.member_ids(), vec!["a2".to_string(), "b".to_string()]);
    let mut a3 = join("a3");
    a3.instance_id = Some("host-a".into());
    assert!(matches!(
        g.heartbeat(&a3, &topics(), &cfg(), now),
        Err(GroupError::UnreleasedInstanceId(i)) if i == "host-a"
    ));
    // The old member id is fenced.
    let mut old = beat("a1", ea, &oa);
    old.instance_id = Some("host-a".into());
    assert!(g.heartbeat(&old, &topics(), &cfg(), now).is_err());
}

#[test]
fn a_static_member_that_never_returns_expires() {
    let mut g = ConsumerGroup::new("g", 1);
    let t0 = Instant::now();
    let mut j = join("a1");
    j.instance_id = Some("host-a".into());
    let a = g.heartbeat(&j, &topics(), &cfg(), t0).unwrap();
    let mut leave = beat("a1", STATIC_LEAVE_EPOCH, &a.assignment.unwrap());
    leave.instance_id = Some("host-a".into());
    g.heartbeat(&leave, &topics(), &cfg(), t0).unwrap();
    g.tick(&cfg(), t0 + Duration::from_secs(45));
    assert!(g.is_empty());
    // The instance id is free again.
    let mut j = join("a9");
    j.instance_id = Some("host-a".into());
    assert_eq!(
        g.heartbeat(&j, &topics(), &cfg(), t0 + Duration::from_secs(46))
            .unwrap()
            .member_id,
        "a9"
    );
}

#[test]
fn a_regex_subscription_follows_the_topics() {
    let mut g = ConsumerGroup::new("g", 1);
    let now = Instant::now();
    let mut j = join("a");
    j.subscribed_topic_names = None;
    j.subscribed_topic_regex = Some("orders-.*".into());
    let r = g.heartbeat(&j, &topics(), &cfg(), now).unwrap();
    assert_eq!(
        r.assignment,
        Some(vec![
            ("orders-eu".into(), vec![0, 1]),
            ("orders-us".into(), vec![0, 1])
        ])
    );
    // A new matching topic bumps the group epoch and is assigned.
    let mut more = topics();
    more.insert("orders-ap".into(), 1);
    let owned = r.assignment.unwrap();
    let r = g
        .heartbeat(&beat("a", 1, &owned), &more, &cfg(), now)
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    assert_eq!(parts(&r.assignment.unwrap()), 5);
    // An invalid expression is refused.
    let mut bad = join("b");
    bad.subscribed_topic_regex = Some("(".into());
    assert!(matches!(
        g.heartbeat(&bad, &topics(), &cfg(), now),
        Err(GroupError::InvalidRegularExpression { .. })
    ));
}

#[test]
fn epochs_are_fenced_as_kafka_does() {
    let mut g = ConsumerGroup::new("g", 1);
    let now = Instant::now();
    let a = g.heartbeat(&join("a"), &topics(), &cfg(), now).unwrap();
    let owned = a.assignment.unwrap();
    assert!(matches!(
        g.heartbeat(&beat("a", 5, &owned), &topics(), &cfg(), now),
        Err(GroupError::FencedMemberEpoch {
            given: 5,
            current: 1
        })
    ));
    assert!(matches!(
        g.heartbeat(&beat("zz", 1, &owned), &topics(), &cfg(), now),
        Err(GroupError::UnknownMemberId(_))
    ));
    // Moved to epoch 2 (a topic gained a partition): epoch 1 with owned partitions
    // within the assignment is a lost response and tolerated; with more it is fenced.
    let mut grown = topics();
    grown.insert("t".into(), 5);
    let r = g
        .heartbeat(&beat("a", 1, &owned), &grown, &cfg(), now)
        .unwrap();
    assert_eq!(r.member_epoch, 2);
    assert!(
        g.heartbeat(&beat("a", 1, &owned), &grown, &cfg(), now)
            .is_ok()
    );
    let too_much = vec![("t".to_string(), vec![0, 1, 2, 3, 4, 5])];
    assert!(matches!(
        g.heartbeat(&beat("a", 1, &too_much), &grown, &cfg(), now),
        Err(GroupError::FencedMemberEpoch { .. })
    ));
    // Commits: the current epoch only.
    assert!(g.check_commit("a", 2).is_ok());
    assert!(matches!(
        g.check_commit("a", 1),
        Err(GroupError::StaleMemberEpoch {
            given: 1,
            current: 2
        })
    ));
    assert!(matches!(
        g.check_commit("a", 3),
        Err(GroupError::FencedMemberEpoch { .. })
    ));
    assert!(matches!(
        g.check_commit("", -1),
        Err(GroupError::UnknownMemberId(_))
    ));
    // With no member, a negative epoch commits whatever member id it carries.
    let empty = ConsumerGroup::new("e", 1);
    assert!(empty.check_commit("", -1).is_ok());
    assert!(empty.check_commit("a-client-of-its-own", -1).is_ok());
}

#[test]
fn invalid_requests_are_refused() {
    let mut g = ConsumerGroup::new("g", 1);
    let now = Instant::now();
    let mut j = join("a");
    j.rebalance_timeout_ms = -1;
    assert!(matches!(
        g.heartbeat(&j, &topics(), &cfg(), now),
        Err(GroupError::InvalidRequest(_))
    ));
    let mut j = join("a");
    j.subscribed_topic_names = None;
    assert!(matches!(
        g.heartbeat(&j, &topics(), &cfg(), now),
        Err(GroupError::InvalidRequest(_))
    ));
    let mut j = join("a");
    j.server_assignor = Some("sticky".into());
    assert!(matches!(
        g.heartbeat(&j, &topics(), &cfg(), now),
        Err(GroupError::UnsupportedAssignor(a)) if a == "sticky"
    ));
    // Configured but not implemented here: refused too.
    let mut custom = cfg();
    custom.consumer_assignors.push("custom".into());
    let mut j = join("a");
    j.server_assignor = Some("custom".into());
    assert!(matches!(
        g.heartbeat(&j, &topics(), &custom, now),
        Err(GroupError::UnsupportedAssignor(_))
    ));
    let mut j = join("a");
    j.server_assignor = Some("range".into());
    g.heartbeat(&j, &topics(), &cfg(), now).unwrap();
    assert_eq!(g.describe().assignor_name, "range");
}

/// A classic JoinGroup of member `c` subscribing to "t", with a 10 s rebalance timeout.
fn classic_join_request() -> crate::coordinator::JoinGroupRequest {
    let sub = crate::coordinator::protocol::Subscription {
        topics: vec!["t".into()],
        user_data: None,
        owned_partitions: Vec::new(),
    };
    crate::coordinator::JoinGroupRequest {
        group_id: "g".into(),
        member_id: "c".into(),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), sub.encode())],
        session_timeout: Duration::from_secs(45),
        rebalance_timeout: Duration::from_secs(10),
        ..Default::default()
    }
}

/// A group of consumer-protocol member `a` and classic member `c`, joined at `t0`;
/// `c`'s JoinGroup answer.
fn with_classic_member(t0: Instant) -> (ConsumerGroup, crate::coordinator::JoinGroupResponse) {
    let mut g = ConsumerGroup::new("g", 1);
    g.heartbeat(&join("a"), &topics(), &cfg(), t0).unwrap();
    let j = g.classic_join(&classic_join_request(), &cfg(), t0).unwrap();
    (g, j)
}

/// `c`'s SyncGroup of `generation`.
fn classic_sync_request(generation: i32) -> crate::coordinator::SyncGroupRequest {
    crate::coordinator::SyncGroupRequest {
        group_id: "g".into(),
        generation_id: generation,
        member_id: "c".into(),
        ..Default::default()
    }
}

#[test]
fn a_classic_member_that_does_not_sync_within_its_rebalance_timeout_is_removed() {
    // Kafka's consumer-group sync timeout: a classic member answered a JoinGroup must
    // send SyncGroup within its rebalance timeout, heartbeats or not.
    let t0 = Instant::now();
    let (mut g, j) = with_classic_member(t0);
    let _ = g.classic_heartbeat("c", None, j.generation_id, t0 + Duration::from_secs(5));
    g.tick(&cfg(), t0 + Duration::from_secs(9));
    assert!(g.member_ids().contains(&"c".to_string()));
    g.tick(&cfg(), t0 + Duration::from_secs(10));
    assert_eq!(g.member_ids(), vec!["a".to_string()]);
}

#[test]
fn a_classic_member_that_syncs_in_time_stays() {
    let t0 = Instant::now();
    let (mut g, j) = with_classic_member(t0);
    let sync = classic_sync_request(j.generation_id);
    g.classic_sync(&sync, t0 + Duration::from_secs(1)).unwrap();
    g.tick(&cfg(), t0 + Duration::from_secs(20));
    assert_eq!(g.member_ids(), vec!["a".to_string(), "c".to_string()]);
}

#[test]
fn a_classic_member_told_to_rejoin_by_sync_group_must_rejoin_in_time() {
    let t0 = Instant::now();
    let (mut g, j) = with_classic_member(t0);
    let sync = classic_sync_request(j.generation_id);
    g.classic_sync(&sync, t0).unwrap();
    // Another member joins: the group epoch moves, the classic member must rejoin.
    let later = t0 + Duration::from_secs(1);
    g.heartbeat(&join("b"), &topics(), &cfg(), later).unwrap();
    assert!(matches!(
        g.classic_sync(&sync, later),
        Err(GroupError::RebalanceInProgress)
    ));
    g.tick(&cfg(), later + Duration::from_secs(9));
    assert!(g.member_ids().contains(&"c".to_string()));
    g.tick(&cfg(), later + Duration::from_secs(10));
    assert!(!g.member_ids().contains(&"c".to_string()));
}
