//! Helpers shared by the subcommands: opening the data directory, parsing `k=v` pairs
//! and times.

use crate::{CliResult, Fail, fail};
use std::path::Path;
use tidelog::coordinator::{CommitOffset, OffsetCommitRequest};
use tidelog::record::batches;
use tidelog::storage::LogSlice;
use tidelog::{Batch, Broker, Partition, Topic};

/// Opens the broker on `dir` read-only, for the commands that only read (`consume`
/// without `--group`, `topics list|describe`, `groups list|describe`): they work while
/// another process holds the directory (and follow what it appends) and on a directory
/// this user cannot write, and never write a byte of it. Says so on stderr when that is
/// why it matters: another process holds it, or it cannot be written.
///
/// A cluster node's data directory (a stopped node's disk, or one a node serves) opens
/// with the topics of the node's own metadata, said in one line on stderr.
pub(crate) fn open_broker_read_only(dir: &Path) -> CliResult<Broker> {
    exists(dir, false)?;
    #[cfg(feature = "server")]
    if dir.join("__cluster_metadata-0").join("raft-state").exists() {
        let (broker, node) = Broker::builder(dir).open_cluster_node_read_only()?;
        eprintln!(
            "note: {} is cluster node {}'s data directory: this is its last known metadata (metadata log entry {}{}, {}), and the records its replicas hold",
            dir.display(),
            node.node_id,
            node.index,
            node.cluster_id
                .as_deref()
                .map(|id| format!(" of cluster {id}"))
                .unwrap_or_default(),
            counted(node.topics as u64, "topic", "topics"),
        );
        return Ok(broker);
    }
    let broker = Broker::open_read_only(dir)?;
    if let Some(why) = read_only_reason(dir) {
        eprintln!("note: {} is opened read-only ({why})", dir.display());
    }
    Ok(broker)
}

/// Why a read-only opening of `dir` is worth a note: another process holds its lock (it
/// writes it), or this process cannot write it. Looks without writing or locking: the
/// kernel's list of file locks, and whether the lock file opens for writing.
pub(crate) fn read_only_reason(dir: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    if !writable(dir) {
        return Some("it cannot be written");
    }
    let lock = dir.join(".lock");
    let meta = std::fs::metadata(&lock).ok()?;
    let dev = meta.dev();
    // glibc's encoding of a device number (gnu_dev_major / gnu_dev_minor).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let id = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let held = locks.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 6 && f[1] == "FLOCK" && f[5] == id
    });
    held.then_some("another process holds it: what it appends is read as it comes")
}

/// Whether this process may create files in `dir`, found without trying: the mount's
/// options (`/proc/self/mountinfo`: `ro`), then the directory's mode against this
/// process's effective user and groups (`/proc/self/status`; root writes anything).
fn writable(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(canonical) = dir.canonicalize() else {
        return true;
    };
    if let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") {
        // The longest mount point that contains the directory is its mount.
        let mount = mounts
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                Some((*f.get(4)?, *f.get(5)?))
            })
            .filter(|(point, _)| canonical.starts_with(point))
            .max_by_key(|(point, _)| point.len());
        if mount.is_some_and(|(_, opts)| opts.split(',').any(|o| o == "ro")) {
            return false;
        }
    }
    let (Ok(meta), Ok(status)) = (
        std::fs::metadata(dir),
        std::fs::read_to_string("/proc/self/status"),
    ) else {
        return true;
    };
    let ids = |key: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    // Uid and Gid: real, effective, saved, filesystem.
    let (uid, gid, groups) = (ids("Uid:"), ids("Gid:"), ids("Groups:"));
    let euid = uid.get(1).copied().unwrap_or(0);
    if euid == 0 {
        return true;
    }
    let mode = meta.mode();
    if meta.uid() == euid {
        mode & 0o200 != 0
    } else if gid.get(1) == Some(&meta.gid()) || groups.contains(&meta.gid()) {
        mode & 0o020 != 0
    } else {
        mode & 0o002 != 0
    }
}

/// Checks that `dir` is a directory; one that does not exist is an error unless the
/// command creates it (`create`).
fn exists(dir: &Path, create: bool) -> CliResult {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(fail!("data directory {} is not a directory", dir.display())),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if create {
                Ok(())
            } else {
                Err(fail!(
                    "data directory {} does not exist (create a topic first: tidelog --data {} topics create NAME)",
                    dir.display(),
                    dir.display()
                ))
            }
        }
        Err(e) => Err(fail!("cannot read data directory {}: {e}", dir.display())),
    }
}

