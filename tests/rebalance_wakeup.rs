//! A member blocked in a long `poll` does not hold up a rebalance: the coordinator wakes
//! it when the group starts one, whatever its heartbeat interval.

use std::time::{Duration, Instant};

use tidelog::{Broker, GroupConfig, GroupConsumer, TopicConfig};

#[test]
fn a_join_wakes_a_member_blocked_in_poll() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = Broker::open(dir.path())?;
    broker.create_topic("quiet", 2, TopicConfig::new())?;
    let hour = Duration::from_secs(3600);
    let config = || {
        GroupConfig::new("sleepy", &["quiet"])
            .heartbeat_interval(hour)
            .session_timeout(Duration::from_secs(60))
    };

    let mut a = GroupConsumer::join(&broker, config())?;
    a.poll(Duration::ZERO)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.assignment().len() != 2 {
        assert!(Instant::now() < deadline, "a never got its partitions");
        a.poll(Duration::from_millis(10))?;
    }
    // a blocks in a poll that would last an hour (the topic stays empty); it returns
    // only when the broker closes.
    let a_thread = std::thread::spawn(move || {
        let result = a.poll(hour);
        (a.assignment().len(), result.map(|r| r.is_empty()))
    });

    let mut b = GroupConsumer::join(&broker, config())?;
    while b.assignment().len() != 1 {
        assert!(
            Instant::now() < deadline,
            "b never got a partition: a was not woken"
        );
        b.poll(Duration::from_millis(50))?;
    }
    broker.close()?;
    let (a_owns, a_result) = a_thread.join().expect("a's thread");
    assert_eq!(a_owns, 1, "a rejoined and kept one partition");
    assert!(
        matches!(a_result, Err(tidelog::Error::Closed(_))),
        "{a_result:?}"
    );
    Ok(())
}
