//! Raft storage: persistence across reopen, conflict truncation, torn and corrupt
//! records, snapshots and compaction.

use super::*;
use raft::Storage;

fn entry(index: u64, term: u64, data: &[u8]) -> Entry {
    Entry {
        index,
        term,
        data: data.to_vec().into(),
        ..Default::default()
    }
}

fn entries(from: u64, to: u64, term: u64) -> Vec<Entry> {
    (from..=to)
        .map(|i| entry(i, term, format!("record {i}").as_bytes()))
        .collect()
}

fn all(s: &RaftStorage) -> Vec<(u64, u64)> {
    let first = s.first_index().unwrap();
    let last = s.last_index().unwrap();
    s.entries(first, last + 1, None, GetEntriesContext::empty(false))
        .unwrap()
        .iter()
        .map(|e| (e.index, e.term))
        .collect()
}

#[test]
fn entries_and_hard_state_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RaftStorage::open(dir.path(), 2, &[1, 2, 3]).unwrap();
    let init = s.initial_state().unwrap();
    assert_eq!(init.conf_state.voters, vec![1, 2, 3]);
    assert_eq!(s.first_index().unwrap(), 1);
    assert_eq!(s.last_index().unwrap(), 0);
    s.append(&entries(1, 5, 1)).unwrap();
    let hs = HardState {
        term: 3,
        vote: 1,
        commit: 4,
        ..Default::default()
    };
    s.set_hard_state(&hs).unwrap();
    drop(s);
    let s = RaftStorage::open(dir.path(), 2, &[3, 2, 1]).unwrap();
    assert_eq!(all(&s), (1..=5).map(|i| (i, 1)).collect::<Vec<_>>());
    let st = s.initial_state().unwrap();
    assert_eq!(
        (st.hard_state.term, st.hard_state.vote, st.hard_state.commit),
        (3, 1, 4)
    );
    assert_eq!(s.term(3).unwrap(), 1);
    let data = s
        .entries(2, 3, None, GetEntriesContext::empty(false))
        .unwrap();
    assert_eq!(&data[0].data[..], b"record 2");
    // max_size still returns at least one entry.
    assert_eq!(
        s.entries(1, 6, Some(1), GetEntriesContext::empty(false))
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_conflicting_suffix_is_replaced_on_disk_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RaftStorage::open(dir.path(), 1, &[1, 2, 3]).unwrap();
    s.append(&entries(1, 5, 1)).unwrap();
    s.append(&entries(3, 4, 2)).unwrap();
    assert_eq!(all(&s), vec![(1, 1), (2, 1), (3, 2), (4, 2)]);
    drop(s);
    let mut s = RaftStorage::open(dir.path(), 1, &[1, 2, 3]).unwrap();
    assert_eq!(all(&s), vec![(1, 1), (2, 1), (3, 2), (4, 2)]);
    // A gap is refused as a typed error.
    assert!(s.append(&entries(9, 9, 2)).unwrap_err().is_corruption());
}

#[test]
fn a_torn_last_record_is_cut_off_and_a_corrupt_middle_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RaftStorage::open(dir.path(), 1, &[1]).unwrap();
    s.append(&entries(1, 3, 1)).unwrap();
    drop(s);
    let path = dir.path().join(ENTRIES_FILE);
    let good = std::fs::read(&path).unwrap();
    // A crash in the middle of appending entry 4.
    let mut torn = good.clone();
    torn.extend_from_slice(&encode_entry(&entry(4, 1, b"never acknowledged"))[..12]);
    std::fs::write(&path, &torn).unwrap();
    let mut s = RaftStorage::open(dir.path(), 1, &[1]).unwrap();
    assert_eq!(s.last_index().unwrap(), 3);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good.len() as u64);
    s.append(&entries(4, 4, 1)).unwrap();
    drop(s);
    assert_eq!(
        RaftStorage::open(dir.path(), 1, &[1])
            .unwrap()
            .last_index()
            .unwrap(),
        4
    );
    // A complete last record with a bad CRC is a torn write too.
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        RaftStorage::open(dir.path(), 1, &[1])
            .unwrap()
            .last_index()
            .unwrap(),
        3
    );
    // A bad record followed by good ones is corruption: refuse, naming the file.
    let mut bytes = good.clone();
    bytes[RECORD_HEADER + 2] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let e = RaftStorage::open(dir.path(), 1, &[1]).unwrap_err();
    assert!(
        e.is_corruption() && e.to_string().contains(ENTRIES_FILE),
        "{e}"
    );
}

#[test]
fn compaction_keeps_a_bounded_tail_and_the_snapshot_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RaftStorage::open(dir.path(), 1, &[1, 2, 3]).unwrap();
    s.append(&entries(1, 10, 2)).unwrap();
    s.compact(6, b"image at 6".to_vec()).unwrap();
    assert_eq!(s.first_index().unwrap(), 7);
    assert_eq!(s.term(6).unwrap(), 2);
    assert!(matches!(
        s.term(5),
        Err(raft::Error::Store(StorageError::Compacted))
    ));
    assert!(matches!(
        s.entries(3, 8, None, GetEntriesContext::empty(false)),
        Err(raft::Error::Store(StorageError::Compacted))
    ));
    let snap = s.snapshot(0, 2).unwrap();
    assert_eq!(
        (snap.get_metadata().index, snap.get_metadata().term),
        (6, 2)
    );
    assert_eq!(&snap.data[..], b"image at 6");
    assert_eq!(snap.get_metadata().get_conf_state().voters, vec![1, 2, 3]);
    drop(s);
    let s = RaftStorage::open(dir.path(), 1, &[1, 2, 3]).unwrap();
    assert_eq!(all(&s), (7..=10).map(|i| (i, 2)).collect::<Vec<_>>());
    assert_eq!(s.snapshot_ref().get_metadata().index, 6);
    // The commit index is never below the snapshot (raft-rs would refuse to start).
    assert!(s.initial_state().unwrap().hard_state.commit >= 6);
}