/// Opens the broker on `dir`. Commands that only read (`create == false`) refuse a
/// directory that does not exist rather than creating an empty one. When recovery has
/// many unflushed bytes to validate (after a crash), progress shows on a terminal.
pub(crate) fn open_broker(dir: &Path, create: bool) -> CliResult<Broker> {
    exists(dir, create)?;
    let before = tidelog::metrics::recovery_bytes_validated();
    let broker = crate::progress::while_running(
        format!("validating unflushed data in {}", dir.display()),
        crate::progress::Unit::Bytes,
        None,
        || tidelog::metrics::recovery_bytes_validated().saturating_sub(before),
        || Broker::open(dir),
    )?;
    report_recovery(&broker);
    Ok(broker)
}

/// Prints on stderr, one line each, what opening the broker moved out of the way:
/// partition directories of no topic (moved aside), and what recovery removed from the
/// logs (a torn or corrupt tail cut, segments after it removed): the partition, the
/// file, the offset, the bytes and records, and where the bytes were kept.
pub(crate) fn report_recovery(broker: &Broker) {
    for orphan in broker.orphaned_logs() {
        eprintln!("warning: {orphan}");
    }
    for name in broker.topics().unwrap_or_default() {
        let Ok(topic) = broker.topic(&name) else {
            continue;
        };
        for p in topic.partitions().iter() {
            for cut in &p.recovery_report().cuts {
                eprintln!(
                    "warning: recovery of partition {}-{} removed data: {cut}",
                    p.topic(),
                    p.index()
                );
            }
        }
    }
}

/// The data directory: `--data` if given, else the default.
pub(crate) fn data_dir(given: Option<&Path>) -> &Path {
    given.unwrap_or(Path::new(crate::cli::DEFAULT_DATA))
}

/// Connects to the node or cluster at `bootstrap` (`--bootstrap`) with the security
/// options of `target`; `data` is `--data` if it was given, which does not go with
/// `--bootstrap`.
#[cfg(feature = "server")]
pub(crate) fn admin_client(
    bootstrap: &str,
    target: &crate::cli::Bootstrap,
    data: Option<&Path>,
) -> CliResult<tidelog::admin::AdminClient> {
    Ok(admin_builder(bootstrap, target, data)?.connect()?)
}

