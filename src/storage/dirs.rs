//! Several log directories per manager (Kafka's `log.dirs`, JBOD): the health of each
//! one (a failed directory takes only its partitions offline) and where a new
//! partition goes (the directory holding the fewest, Kafka's rule).

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Suffix of a partition directory being moved into another log directory of the
/// same node (Kafka's `-future` replica): `<topic>-<partition>.<uuid>-future`.
pub const FUTURE_SUFFIX: &str = "-future";

/// Suffix of a partition directory retired by a move to another log directory, until
/// it is deleted: `<topic>-<partition>.<uuid>-delete`.
pub const DELETE_SUFFIX: &str = "-delete";

/// Each of `dirs` with why it failed (None: usable), in order. Reads flags only: never
/// waits for a log to open or close.
pub(crate) fn states(dirs: &[Arc<DirHealth>]) -> Vec<(PathBuf, Option<String>)> {
    dirs.iter()
        .map(|d| (d.path().to_path_buf(), d.failure()))
        .collect()
}

/// Whether one log directory is usable, shared by the manager and every log in it.
#[derive(Debug)]
pub(crate) struct DirHealth {
    path: PathBuf,
    failed: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl DirHealth {
    pub(crate) fn new(path: PathBuf) -> DirHealth {
        DirHealth {
            path,
            failed: AtomicBool::new(false),
            reason: Mutex::new(None),
        }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Marks the directory failed (the first reason is kept); its logs then refuse
    /// appends and reads with a storage error. Returns true the first time.
    pub(crate) fn fail(&self, reason: &str) -> bool {
        let mut r = self.reason.lock();
        if r.is_none() {
            *r = Some(reason.to_string());
        }
        drop(r);
        let first = !self.failed.swap(true, Ordering::AcqRel);
        if first {
            super::events::log_dir_failed(&self.path, reason);
        }
        first
    }

    /// Why the directory failed, None while it is usable.
    pub(crate) fn failure(&self) -> Option<String> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.reason.lock().clone()
    }

    /// Ok while usable; otherwise the storage error (KAFKA_STORAGE_ERROR on the wire)
    /// for `partition`.
    #[inline]
    pub(crate) fn check(&self, partition: &str) -> Result<()> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(self.offline_error(partition))
    }

    #[cold]
    fn offline_error(&self, partition: &str) -> Error {
        let reason = self.reason.lock().clone().unwrap_or_default();
        Error::io(
            "use partition",
            self.path.join(partition),
            std::io::Error::other(format!(
                "log directory {} is offline: {reason}",
                self.path.display()
            )),
        )
    }
}

/// The name of the partition a directory called `name` holds while it is moved in:
/// `events-0` for `events-0.0123abcd-future`; None for another name.
pub(crate) fn future_of(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(FUTURE_SUFFIX)?;
    let (partition, id) = stem.rsplit_once('.')?;
    (!partition.is_empty() && !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(partition)
}

/// The name of the partition a directory retired by a move held: `events-0` for
/// `events-0.0123abcd-delete`; None for another name.
pub(crate) fn retired_of(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(DELETE_SUFFIX)?;
    let (partition, id) = stem.rsplit_once('.')?;
    (!partition.is_empty() && !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(partition)
}

/// Makes `to` hold what `from` holds (files only, one level, as a partition directory
/// is), each file fsynced: a file already in `to` with the same length and
/// modification time is kept (a sealed segment copied by an earlier pass), one
/// missing from `from` is deleted. A file of `from` gone while it is copied (a
/// checkpoint replaced by the open log, a segment deleted by retention) is left out:
/// the pass made with the log closed copies what is there then. Returns the bytes
/// copied.
pub(crate) fn sync_copy(from: &Path, to: &Path) -> Result<u64> {
    sync_copy_paced(from, to, &mut |_| Ok(()))
}

/// Bytes copied at a time by [`sync_copy_paced`].
const COPY_CHUNK: usize = 64 * 1024;

/// [`sync_copy`] calling `before` with the size of each chunk before copying it (to
/// pace the copy or stop it: its error ends the copy).
pub(crate) fn sync_copy_paced(
    from: &Path,
    to: &Path,
    before: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<u64> {
    use crate::error::IoContext;
    std::fs::create_dir_all(to).ctx("create", to)?;
    let mut copied = 0;
    let mut names = std::collections::BTreeSet::new();
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(from).ctx("list", from)? {
        let entry = entry.ctx("list", from)?;
        let src_meta = match entry.metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            meta => meta.ctx("stat", entry.path())?,
        };
        if src_meta.is_file() {
            entries.push((entry.file_name(), src_meta));
        }
    }
    // Segments in offset order (their names are zero-padded offsets).
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, src_meta) in entries {
        let src = from.join(&name);
        let dst = to.join(&name);
        let same = std::fs::metadata(&dst).is_ok_and(|m| {
            m.len() == src_meta.len() && m.modified().ok() == src_meta.modified().ok()
        });
        if same {
            names.insert(name);
            continue;
        }
        match copy_file(&src, &dst, before)? {
            Some(n) => copied += n,
            // Gone since it was listed.
            None => continue,
        }
        names.insert(name);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&dst)
            .ctx("open", &dst)?;
        if let Ok(t) = src_meta.modified() {
            f.set_modified(t)
                .ctx("set the modification time of", &dst)?;
        }
        f.sync_all().ctx("fsync", &dst)?;
    }
    for entry in std::fs::read_dir(to).ctx("list", to)? {
        let entry = entry.ctx("list", to)?;
        if !names.contains(&entry.file_name()) {
            std::fs::remove_file(entry.path()).ctx("delete", entry.path())?;
        }
    }
    super::checkpoint::sync_dir(to)?;
    Ok(copied)
}

