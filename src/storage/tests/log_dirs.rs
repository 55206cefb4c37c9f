//! Several log directories per manager (JBOD): partitions spread over them and found
//! again on reopen, a partition in two directories refused, a leftover `-future` move
//! resolved, a failed directory taking only its partitions offline.

use super::{batch, small, values};
use crate::error::Error;
use crate::storage::{LogManager, StorageLimits};
use std::fs;
use std::path::{Path, PathBuf};

/// A temporary root and two log directories in it, `a` and `b` (not yet made).
pub(crate) fn two_dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    let b = root.path().join("b");
    (root, a, b)
}

/// What a move between log directories leaves in `dirs`: the partition directories
/// called `name`, and every `-future` and `-delete` directory, sorted.
pub(crate) fn partition_dirs(dirs: &[&Path], name: &str) -> Vec<String> {
    let mut found: Vec<String> = dirs
        .iter()
        .flat_map(|d| fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n == name || n.ends_with("-future") || n.ends_with("-delete"))
        .collect();
    found.sort();
    found
}

fn open2(a: &PathBuf, b: &PathBuf) -> crate::error::Result<LogManager> {
    LogManager::open_with_dirs(a, std::slice::from_ref(b), StorageLimits::default())
}

/// Makes the log `t-0` with three records in `a` or `b`, closed again.
fn closed_log_of_three(a: &PathBuf, b: &PathBuf) {
    let m = open2(a, b).unwrap();
    m.open_log("t-0", small())
        .unwrap()
        .append(&batch(0, 3, 1_000))
        .unwrap();
    m.close().unwrap();
}

#[test]
fn partitions_spread_over_the_directories_and_are_found_again() {
    let (_root, a, b) = two_dirs();
    let m = open2(&a, &b).unwrap();
    for p in 0..4 {
        let log = m.open_log(&format!("t-{p}"), small()).unwrap();
        log.append(&batch(p * 10, 5, 1_000)).unwrap();
    }
    let in_a = (0..4).filter(|p| a.join(format!("t-{p}")).is_dir()).count();
    let in_b = (0..4).filter(|p| b.join(format!("t-{p}")).is_dir()).count();
    assert_eq!((in_a, in_b), (2, 2), "fewest partitions first");
    let before: Vec<PathBuf> = (0..4)
        .map(|p| m.log_dir_of(&format!("t-{p}")).unwrap())
        .collect();
    m.close().unwrap();
    drop(m);

    let m = open2(&a, &b).unwrap();
    assert_eq!(m.names_on_disk().unwrap(), vec!["t-0", "t-1", "t-2", "t-3"]);
    for p in 0..4u32 {
        let name = format!("t-{p}");
        assert_eq!(m.log_dir_of(&name).unwrap(), before[p as usize], "{name}");
        let log = m.open_log(&name, small()).unwrap();
        let got = values(&log, 0);
        assert_eq!(got.len(), 5, "{name}");
        assert_eq!(got[0].1, format!("value-{:06}", p * 10));
    }
    // Opening the main directory alone would not see the partitions of the other: the
    // lock of the extra directory is held meanwhile.
    assert!(matches!(
        LogManager::open_with_dirs(
            tempfile::tempdir().unwrap().path(),
            std::slice::from_ref(&b),
            StorageLimits::default()
        ),
        Err(Error::DirectoryLocked(_))
    ));
}

#[test]
fn a_partition_in_two_directories_is_refused_naming_both() {
    let (_root, a, b) = two_dirs();
    fs::create_dir_all(a.join("t-0")).unwrap();
    fs::create_dir_all(b.join("t-0")).unwrap();
    let err = open2(&a, &b).unwrap_err().to_string();
    assert!(err.contains(&a.join("t-0").display().to_string()), "{err}");
    assert!(err.contains(&b.join("t-0").display().to_string()), "{err}");
}

#[test]
fn a_leftover_future_directory_is_dropped_or_finished() {
    let (_root, a, b) = two_dirs();
    closed_log_of_three(&a, &b);
    let home = if a.join("t-0").is_dir() { &a } else { &b };
    let other = if home == &a { &b } else { &a };
    // The old copy is still there: the unfinished copy is deleted.
    fs::create_dir_all(other.join("t-0.0a1b-future")).unwrap();
    {
        let m = open2(&a, &b).unwrap();
        assert!(!other.join("t-0.0a1b-future").exists());
        assert_eq!(m.log_dir_of("t-0").as_deref(), Some(home.as_path()));
        m.close().unwrap();
    }
    // The old copy was retired: the complete future copy takes its place.
    fs::rename(home.join("t-0"), other.join("t-0.0a1b-future")).unwrap();
    let m = open2(&a, &b).unwrap();
    assert_eq!(m.log_dir_of("t-0").as_deref(), Some(other.as_path()));
    assert_eq!(values(&m.open_log("t-0", small()).unwrap(), 0).len(), 3);
}

