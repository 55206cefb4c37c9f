//! `tidelog perf fetch`: what a consumer's fetch of many idle partitions costs the
//! broker, without and with a fetch session (KIP-227). It starts one `tidelog serve`
//! child process on 127.0.0.1, creates the topic `perf-fetch` with `--partitions`
//! partitions (no records: every partition idle) and, on one connection, for `--seconds`
//! seconds each:
//!
//! - sessionless: full Fetch requests (v12, session id 0, epoch -1, as librdkafka
//!   sends them) listing every partition, each answered with every partition;
//! - session: one full Fetch that opens a session (epoch 0), then incremental Fetch
//!   requests (the session's id, epochs 1, 2, ...) that list no partition, each
//!   answered with the partitions that changed (none).
//!
//! Each request has `max_wait_ms` 0, so the broker answers it at once: the figure is the
//! work of one fetch, not of a long poll. Reported for each: fetches, the broker's CPU
//! time per fetch (user and system, from `/proc/PID/stat`, the whole process), the
//! request and response sizes and the round trip p50/p99 seen by the client. The node is
//! stopped (SIGKILL) at the end, also on error; its log is in the run directory
//! (`--data` keeps it).

use std::path::Path;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName, fetch_request};
use kafka_protocol::protocol::StrBytes;

use crate::cli::PerfFetchArgs;
use crate::perf::{percentile_us, report_fields};
use crate::perf_cluster::one_node_with_empty_topic;
use crate::perf_groups::{Conn, error_name};
use crate::{CliResult, fail};

const TOPIC: &str = "perf-fetch";
const LABEL: &str = "fetch";
/// Kafka 2.7's Fetch: topics by name, fetch sessions, flexible encoding.
const FETCH_VERSION: i16 = 12;
/// Each partition's `partition_max_bytes` (Kafka's consumer default).
const PARTITION_MAX_BYTES: i32 = 1024 * 1024;
/// Clock ticks per second of `/proc/PID/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_S: f64 = 100.0;

/// What one mode measured.
struct Measured {
    fetches: u64,
    cpu_seconds: f64,
    request_bytes: usize,
    response_bytes: usize,
    /// Round trips, ns, sorted.
    round_trips: Vec<u64>,
}

/// The user and system CPU time of process `pid` so far, in seconds.
fn cpu_seconds(pid: u32) -> CliResult<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| fail!("cannot read /proc/{pid}/stat (the node's CPU time): {e}"))?;
    // The fields after the command name, which is in parentheses and may hold spaces:
    // utime and stime are the 14th and 15th fields of the line.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| fail!("/proc/{pid}/stat has no command name: {stat:?}"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| -> CliResult<f64> {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .map(|t| t as f64 / TICKS_PER_S)
            .ok_or_else(|| fail!("/proc/{pid}/stat field {} is not a number", i + 3))
    };
    // `after` starts at the 3rd field (state): utime is index 11, stime 12.
    Ok(tick(11)? + tick(12)?)
}

/// A Fetch of `partitions` partitions of [`TOPIC`] from offset 0 (all of them listed, or
/// none for an incremental fetch), in session `session_id` at `epoch`.
fn fetch_request(partitions: i32, (session_id, epoch): (i32, i32), list: bool) -> FetchRequest {
    let topics = if list {
        vec![
            fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partitions(
                    (0..partitions)
                        .map(|p| {
                            fetch_request::FetchPartition::default()
                                .with_partition(p)
                                .with_fetch_offset(0)
                                .with_partition_max_bytes(PARTITION_MAX_BYTES)
                        })
                        .collect(),
                ),
        ]
    } else {
        Vec::new()
    };
    FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(50 * 1024 * 1024)
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

/// Sends `request` on `conn` and reads its answer: the response and its size in bytes
/// (with its length prefix); the response's top-level error fails the run.
fn fetch(conn: &mut Conn, request: &FetchRequest) -> CliResult<(FetchResponse, usize)> {
    let correlation = conn.send(request, FETCH_VERSION)?;
    let (response, size) = conn.receive::<FetchRequest>(correlation, FETCH_VERSION)?;
    let addr = &conn.addr;
    if response.error_code != 0 {
        return Err(fail!(
            "{addr} refused a Fetch (session {}, epoch {}): {}",
            request.session_id,
            request.session_epoch,
            error_name(response.error_code)
        ));
    }
    if let Some(p) = response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.error_code != 0)
    {
        return Err(fail!(
            "{addr} answered partition {} of {TOPIC} with {}",
            p.partition_index,
            error_name(p.error_code)
        ));
    }
    Ok((response, size))
}

/// The encoded size of `request` as [`FETCH_VERSION`], with its header and length prefix.
fn request_size(conn: &Conn, request: &FetchRequest) -> CliResult<usize> {
    conn.frame(request, FETCH_VERSION).map(|f| f.len())
}