/// The settings of a client of `bootstrap` with the security options of `target` (see
/// `admin_client`).
#[cfg(feature = "server")]
pub(crate) fn admin_builder(
    bootstrap: &str,
    target: &crate::cli::Bootstrap,
    data: Option<&Path>,
) -> CliResult<tidelog::admin::AdminClientBuilder> {
    use tidelog::security::{SaslMechanism, SecurityProtocol};
    only_bootstrap(bootstrap, data)?;
    let mut builder = tidelog::admin::AdminClient::builder(bootstrap).client_id("tidelog-cli");
    if let Some(p) = &target.security_protocol {
        let protocol: SecurityProtocol = p
            .parse()
            .map_err(|e| fail!("--security-protocol {p:?}: {e}"))?;
        builder = builder.security_protocol(protocol);
    }
    if let Some(m) = &target.sasl_mechanism {
        let mechanism = SaslMechanism::from_name(&m.to_ascii_uppercase()).ok_or_else(|| {
            fail!("--sasl-mechanism {m:?}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        })?;
        builder = builder.sasl_mechanism(mechanism);
    }
    if let Some(u) = &target.sasl_username {
        builder = builder.sasl_username(u);
    }
    let password = target
        .sasl_password
        .clone()
        .or_else(|| std::env::var("TIDELOG_SASL_PASSWORD").ok());
    if let Some(p) = password {
        builder = builder.sasl_password(p);
    }
    if let Some(ca) = &target.ssl_ca_location {
        builder = builder.ssl_ca_location(ca);
    }
    if let Some(cert) = &target.ssl_certificate_location {
        builder = builder.ssl_certificate_location(cert);
    }
    if let Some(key) = &target.ssl_key_location {
        builder = builder.ssl_key_location(key);
    }
    Ok(builder)
}

/// The error for `--data` given with `--bootstrap`.
#[cfg(feature = "server")]
pub(crate) fn only_bootstrap(bootstrap: &str, data: Option<&Path>) -> CliResult {
    match data {
        Some(dir) => Err(fail!(
            "--data {} and --bootstrap {bootstrap} name two places: give one (--bootstrap acts on a running node, which holds its data directory)",
            dir.display()
        )),
        None => Ok(()),
    }
}

/// The settings of a [`tidelog::Cluster`] at `bootstrap` (`--bootstrap`): Kafka's client
/// settings for the security options of `target`, sent with `client_id`.
#[cfg(feature = "server")]
pub(crate) fn client_config(
    bootstrap: &str,
    target: &crate::cli::Bootstrap,
    client_id: &str,
) -> tidelog::ClientConfig {
    let t = target;
    let mut c = tidelog::ClientConfig::new(bootstrap).set("client.id", client_id);
    let password = t
        .sasl_password
        .clone()
        .or_else(|| std::env::var("TIDELOG_SASL_PASSWORD").ok());
    let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    let settings = [
        ("security.protocol", t.security_protocol.clone()),
        ("sasl.mechanism", t.sasl_mechanism.clone()),
        ("sasl.username", t.sasl_username.clone()),
        ("sasl.password", password),
        ("ssl.ca.location", path(&t.ssl_ca_location)),
        (
            "ssl.certificate.location",
            path(&t.ssl_certificate_location),
        ),
        ("ssl.key.location", path(&t.ssl_key_location)),
    ];
    for (key, value) in settings {
        if let Some(v) = value {
            c = c.set(key, v);
        }
    }
    c
}

/// The error for `--bootstrap` in a build without the Kafka client.
#[cfg(not(feature = "server"))]
pub(crate) fn no_admin_client() -> Fail {
    fail!(
        "--bootstrap needs the Kafka client of the `server` feature, which this tidelog was built without (cargo install --features cli,server)"
    )
}

/// The outcome for `key` of an admin request about several topics or groups.
#[cfg(feature = "server")]
pub(crate) fn only<T>(
    mut results: std::collections::BTreeMap<String, tidelog::Result<T>>,
    key: &str,
) -> tidelog::Result<T> {
    results.remove(key).unwrap_or_else(|| {
        Err(tidelog::Error::Corrupt {
            location: "the broker's answer".into(),
            position: 0,
            reason: format!("no result for {key:?}"),
        })
    })
}

/// Closes the broker, reporting a failure to flush or close as an error.
pub(crate) fn close_broker(broker: Broker) -> CliResult {
    broker.close()?;
    Ok(())
}

/// The error for a batch of `slice` (read from `p`) at byte `at` of the slice that
/// failed its checks: names the segment file, the byte position in it and the partition.
fn batch_error(slice: &LogSlice, p: &Partition, at: usize, e: &tidelog::Error) -> Fail {
    let file = slice
        .path()
        .map_or_else(|| "an empty log".to_string(), |p| p.display().to_string());
    let reason = match e {
        tidelog::Error::Corrupt { reason, .. } => reason.clone(),
        other => other.to_string(),
    };
    fail!(
        "corrupt batch in {file} at byte {} ({}-{}): {reason}",
        slice.file_position() + at as u64,
        p.topic(),
        p.index()
    )
}

/// The batches of `slice` (read from `p`) with their byte position in the slice, each
/// checked (length, magic, CRC-32C); the first bad one ends the iteration with an error
/// naming the file and byte position.
pub(crate) fn checked_batches<'a>(
    slice: &'a LogSlice,
    p: &'a Partition,
) -> impl Iterator<Item = CliResult<(usize, Batch<'a>)>> + 'a {
    let mut iter = batches(slice);
    std::iter::from_fn(move || {
        let at = iter.position();
        Some(match iter.next()? {
            Ok(b) => Ok((at, b)),
            Err(e) => Err(batch_error(slice, p, at, &e)),
        })
    })
}

/// The partitions `only` of `topic` (all of them when `only` is empty).
pub(crate) fn select_partitions(topic: &Topic, only: &[i32]) -> CliResult<Vec<Partition>> {
    if only.is_empty() {
        return Ok(topic.partitions().to_vec());
    }
    let mut v = Vec::with_capacity(only.len());
    for &p in only {
        v.push(topic.partition(p)?);
    }
    Ok(v)
}

/// Commits `(partition, next offset)` pairs of `topic` for `group` as a "simple" commit
/// (no generation, no member), as the console tools do. `what` says what the commit is
/// for in the error message.
pub(crate) fn commit_offsets(
    broker: &Broker,
    group: &str,
    topic: &str,
    offsets: &[(i32, i64)],
    what: &str,
) -> CliResult {
    if offsets.is_empty() {
        return Ok(());
    }
    let results = broker
        .group_coordinator()
        .offset_commit(OffsetCommitRequest {
            group_id: group.to_string(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: offsets
                .iter()
                .map(|&(partition, offset)| CommitOffset {
                    topic: topic.to_string(),
                    partition,
                    offset,
                    leader_epoch: -1,
                    metadata: None,
                    commit_timestamp: None,
                })
                .collect(),
        });
    let refused = |e: &tidelog::coordinator::GroupError| {
        fail!("{what} of group {group:?} failed: {e} (a group with active members refuses it)")
    };
    let results = results.map_err(|e| refused(&e))?;
    match results
        .iter()
        .find_map(|r| r.result.as_ref().err().map(|e| (r, e)))
    {
        None => Ok(()),
        Some((r, e)) => Err(fail!(
            "{what} of group {group:?} for {}-{} failed: {e} (a group with active members refuses it)",
            r.topic,
            r.partition,
        )),
    }
}

/// `n` with its noun, singular for one: `counted(1, "record", "records")` is
/// "1 record", `counted(0, "batch", "batches")` is "0 batches".
pub(crate) fn counted(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Splits `KEY=VALUE`; `what` names the option for the error message.
pub(crate) fn parse_kv(s: &str, what: &str) -> CliResult<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(fail!("{what} {s:?} is not of the form KEY=VALUE")),
    }
}

/// A point in time given on the command line: milliseconds since the epoch, or an RFC
/// 3339 / ISO 8601 date `YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|±HH:MM]` (UTC when no zone
/// is given). `what` names the option for the error message.
pub(crate) fn parse_time(s: &str, what: &str) -> CliResult<i64> {
    let t = s.trim();
    if let Ok(ms) = t.parse::<i64>() {
        return Ok(ms);
    }
    parse_datetime(t).ok_or_else(|| {
        fail!(
            "{what} {s:?} is neither milliseconds since the epoch nor a date like 2024-05-01T12:00:00Z"
        )
    })
}

fn parse_datetime(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut ms = days_from_civil(year, month, day) * 86_400_000;
    let mut at = 10;
    if matches!(b.get(at), Some(b'T' | b't' | b' ')) {
        let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
        if b.get(at + 3) != Some(&b':') || h > 23 || m > 59 {
            return None;
        }
        ms += (h * 3600 + m * 60) * 1000;
        at += 6;
        if b.get(at) == Some(&b':') {
            let sec = num(at + 1, 2)?;
            if sec > 60 {
                return None;
            }
            ms += sec * 1000;
            at += 3;
            if b.get(at) == Some(&b'.') {
                let digits = b[at + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                if digits == 0 {
                    return None;
                }
                let frac = &s[at + 1..at + 1 + digits.min(3)];
                ms += frac.parse::<i64>().ok()? * 10i64.pow(3 - frac.len() as u32);
                at += 1 + digits;
            }
        }
    }
    match b.get(at) {
        None => Some(ms),
        Some(b'Z' | b'z') if at + 1 == b.len() => Some(ms),
        Some(&sign @ (b'+' | b'-')) if at + 6 == b.len() && b[at + 3] == b':' => {
            let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
            let offset = (h * 60 + m) * 60_000;
            Some(if sign == b'+' {
                ms - offset
            } else {
                ms + offset
            })
        }
        _ => None,
    }
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_the_singular_for_one() {
        assert_eq!(counted(1, "record", "records"), "1 record");
        assert_eq!(counted(0, "record", "records"), "0 records");
        assert_eq!(counted(2, "batch", "batches"), "2 batches");
    }

    #[test]
    fn times() {
        let t = |s| parse_time(s, "t").ok();
        assert_eq!(t("1700000000000"), Some(1_700_000_000_000));
        assert_eq!(t("1970-01-01"), Some(0));
        assert_eq!(t("2023-11-14T22:13:20Z"), Some(1_700_000_000_000));
        assert_eq!(t("2023-11-14T22:13:20.5Z"), Some(1_700_000_000_500));
        assert_eq!(t("2023-11-14T23:13:20+01:00"), Some(1_700_000_000_000));
        assert_eq!(t("2024-02-29 00:00"), Some(1_709_164_800_000));
        assert_eq!(t("2023-02-29"), None);
        assert_eq!(t("2023-13-01"), None);
        assert_eq!(t("yesterday"), None);
        assert_eq!(t("2023-11-14T22:13:20Zjunk"), None);
    }
}
