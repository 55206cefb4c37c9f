//! Commit, close the broker, reopen it, and resume at the committed offset.

use std::time::Duration;

use tidelog::{
    Broker, GroupConfig, GroupConsumer, OffsetReset, Producer, ProducerRecord, TopicConfig,
};

fn values(records: &tidelog::ConsumerRecords) -> tidelog::Result<Vec<u32>> {
    records
        .iter()
        .map(|r| {
            r.map(|r| {
                u32::from_be_bytes(r.value.unwrap_or_default().try_into().unwrap_or_default())
            })
        })
        .collect()
}

#[test]
fn a_restarted_group_resumes_where_it_committed() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = || {
        GroupConfig::new("resumer", &["log"])
            .auto_offset_reset(OffsetReset::Earliest)
            .enable_auto_commit(false)
    };
    {
        let broker = Broker::open(dir.path())?;
        broker.create_topic("log", 1, TopicConfig::new())?;
        let producer = Producer::new(&broker)?;
        for i in 0u32..100 {
            producer.send("log", ProducerRecord::new(&i.to_be_bytes()))?;
        }
        let mut member = GroupConsumer::join(&broker, config())?;
        let mut got = Vec::new();
        while got.len() < 100 {
            got.extend(values(&member.poll(Duration::from_secs(5))?)?);
        }
        assert_eq!(got, (0..100).collect::<Vec<_>>());
        member.commit_sync()?;
        assert_eq!(member.committed("log", 0).unwrap(), Some(100));
        drop(member);
        // Records after the commit are not consumed before the restart.
        for i in 100u32..150 {
            producer.send("log", ProducerRecord::new(&i.to_be_bytes()))?;
        }
        drop(producer);
        broker.close()?;
    }
    let broker = Broker::open(dir.path())?;
    let mut member = GroupConsumer::join(&broker, config())?;
    let mut got = Vec::new();
    while got.len() < 50 {
        let batch = values(&member.poll(Duration::from_secs(5))?)?;
        assert!(!batch.is_empty(), "nothing to resume after {got:?}");
        got.extend(batch);
    }
    assert_eq!(got, (100..150).collect::<Vec<_>>());
    assert_eq!(member.position("log", 0)?, 150);
    Ok(())
}

#[test]
fn standalone_consumer_commits_survive_restart() -> tidelog::Result<()> {
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let broker = Broker::open(dir.path())?;
        broker.create_topic("t", 2, TopicConfig::new())?;
        let mut c =
            tidelog::Consumer::new(&broker, tidelog::ConsumerConfig::default().group_id("g"));
        c.assign(&[("t", 0), ("t", 1)])?;
        c.commit_offsets(&[("t", 0, 0), ("t", 1, 0)])?;
    }
    let broker = Broker::open(dir.path())?;
    let c = tidelog::Consumer::new(&broker, tidelog::ConsumerConfig::default().group_id("g"));
    assert_eq!(c.committed("t", 1)?, Some(0));
    assert_eq!(c.committed("t", 5)?, None);
    Ok(())
}