#[test]
fn a_crash_between_snapshot_and_rewrite_is_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RaftStorage::open(dir.path(), 1, &[1]).unwrap();
    s.append(&entries(1, 8, 1)).unwrap();
    let path = dir.path().join(ENTRIES_FILE);
    let old = std::fs::read(&path).unwrap();
    s.compact(5, b"img".to_vec()).unwrap();
    drop(s);
    // The snapshot reached disk, the rewritten entry file did not.
    std::fs::write(&path, &old).unwrap();
    let s = RaftStorage::open(dir.path(), 1, &[1]).unwrap();
    assert_eq!(s.first_index().unwrap(), 6);
    assert_eq!(all(&s), (6..=8).map(|i| (i, 1)).collect::<Vec<_>>());
}

#[test]
fn a_received_snapshot_replaces_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RaftStorage::open(dir.path(), 3, &[1, 2, 3]).unwrap();
    s.append(&entries(1, 4, 1)).unwrap();
    let mut snap = Snapshot {
        data: b"leader's image".to_vec().into(),
        ..Default::default()
    };
    snap.mut_metadata().index = 40;
    snap.mut_metadata().term = 5;
    snap.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
    s.apply_snapshot(&snap).unwrap();
    assert_eq!(s.first_index().unwrap(), 41);
    assert_eq!(s.last_index().unwrap(), 40);
    s.append(&entries(41, 42, 5)).unwrap();
    drop(s);
    let s = RaftStorage::open(dir.path(), 3, &[1, 2, 3]).unwrap();
    assert_eq!(all(&s), vec![(41, 5), (42, 5)]);
    let st = s.initial_state().unwrap();
    assert_eq!(st.hard_state.term, 5);
    assert_eq!(st.hard_state.commit, 40);
    assert_eq!(&s.snapshot(0, 1).unwrap().data[..], b"leader's image");
}

#[test]
fn another_nodes_directory_or_other_voters_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(RaftStorage::open(dir.path(), 2, &[1, 2, 3]).unwrap());
    let e = RaftStorage::open(dir.path(), 3, &[1, 2, 3])
        .unwrap_err()
        .to_string();
    // Raft ids 2 and 3 are nodes 1 and 2.
    assert!(e.contains("node 1") && e.contains("node 2"), "{e}");
    let e = RaftStorage::open(dir.path(), 2, &[1, 2, 4])
        .unwrap_err()
        .to_string();
    assert!(e.contains("[0, 1, 2]") && e.contains("[0, 1, 3]"), "{e}");
}

#[test]
fn the_clean_shutdown_marker() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read_clean_shutdown(dir.path()).unwrap(), None);
    write_clean_shutdown(dir.path(), 17).unwrap();
    assert_eq!(read_clean_shutdown(dir.path()).unwrap(), Some(17));
    remove_clean_shutdown(dir.path()).unwrap();
    assert_eq!(read_clean_shutdown(dir.path()).unwrap(), None);
    remove_clean_shutdown(dir.path()).unwrap();
}

#[test]
fn an_online_configuration_change_survives_a_reopen_and_rules_over_the_quorum_flag() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = RaftStorage::open(dir.path(), 2, &[1, 2, 3]).unwrap();
    let cs = ConfState {
        voters: vec![1, 2, 5],
        learners: vec![3],
        ..Default::default()
    };
    s.set_conf_state(&cs, Some((5, "h5:9093".into()))).unwrap();
    drop(s);
    // `--quorum` still lists the voters the cluster started with.
    let s = RaftStorage::open(dir.path(), 2, &[1, 2, 3]).unwrap();
    let init = s.initial_state().unwrap();
    assert_eq!(
        (init.conf_state.voters, init.conf_state.learners),
        (vec![1, 2, 5], vec![3])
    );
    assert!(s.reconfigured().changed);
    assert_eq!(
        s.reconfigured().addresses.get(&5).map(String::as_str),
        Some("h5:9093")
    );
}

#[test]
fn a_version_1_raft_state_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::new();
    w.u8(1);
    w.u64(2);
    w.u64(7);
    w.u64(3);
    w.u64(4);
    write_ids(&mut w, &[1, 2, 3]);
    write_checkpoint(&dir.path().join(STATE_FILE), &w.into_bytes()).unwrap();
    let s = RaftStorage::open(dir.path(), 2, &[1, 2, 3]).unwrap();
    let init = s.initial_state().unwrap();
    assert_eq!(init.hard_state.term, 7);
    assert_eq!(init.conf_state.voters, vec![1, 2, 3]);
    assert!(init.conf_state.learners.is_empty() && !s.reconfigured().changed);
}
