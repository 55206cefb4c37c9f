//! The read-only commands work on a data directory this process cannot write (a
//! read-only mount here; a read-only copy alike), without its lock file, and say that
//! they opened it read-only: `topics list|describe`, `consume` without a group and
//! `groups describe` (committed offsets and lag); `Broker::open_read_only` does the same
//! in the API, and anything that writes is refused.

mod cli_support;
mod tmpfs_support;

use std::process::Command;

use cli_support::{ok, tidelog};
use tidelog::coordinator::{CommitOffset, OffsetCommitRequest};
use tidelog::{BatchBuilder, Broker, TopicConfig};
use tmpfs_support::Tmpfs;

#[test]
fn read_only_commands_work_on_a_read_only_mount() {
    let Some(fs) = Tmpfs::mount("16m") else {
        return;
    };
    let data = fs.path().join("data");
    {
        let broker = Broker::open(&data).unwrap();
        let p = broker
            .create_topic("events", 1, TopicConfig::new())
            .and_then(|()| broker.topic("events"))
            .unwrap()
            .partition(0)
            .unwrap();
        for i in 0..5 {
            let mut b = BatchBuilder::new();
            b.push(0, None, Some(format!("v{i}").as_bytes()), &[]);
            p.append_batch(&b.finish()).unwrap();
        }
        broker
            .group_coordinator()
            .offset_commit(OffsetCommitRequest {
                group_id: "g".into(),
                generation_id: -1,
                member_id: String::new(),
                group_instance_id: None,
                offsets: vec![CommitOffset {
                    topic: "events".into(),
                    partition: 0,
                    offset: 3,
                    leader_epoch: -1,
                    metadata: None,
                    commit_timestamp: None,
                }],
            })
            .unwrap();
        broker.close().unwrap();
    }
    // A copy of a directory need not have the lock file.
    std::fs::remove_file(data.join(".lock")).unwrap();
    let remount = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(fs.path())
        .status()
        .unwrap();
    assert!(remount.success());
    assert!(
        std::fs::write(data.join("probe"), b"x").is_err(),
        "mounted read-only"
    );

    let note = format!(
        "note: {} is opened read-only (it cannot be written)",
        data.display()
    );
    let list = tidelog(&data, &["topics", "list"], "");
    assert!(list.stderr.contains(&note), "{list:?}");
    assert_eq!(ok(list), "__consumer_offsets\nevents\n");
    let describe = ok(tidelog(&data, &["topics", "describe", "events"], ""));
    assert!(describe.contains("events"), "{describe}");
    let consumed = ok(tidelog(
        &data,
        &["consume", "events", "--from-beginning", "-e"],
        "",
    ));
    assert_eq!(consumed, "v0\nv1\nv2\nv3\nv4\n");
    let group = ok(tidelog(&data, &["groups", "describe", "g"], ""));
    assert!(group.contains("g\tevents\t0\t3\t5\t2\t-"), "{group}");
    // What writes cannot.
    let produce = tidelog(&data, &["produce", "events"], "x\n");
    assert_eq!(produce.code, 1, "{produce:?}");

    let broker = Broker::open_read_only(&data).unwrap();
    assert!(broker.is_read_only());
    let p = broker.topic("events").unwrap().partition(0).unwrap();
    assert_eq!(p.log_end_offset(), 5);
    assert!(matches!(
        p.append_batch(&{
            let mut b = BatchBuilder::new();
            b.push(0, None, Some(b"no"), &[]);
            b.finish()
        }),
        Err(tidelog::Error::ReadOnly(_))
    ));
    assert!(matches!(
        broker.create_topic("new", 1, TopicConfig::new()),
        Err(tidelog::Error::ReadOnly(_))
    ));
    broker.close().unwrap();
    assert!(Broker::open(&data).is_err());
}
