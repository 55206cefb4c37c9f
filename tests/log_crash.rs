//! Crash test: a child process appends and syncs in a loop and is killed with SIGKILL at
//! random moments; after each kill the parent reopens the data directory and checks that
//!
//! * the directory lock died with the child,
//! * every batch the child acknowledged as synced ("synced <end offset>" on its stdout)
//!   is there, byte for byte,
//! * no corrupt batch is served (every batch read back has a valid CRC and is exactly
//!   the batch the child wrote at that offset),
//! * the torn tail is gone: every `.log` file is whole batches, nothing after them.
//!
//! The child is this test binary re-executed (`crash_child`, an ignored test) with
//! `TIDELOG_CRASH_DIR` set; batch contents are a pure function of their base offset, so
//! the parent can regenerate every byte. Some rounds also write a torn batch (a prefix
//! of the next one) after the data, as a crash in the middle of a write leaves it, so
//! that recovery's cut is exercised in every run. Kills: 30 + 25 = 55 in the suite.
//! Seeded: the kill moments vary with scheduling, never the checks.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tidelog::record::batches;
use tidelog::storage::{LogManager, PartitionLog};
use tidelog::{BatchBuilder, LogConfig};

const DIR_VAR: &str = "TIDELOG_CRASH_DIR";
const MODE_VAR: &str = "TIDELOG_CRASH_MODE";
const LOG: &str = "crash-0";

/// splitmix64: a tiny seeded generator (no dependency needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The two scenarios: small batches in small segments (many rolls, copied through the
/// map), or large batches (most over 64 KiB, so written with `pwritev`; long copies, so
/// a kill lands inside one more often).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Small,
    Large,
}

impl Mode {
    fn from_env() -> Mode {
        match std::env::var(MODE_VAR).as_deref() {
            Ok("large") => Mode::Large,
            _ => Mode::Small,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Mode::Small => "small",
            Mode::Large => "large",
        }
    }
    fn config(self) -> LogConfig {
        let mut c = LogConfig::default();
        match self {
            Mode::Small => {
                c.segment_bytes = 32 * 1024;
                c.index_interval_bytes = 512;
                c.index_max_bytes = 4096;
            }
            Mode::Large => {
                c.segment_bytes = 2 << 20;
                c.index_interval_bytes = 4096;
                c.index_max_bytes = 64 * 1024;
            }
        }
        c
    }
}

/// The batch the child appends at `base`, exactly as the log stores it (base offset
/// stamped). A pure function of `base` and the mode.
fn batch_at(base: i64, mode: Mode) -> Vec<u8> {
    let mut rng = Rng(base as u64 ^ 0xC0FF_EE00);
    let (records, max_value) = match mode {
        Mode::Small => (1 + rng.below(6), 300),
        Mode::Large => (1 + rng.below(3), 120_000),
    };
    let mut b = BatchBuilder::new();
    for i in 0..records {
        let len = rng.below(max_value) as usize;
        let fill = (base as u64).wrapping_mul(31).wrapping_add(i) as u8;
        let value: Vec<u8> = (0..len).map(|j| fill.wrapping_add(j as u8)).collect();
        let key = format!("k{}", base + i as i64);
        b.push(
            1_700_000_000_000 + base + i as i64,
            Some(key.as_bytes()),
            Some(&value),
            &[("base", &base.to_be_bytes())],
        );
    }
    let mut bytes = b.finish();
    tidelog::record::set_base_offset(&mut bytes, base);
    bytes
}

/// The child: appends (and now and then syncs) until it is killed.
#[test]
#[ignore = "child process of the crash tests, started by them with TIDELOG_CRASH_DIR"]
fn crash_child() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let mode = Mode::from_env();
    let mgr = LogManager::open(&dir).expect("child: open data dir");
    let log = mgr.open_log(LOG, mode.config()).expect("child: open log");
    let mut rng = Rng(log.log_end_offset() as u64);
    println!("opened {}", log.log_end_offset());
    loop {
        let base = log.log_end_offset();
        let bytes = batch_at(base, mode);
        let info = log.append(&bytes).expect("child: append");
        assert_eq!(info.base_offset, base);
        if rng.below(3) == 0 {
            log.sync().expect("child: sync");
            println!("synced {}", info.last_offset + 1);
        }
    }
}

/// Runs the child until a random moment and SIGKILLs it; returns the largest end offset
/// it acknowledged as synced.
fn run_and_kill(dir: &Path, mode: Mode, rng: &mut Rng) -> Option<i64> {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--quiet",
        ])
        .env(DIR_VAR, dir)
        .env(MODE_VAR, mode.name())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut synced = None;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(n) = line.strip_prefix("synced ") {
                synced = n.trim().parse::<i64>().ok().or(synced);
                let _ = tx.send(());
            }
        }
        synced
    });
    if rng.below(6) == 0 {
        // Now and then kill it early: while it opens and recovers the log.
        std::thread::sleep(Duration::from_millis(rng.below(15)));
    } else {
        // Otherwise once it is appending: after its first few syncs, plus a bit.
        let syncs = 1 + rng.below(4);
        let deadline = Instant::now() + Duration::from_secs(10);
        for _ in 0..syncs {
            let left = deadline.saturating_duration_since(Instant::now());
            if rx.recv_timeout(left).is_err() {
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(rng.below(8_000)));
    }
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("reap child");
    if status.signal() != Some(9) {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        panic!("the child ended by itself ({status}), not by SIGKILL:\n{err}");
    }
    reader.join().expect("reader thread")
}