/// Fetches for `seconds` on `conn`, the node being process `pid`: sessionless (`session`
/// false) or incremental in a session opened first.
fn measure(conn: &mut Conn, pid: u32, a: &PerfFetchArgs, session: bool) -> CliResult<Measured> {
    let mut session_id = 0;
    if session {
        let (opened, _) = fetch(conn, &fetch_request(a.partitions, (0, 0), true))?;
        if opened.session_id == 0 {
            return Err(fail!(
                "the node opened no fetch session (session id 0 in the answer to epoch 0)"
            ));
        }
        let listed: usize = opened.responses.iter().map(|t| t.partitions.len()).sum();
        if listed != a.partitions as usize {
            return Err(fail!(
                "the fetch that opened the session answered {listed} partitions of {}",
                a.partitions
            ));
        }
        session_id = opened.session_id;
    }
    let first = match session {
        true => fetch_request(a.partitions, (session_id, 1), false),
        false => fetch_request(a.partitions, (0, -1), true),
    };
    let request_bytes = request_size(conn, &first)?;
    let mut round_trips = Vec::new();
    let mut response_bytes = 0;
    let mut epoch = 1;
    let cpu_before = cpu_seconds(pid)?;
    let started = Instant::now();
    let until = started + Duration::from_secs(a.seconds);
    while Instant::now() < until {
        let request = match session {
            true => fetch_request(a.partitions, (session_id, epoch), false),
            false => fetch_request(a.partitions, (0, -1), true),
        };
        let sent = Instant::now();
        let (answer, size) = fetch(conn, &request)?;
        round_trips.push(sent.elapsed().as_nanos() as u64);
        response_bytes = size;
        let listed: usize = answer.responses.iter().map(|t| t.partitions.len()).sum();
        let expected = if session { 0 } else { a.partitions as usize };
        if listed != expected {
            return Err(fail!(
                "a {} fetch was answered with {listed} partitions, not {expected}",
                if session {
                    "incremental"
                } else {
                    "sessionless"
                }
            ));
        }
        epoch = epoch.wrapping_add(1).max(1);
    }
    let cpu_seconds = cpu_seconds(pid)? - cpu_before;
    round_trips.sort_unstable();
    Ok(Measured {
        fetches: round_trips.len() as u64,
        cpu_seconds,
        request_bytes,
        response_bytes,
        round_trips,
    })
}

/// Runs `tidelog perf fetch`.
pub(crate) fn fetch_sessions(data: Option<&Path>, a: &PerfFetchArgs) -> CliResult {
    let (dir, mut nodes) =
        one_node_with_empty_topic(data, "perf fetch", LABEL, TOPIC, a.partitions)?;
    let base = dir.path().to_path_buf();
    let pid = nodes.pids()[0];
    let mut conn = Conn::open(&nodes.bootstrap())?;
    // A first sessionless fetch opens every partition's log before anything is timed.
    fetch(&mut conn, &fetch_request(a.partitions, (0, -1), true))?;
    let sessionless = measure(&mut conn, pid, a, false)?;
    let session = measure(&mut conn, pid, a, true)?;
    nodes.check_alive(&base, LABEL)?;
    drop(nodes);
    report(a, &sessionless, &session)
}

fn report(a: &PerfFetchArgs, sessionless: &Measured, session: &Measured) -> CliResult {
    let per_fetch = |m: &Measured| m.cpu_seconds * 1e6 / m.fetches.max(1) as f64;
    let mut fields: Vec<(String, String)> = vec![
        ("partitions".into(), a.partitions.to_string()),
        ("seconds".into(), a.seconds.to_string()),
        ("fetch_version".into(), FETCH_VERSION.to_string()),
    ];
    for (label, m) in [("sessionless", sessionless), ("session", session)] {
        fields.push((format!("{label}_fetches"), m.fetches.to_string()));
        fields.push((
            format!("{label}_cpu_us_per_fetch"),
            format!("{:.1}", per_fetch(m)),
        ));
        fields.push((
            format!("{label}_request_bytes"),
            m.request_bytes.to_string(),
        ));
        fields.push((
            format!("{label}_response_bytes"),
            m.response_bytes.to_string(),
        ));
        fields.push((
            format!("{label}_p50_us"),
            format!("{:.1}", percentile_us(&m.round_trips, 0.5)),
        ));
        fields.push((
            format!("{label}_p99_us"),
            format!("{:.1}", percentile_us(&m.round_trips, 0.99)),
        ));
    }
    let ratio = per_fetch(session) / per_fetch(sessionless).max(1e-9);
    fields.push(("session_vs_sessionless_cpu".into(), format!("{ratio:.3}")));
    let summary = format!(
        "{} idle partitions: broker CPU per fetch {:.1} µs sessionless ({} B asked, {} B answered), {:.1} µs incremental in a session ({} B, {} B): {ratio:.2}x",
        a.partitions,
        per_fetch(sessionless),
        sessionless.request_bytes,
        sessionless.response_bytes,
        per_fetch(session),
        session.request_bytes,
        session.response_bytes,
    );
    let borrowed: Vec<(&str, String)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    report_fields("fetch", &summary, &borrowed, a.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_from_this_process() {
        let pid = std::process::id();
        let before = cpu_seconds(pid).expect("this process's stat");
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = cpu_seconds(pid).expect("this process's stat");
        assert!(after > before, "{before} -> {after}");
    }

    #[test]
    fn an_incremental_request_lists_no_partition_and_a_full_one_lists_all() {
        let full = fetch_request(1000, (0, -1), true);
        assert_eq!(full.topics[0].partitions.len(), 1000);
        assert_eq!((full.session_id, full.session_epoch), (0, -1));
        let incremental = fetch_request(1000, (7, 3), false);
        assert!(incremental.topics.is_empty());
        assert_eq!((incremental.session_id, incremental.session_epoch), (7, 3));
    }
}
