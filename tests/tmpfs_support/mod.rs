//! A small file system that fills up, for the disk-full tests: a tmpfs mounted by the
//! test (CI runs as root). Where mounting is impossible the test says so and is skipped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a given size, unmounted (lazily) when dropped.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as mount's `size=` option, e.g. `2m`) on a new
    /// temporary directory; None, after printing why, when this process cannot mount.
    pub fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED: cannot mount a {size} tmpfs to fill (needs root): {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount to make a {size} tmpfs to fill: {e}");
                None
            }
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes available to writers, as `stat -f` reports them.
    pub fn available(&self) -> u64 {
        let out = Command::new("stat")
            .args(["-f", "--format=%a %S"])
            .arg(self.path())
            .output()
            .expect("stat -f");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text
            .split_whitespace()
            .map(|n| n.parse::<u64>().expect("a number"));
        it.next().expect("blocks") * it.next().expect("block size")
    }

    /// Writes a file of `bytes` bytes (non-zero, so that it takes space) to hold room
    /// until it is removed.
    pub fn ballast(&self, bytes: usize) -> PathBuf {
        let p = self.path().join("ballast");
        std::fs::write(&p, vec![0xa5u8; bytes]).expect("write ballast");
        p
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: maps of its files may still be held by threads that are stopping.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