#[test]
fn a_failed_directory_takes_only_its_partitions_offline() {
    let (_root, a, b) = two_dirs();
    let m = open2(&a, &b).unwrap();
    let l0 = m.open_log("t-0", small()).unwrap();
    let l1 = m.open_log("t-1", small()).unwrap();
    l0.append(&batch(0, 2, 1_000)).unwrap();
    l1.append(&batch(0, 2, 1_000)).unwrap();
    assert_eq!(m.log_dir_of("t-1").as_deref(), Some(b.as_path()));
    m.fail_log_dir(&b, "disk pulled").unwrap();
    let storage = |r: crate::error::Result<()>| matches!(r, Err(Error::Io { .. }));
    assert!(storage(l1.append(&batch(2, 1, 1_000)).map(drop)), "append");
    assert!(storage(l1.read(0, 1 << 20).map(drop)), "read");
    l0.append(&batch(2, 1, 1_000)).unwrap();
    assert_eq!(values(&l0, 0).len(), 3);
    // New partitions go to the usable directory.
    m.open_log("t-2", small()).unwrap();
    assert!(a.join("t-2").is_dir());
    let states = m.log_dir_states();
    assert!(states[0].1.is_none());
    assert!(states[1].1.as_deref().unwrap().contains("disk pulled"));
}

#[test]
fn a_directory_unusable_at_open_is_failed_not_fatal() {
    let (_root, a, b) = two_dirs();
    fs::create_dir_all(b.parent().unwrap()).unwrap();
    fs::write(&b, b"not a directory").unwrap();
    let m = open2(&a, &b).unwrap();
    assert!(m.log_dir_states()[1].1.is_some());
    m.open_log("t-0", small()).unwrap();
    m.open_log("t-1", small()).unwrap();
    assert!(a.join("t-0").is_dir() && a.join("t-1").is_dir());
    assert!(open2(&a, &a).is_err(), "a directory given twice");
}

#[test]
fn a_log_moves_to_another_directory_with_every_record() {
    let (_root, a, b) = two_dirs();
    let m = open2(&a, &b).unwrap();
    let log = m.open_log("t-0", small()).unwrap();
    // Several segments: sealed ones are copied while the log serves, the tail after.
    for i in 0..40 {
        log.append(&batch(i * 5, 5, 1_000)).unwrap();
    }
    assert_eq!(m.log_dir_of("t-0").as_deref(), Some(a.as_path()));
    let before = values(&log, 0);
    let moved = m.move_log("t-0", &b, small()).unwrap();
    assert!(matches!(
        log.append(&batch(0, 1, 1_000)),
        Err(Error::Closed(_))
    ));
    assert_eq!(values(&moved, 0), before);
    assert_eq!(m.log_dir_of("t-0").as_deref(), Some(b.as_path()));
    assert!(!a.join("t-0").exists() && b.join("t-0").is_dir());
    assert_eq!(partition_dirs(&[&a, &b], "t-0"), ["t-0"]);
    moved.append(&batch(200, 5, 1_000)).unwrap();
    assert!(
        m.move_log("t-0", &PathBuf::from("/nonexistent"), small())
            .is_err()
    );
    m.close().unwrap();
    drop(m);
    let m = open2(&a, &b).unwrap();
    assert_eq!(m.log_dir_of("t-0").as_deref(), Some(b.as_path()));
    assert_eq!(
        values(&m.open_log("t-0", small()).unwrap(), 0).len(),
        before.len() + 5
    );
}