/// Copies `src` over `dst` chunk by chunk, `before` called ahead of each; the bytes
/// copied, None if `src` no longer exists.
fn copy_file(
    src: &Path,
    dst: &Path,
    before: &mut dyn FnMut(usize) -> Result<()>,
) -> Result<Option<u64>> {
    use crate::error::IoContext;
    use std::io::{Read, Write};
    let mut input = match std::fs::File::open(src) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        input => input.ctx("open", src)?,
    };
    let mut output = std::fs::File::create(dst).ctx("create", dst)?;
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut total = 0u64;
    loop {
        before(COPY_CHUNK)?;
        let n = input.read(&mut buf).ctx("read", src)?;
        if n == 0 {
            break;
        }
        output.write_all(&buf[..n]).ctx("write", dst)?;
        total += n as u64;
    }
    Ok(Some(total))
}

/// A partition directory `name` found in two log directories.
pub(crate) fn duplicate(name: &str, first: &Path, second: &Path) -> Error {
    Error::InvalidConfig {
        key: "log.dirs".into(),
        reason: format!(
            "partition directory {name} is in two log directories: {} and {} (keep one: move or delete the other)",
            first.join(name).display(),
            second.join(name).display()
        ),
    }
}

/// The index of the usable directory holding the fewest partitions (the first of
/// equals), given the count per directory; None if every one failed.
pub(crate) fn least_loaded(
    health: &[std::sync::Arc<DirHealth>],
    counts: &[usize],
) -> Option<usize> {
    (0..health.len())
        .filter(|&i| health[i].failure().is_none())
        .min_by_key(|&i| (counts.get(i).copied().unwrap_or(0), i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn future_names() {
        assert_eq!(future_of("events-0.0a1b-future"), Some("events-0"));
        assert_eq!(future_of("events-0-future"), None);
        assert_eq!(future_of("events-0.xyz-future"), None);
        assert_eq!(future_of("events-0"), None);
    }

    #[test]
    fn a_file_gone_while_copied_is_left_out() {
        let (from, to) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(from.path().join("a.log"), b"first").unwrap();
        std::fs::write(from.path().join("b.checkpoint"), b"second").unwrap();
        std::fs::write(to.path().join("b.checkpoint"), b"stale copy").unwrap();
        // The open log replaces its checkpoint while the first file is copied.
        let gone = from.path().join("b.checkpoint");
        let mut before = |_| {
            let _ = std::fs::remove_file(&gone);
            Ok(())
        };
        let copied = sync_copy_paced(from.path(), to.path(), &mut before).unwrap();
        assert_eq!(copied, 5);
        assert_eq!(std::fs::read(to.path().join("a.log")).unwrap(), b"first");
        assert!(!to.path().join("b.checkpoint").exists());
    }

    #[test]
    fn fewest_partitions_first_and_failed_skipped() {
        let h: Vec<Arc<DirHealth>> = (0..3)
            .map(|i| Arc::new(DirHealth::new(PathBuf::from(format!("/d{i}")))))
            .collect();
        assert_eq!(least_loaded(&h, &[2, 1, 1]), Some(1));
        h[1].fail("test");
        assert_eq!(least_loaded(&h, &[2, 1, 1]), Some(2));
        assert!(h[1].check("t-0").is_err());
        assert!(h[0].check("t-0").is_ok());
        h[0].fail("x");
        h[2].fail("y");
        assert_eq!(least_loaded(&h, &[0, 0, 0]), None);
    }
}