/// Writes a prefix of the next batch after the data of the last segment, as a write cut
/// short by a crash leaves it. Returns false if there was no segment to damage.
fn write_torn_tail(log_dir: &Path, mode: Mode, rng: &mut Rng) -> bool {
    let Some(last) = log_files(log_dir).pop() else {
        return false;
    };
    let bytes = std::fs::read(&last).expect("read segment");
    let mut end = 0;
    let mut next = None;
    for b in batches(&bytes) {
        let Ok(b) = b else { break };
        end += b.len();
        next = Some(b.last_offset() + 1);
    }
    let Some(next) = next else { return false };
    let torn = batch_at(next, mode);
    // At least past the length field, so the tail is not mistaken for zero padding.
    let cut = 13 + rng.below(torn.len() as u64 - 14) as usize;
    let mut out = bytes[..end].to_vec();
    out.extend_from_slice(&torn[..cut]);
    std::fs::write(&last, out).expect("write torn tail");
    true
}

fn log_files(log_dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(log_dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "log"));
    v.sort();
    v
}

/// Reopens after a kill and checks everything; returns (log end, whether recovery cut).
fn verify(dir: &Path, mode: Mode, synced: i64, round: usize) -> (i64, bool) {
    let mgr = LogManager::open(dir).expect("the lock dies with the killed child");
    let log = mgr
        .open_log(LOG, mode.config())
        .expect("reopen after SIGKILL");
    let report = log.recovery_report().clone();
    let end = log.log_end_offset();
    assert!(
        end >= synced,
        "round {round}: synced up to {synced} but the log ends at {end}: {report:?}"
    );
    check_contents(&log, mode, round);
    // The torn tail is gone: each segment file is whole batches and nothing more.
    for path in log_files(&dir.join(LOG)) {
        let bytes = std::fs::read(&path).expect("read segment");
        let mut at = 0;
        for b in batches(&bytes) {
            let b = b.unwrap_or_else(|e| panic!("round {round}: {} holds {e}", path.display()));
            at += b.len();
        }
        assert_eq!(
            at,
            bytes.len(),
            "round {round}: {} has a tail",
            path.display()
        );
    }
    // Keep the directory small: retire what was checked (the next round then also
    // runs with a log start offset above zero).
    if log.size_bytes() > 3 << 20 {
        log.delete_records_before(end)
            .expect("delete checked records");
    }
    mgr.close().expect("close");
    (end, !report.truncated.is_empty())
}

/// Reads the whole log: every batch valid and equal to what the child appended.
fn check_contents(log: &PartitionLog, mode: Mode, round: usize) {
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    while at < end {
        let slice = log.read(at, 1 << 20).expect("read");
        assert!(
            !slice.is_empty(),
            "round {round}: empty read at {at} < {end}"
        );
        for b in batches(&slice) {
            let b = b.unwrap_or_else(|e| panic!("round {round}: corrupt batch served: {e}"));
            assert!(
                b.as_bytes() == batch_at(b.base_offset(), mode).as_slice(),
                "round {round}: batch at {} differs from the one appended",
                b.base_offset()
            );
            assert!(b.last_offset() >= at);
            at = b.last_offset() + 1;
        }
        assert_eq!(at, slice.next_offset());
    }
}

/// The crash tests run one at a time: a child spawned by one test inherits, between
/// fork and exec, the other test's open lock file, which can make that test's own child
/// find its directory still locked.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn crash_rounds(mode: Mode, rounds: usize, seed: u64, torn_every: usize) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    let mut rng = Rng(seed);
    let (mut synced, mut cuts, mut injected, mut prev_end) = (0i64, 0, 0, 0);
    for round in 0..rounds {
        if let Some(s) = run_and_kill(dir, mode, &mut rng) {
            synced = synced.max(s);
        }
        if round % torn_every == torn_every - 1 && write_torn_tail(&dir.join(LOG), mode, &mut rng) {
            injected += 1;
        }
        let (end, cut) = verify(dir, mode, synced, round);
        assert!(end >= prev_end.min(synced), "round {round}: end went back");
        prev_end = end;
        cuts += cut as usize;
    }
    assert!(
        injected > 0 && cuts >= injected,
        "every torn tail is cut and reported: {injected} written, {cuts} cut"
    );
    eprintln!(
        "{mode:?}: {rounds} SIGKILLs, synced up to {synced}, log end {prev_end}, \
         {cuts} recoveries cut a torn tail ({injected} written by the test)"
    );
}

#[test]
fn sigkill_while_appending_small_batches() {
    crash_rounds(Mode::Small, 30, 0x5EED_0001, 4);
}

#[test]
fn sigkill_while_appending_large_batches() {
    crash_rounds(Mode::Large, 25, 0x5EED_0002, 3);
}