#[test]
fn a_move_cut_short_after_retiring_the_old_copy_is_finished_or_undone() {
    let (_root, a, b) = two_dirs();
    closed_log_of_three(&a, &b);
    assert!(a.join("t-0").is_dir());
    // The old copy retired, the new one not complete-and-renamed yet: only the retired
    // one is left (the copy had not started): it is put back.
    fs::rename(a.join("t-0"), a.join("t-0.00ff-delete")).unwrap();
    {
        let m = open2(&a, &b).unwrap();
        assert_eq!(m.log_dir_of("t-0").as_deref(), Some(a.as_path()));
        assert_eq!(values(&m.open_log("t-0", small()).unwrap(), 0).len(), 3);
        m.close().unwrap();
    }
    // The old copy retired and the complete future one present: the future one wins,
    // the retired one is deleted.
    super::super::dirs::sync_copy(&a.join("t-0"), &b.join("t-0.00ff-future")).unwrap();
    fs::rename(a.join("t-0"), a.join("t-0.00ff-delete")).unwrap();
    let m = open2(&a, &b).unwrap();
    assert_eq!(m.log_dir_of("t-0").as_deref(), Some(b.as_path()));
    assert!(!a.join("t-0.00ff-delete").exists());
    assert_eq!(values(&m.open_log("t-0", small()).unwrap(), 0).len(), 3);
}

#[test]
fn an_io_error_on_append_fails_the_directory() {
    let (_root, a, b) = two_dirs();
    let m = open2(&a, &b).unwrap();
    let l0 = m.open_log("t-0", small()).unwrap();
    let l1 = m.open_log("t-1", small()).unwrap();
    assert_eq!(m.log_dir_of("t-1").as_deref(), Some(b.as_path()));
    // The disk under b goes: the next segment cannot be created.
    fs::remove_dir_all(b.join("t-1")).unwrap();
    let mut failed = None;
    for i in 0..200 {
        if let Err(e) = l1.append(&batch(i * 5, 5, 1_000)) {
            failed = Some(e);
            break;
        }
    }
    assert!(matches!(failed, Some(Error::Io { .. })), "{failed:?}");
    assert!(
        m.log_dir_states()[1].1.is_some(),
        "{:?}",
        m.log_dir_states()
    );
    assert!(matches!(l1.read(0, 1 << 20), Err(Error::Io { .. })));
    l0.append(&batch(0, 5, 1_000)).unwrap();
    assert!(m.log_dir_states()[0].1.is_none());
}

#[test]
fn a_background_move_shows_its_future_log_cancels_and_takes_the_tail() {
    let (_root, a, b) = two_dirs();
    let m = open2(&a, &b).unwrap();
    let log = m.open_log("t-0", small()).unwrap();
    for i in 0..20 {
        log.append(&batch(i * 5, 5, 1_000)).unwrap();
    }
    // Paced to a byte a second: the copy waits until cancelled.
    m.set_log_dir_move_rate(Some(1));
    let mv = m.begin_move("t-0", &b).unwrap().unwrap();
    let copier = {
        let (m, mv) = (m.clone(), std::sync::Arc::clone(&mv));
        std::thread::spawn(move || mv.copy_online(m.move_rate()))
    };
    let futures = m.future_logs();
    assert_eq!(futures.len(), 1, "{futures:?}");
    assert_eq!((futures[0].name.as_str(), &futures[0].dir), ("t-0", &b));
    assert_eq!(futures[0].offset_lag, 100);
    assert!(m.begin_move("t-0", &b).unwrap().is_none(), "already moving");
    assert!(m.cancel_move("t-0"));
    assert!(matches!(copier.join().unwrap(), Err(Error::Closed(_))));
    m.abandon_move(&mv);
    assert!(m.future_logs().is_empty());
    assert_eq!(partition_dirs(&[&a, &b], "t-0"), ["t-0"]);
    assert_eq!(m.log_dir_of("t-0").as_deref(), Some(a.as_path()));

    // Unpaced: the copy ends; what is appended after it is taken at the swap.
    m.set_log_dir_move_rate(None);
    let mv = m.begin_move("t-0", &b).unwrap().unwrap();
    mv.copy_online(m.move_rate()).unwrap();
    assert_eq!(m.future_logs()[0].offset_lag, 0);
    log.append(&batch(100, 5, 1_000)).unwrap();
    assert_eq!(m.future_logs()[0].offset_lag, 5);
    let moved = m.finish_move(&mv, small()).unwrap();
    assert_eq!(values(&moved, 0).len(), 105);
    assert_eq!(m.log_dir_of("t-0").as_deref(), Some(b.as_path()));
    assert!(m.future_logs().is_empty());
    assert_eq!(partition_dirs(&[&a, &b], "t-0"), ["t-0"]);
}
