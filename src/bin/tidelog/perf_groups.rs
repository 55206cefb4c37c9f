//! `tidelog perf groups`: many consumer groups on a cluster. It starts three `tidelog
//! serve` child processes on 127.0.0.1 (as `perf cluster` does), creates the topic
//! `perf-groups`, finds each group's coordinator (FindCoordinator v4, the leader of the
//! group's `__consumer_offsets` partition) and then:
//!
//! - setup: makes every group exist with one OffsetCommit (standalone groups: generation
//!   -1, no member id); with `--members`, first a JoinGroup and the leader's SyncGroup
//!   (classic protocol, one member, the nodes' initial rebalance delay set to 0) and the
//!   commit with the member's generation. Retriable errors (a coordinator still
//!   loading, say) are retried until the setup deadline;
//! - memory: the nodes' anonymous resident memory (`RssAnon` of `/proc/PID/status`,
//!   summed) before the setup and once it is done, over the groups: the resident cost of
//!   an idle group (approximate: the allocator keeps what it freed; `cargo bench --bench
//!   groups` counts the coordinator's bytes exactly);
//! - commits: for `--seconds` seconds every group commits an offset of `perf-groups` once
//!   a second, group `i` of `N` at `i / N` s into each second (so the load is even), with
//!   `--members` a heartbeat every 3 s as well. A commit's latency runs from when it was
//!   due to when it was answered, so a connection that falls behind shows in the tail.
//!
//! Each node gets `--connections` connections, each carrying its groups' requests with
//! up to `--in-flight` of them sent and not yet answered (a node works on a
//! connection's OffsetCommits at once and answers them in order; the setup sends one at
//! a time). The nodes are stopped (SIGKILL) at the end, also on error; their logs are in
//! the run directory (`--data` keeps it).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest,
    OffsetCommitResponse, RequestHeader, ResponseHeader, SyncGroupRequest, TopicName,
    join_group_request, offset_commit_request, sync_group_request,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

use crate::cli::PerfGroupsArgs;
use crate::perf::{RunDir, percentile_us, report_fields};
use crate::perf_cluster::{Nodes, TopicSpec, create_topic};
use crate::{CliResult, fail};

/// The topic whose partition 0 every group commits an offset of.
const TOPIC: &str = "perf-groups";
const LABEL: &str = "groups";
const NODES: usize = 3;
const FIND_COORDINATOR_VERSION: i16 = 4;
const JOIN_VERSION: i16 = 7;
const SYNC_VERSION: i16 = 5;
const HEARTBEAT_VERSION: i16 = 4;
const COMMIT_VERSION: i16 = 8;
/// Group ids per FindCoordinator request.
const FIND_BATCH: usize = 1000;
/// How long the setup (coordinators found, every group made) may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(300);
/// How long one request may take before the run fails.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A member's heartbeats (Kafka's `heartbeat.interval.ms` default) and session.
const HEARTBEAT_EVERY: u64 = 3;
const SESSION_TIMEOUT_MS: i32 = 45_000;
const REBALANCE_TIMEOUT_MS: i32 = 60_000;

/// One connection to a node (also `perf fetch`'s).
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) addr: String,
    correlation: i32,
}

impl Conn {
    pub(crate) fn open(addr: &str) -> CliResult<Conn> {
        let resolved: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|e| fail!("the address {addr:?}: {e}"))?
            .collect();
        let first = resolved
            .first()
            .ok_or_else(|| fail!("the address {addr:?} resolves to nothing"))?;
        let stream = TcpStream::connect_timeout(first, REQUEST_TIMEOUT)
            .map_err(|e| fail!("cannot connect to {addr}: {e}"))?;
        stream.set_nodelay(true).ok();
        stream.set_read_timeout(Some(REQUEST_TIMEOUT)).ok();
        stream.set_write_timeout(Some(REQUEST_TIMEOUT)).ok();
        Ok(Conn {
            stream,
            addr: addr.to_string(),
            correlation: 0,
        })
    }

    /// Sends `request` as `version` and reads its answer.
    fn call<R: Request>(&mut self, request: &R, version: i16) -> CliResult<R::Response> {
        let correlation = self.send(request, version)?;
        self.receive::<R>(correlation, version).map(|(r, _)| r)
    }

    /// Reads the answer to request `correlation` (of type `R`, sent as `version`): the
    /// response and its size in bytes with its length prefix.
    pub(crate) fn receive<R: Request>(
        &mut self,
        correlation: i32,
        version: i16,
    ) -> CliResult<(R::Response, usize)> {
        read_response::<R>(&mut self.stream, &self.addr, correlation, version)
    }

    /// Sends `request` as `version`: its correlation id.
    pub(crate) fn send<R: Request>(&mut self, request: &R, version: i16) -> CliResult<i32> {
        self.correlation = self.correlation.wrapping_add(1);
        let buf = self.frame(request, version)?;
        self.stream
            .write_all(&buf)
            .map_err(|e| fail!("request (key {}) to {}: {e}", R::KEY, self.addr))?;
        Ok(self.correlation)
    }

    /// `request` as `version` with its header (the current correlation id) and length
    /// prefix, as [`send`](Self::send) writes it.
    pub(crate) fn frame<R: Request>(&self, request: &R, version: i16) -> CliResult<BytesMut> {
        frame(request, version, self.correlation, "tidelog-perf")
    }
}

/// `request` as `version` with its header (`correlation`, `client_id`) and length
/// prefix.
pub(crate) fn frame<R: Request>(
    request: &R,
    version: i16,
    correlation: i32,
    client_id: &'static str,
) -> CliResult<BytesMut> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str(client_id)));
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0; 4]);
    header
        .encode(&mut buf, R::header_version(version))
        .and_then(|()| request.encode(&mut buf, version))
        .map_err(|e| fail!("cannot encode a request (key {}): {e}", R::KEY))?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

/// Reads the answer to request `correlation` (of type `R`, sent as `version`) from
/// `stream`, connected to `addr`: the response and its size with its length prefix.
fn read_response<R: Request>(
    stream: &mut TcpStream,
    addr: &str,
    correlation: i32,
    version: i16,
) -> CliResult<(R::Response, usize)> {
    let io = |e: std::io::Error| fail!("response (key {}) from {addr}: {e}", R::KEY);
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).map_err(io)?;
    let len = i32::from_be_bytes(size).max(0) as usize;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).map_err(io)?;
    let mut body = Bytes::from(body);
    let answered = ResponseHeader::decode(&mut body, R::Response::header_version(version))
        .map_err(|e| fail!("cannot decode a response header from {addr}: {e}"))?;
    if answered.correlation_id != correlation {
        return Err(fail!(
            "{addr} answered correlation id {} to request {correlation}",
            answered.correlation_id,
        ));
    }
    R::Response::decode(&mut body, version)
        .map(|r| (r, 4 + len))
        .map_err(|e| fail!("cannot decode a response (key {}) from {addr}: {e}", R::KEY))
}

/// The first error code of an OffsetCommit response (0: none).
fn commit_error(resp: &OffsetCommitResponse) -> i16 {
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .find(|c| *c != 0)
        .unwrap_or(0)
}

/// Kafka's name of an error code.
pub(crate) fn error_name(code: i16) -> String {
    ResponseError::try_from_code(code).map_or_else(|| format!("error {code}"), |e| format!("{e:?}"))
}

/// True for the codes a client retries (Kafka's retriable errors).
fn retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
}

fn kstr(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A `ConsumerProtocol` message (version 0) naming `TOPIC` once: a subscription to it
/// (`partitions` None), or an assignment of its `partitions`; no user data.
fn consumer_protocol(partitions: Option<&[i32]>) -> Bytes {
    let mut b = BytesMut::new();
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&(TOPIC.len() as i16).to_be_bytes());
    b.extend_from_slice(TOPIC.as_bytes());
    if let Some(partitions) = partitions {
        b.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for p in partitions {
            b.extend_from_slice(&p.to_be_bytes());
        }
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    b.freeze()
}

/// One group of the run, as its client knows it.
struct PerfGroup {
    id: String,
    /// Where in each second it commits (`index / groups`).
    phase: Duration,
    generation: i32,
    member_id: String,
}

impl PerfGroup {
    fn commit(&self, offset: i64) -> OffsetCommitRequest {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(kstr(&self.id)))
            .with_generation_id_or_member_epoch(self.generation)
            .with_member_id(kstr(&self.member_id))
            .with_retention_time_ms(-1)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset)
                            .with_committed_leader_epoch(-1),
                    ]),
            ])
    }

    /// Commits `offset`: the error code (0 on success).
    fn send_commit(&self, conn: &mut Conn, offset: i64) -> CliResult<i16> {
        Ok(commit_error(
            &conn.call(&self.commit(offset), COMMIT_VERSION)?,
        ))
    }

    /// The member's heartbeat.
    fn heartbeat(&self) -> HeartbeatRequest {
        HeartbeatRequest::default()
            .with_group_id(GroupId(kstr(&self.id)))
            .with_generation_id(self.generation)
            .with_member_id(kstr(&self.member_id))
    }

    /// Joins the group as its only member and hands in the assignment (the leader's
    /// SyncGroup): 0 once the member has its generation, else the error code of the
    /// step that failed.
    fn join(&mut self, conn: &mut Conn) -> CliResult<i16> {
        let join = JoinGroupRequest::default()
            .with_group_id(GroupId(kstr(&self.id)))
            .with_session_timeout_ms(SESSION_TIMEOUT_MS)
            .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
            .with_member_id(kstr(&self.member_id))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![
                join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str("range"))
                    .with_metadata(consumer_protocol(None)),
            ]);
        let joined = conn.call(&join, JOIN_VERSION)?;
        if !joined.member_id.is_empty() {
            // Also with MEMBER_ID_REQUIRED (JoinGroup v4+): join again with this id.
            self.member_id = joined.member_id.to_string();
        }
        if joined.error_code != 0 {
            return Ok(joined.error_code);
        }
        let sync = SyncGroupRequest::default()
            .with_group_id(GroupId(kstr(&self.id)))
            .with_generation_id(joined.generation_id)
            .with_member_id(kstr(&self.member_id))
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(Some(StrBytes::from_static_str("range")))
            .with_assignments(vec![
                sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(kstr(&self.member_id))
                    .with_assignment(consumer_protocol(Some(&[0]))),
            ]);
        let code = conn.call(&sync, SYNC_VERSION)?.error_code;
        if code == 0 {
            self.generation = joined.generation_id;
        }
        Ok(code)
    }

    /// Makes the group exist (see the module documentation), retrying retriable
    /// errors until `deadline`.
    fn set_up(&mut self, conn: &mut Conn, members: bool, deadline: Instant) -> CliResult {
        loop {
            let joining = members && self.generation < 0;
            let code = match joining {
                true => self.join(conn)?,
                false => self.send_commit(conn, 0)?,
            };
            match code {
                0 if !joining => return Ok(()),
                // Joined: the commit comes next.
                0 => continue,
                _ => {}
            }
            let rejoin = code == ResponseError::MemberIdRequired.code();
            let again =
                rejoin || retriable(code) || code == ResponseError::RebalanceInProgress.code();
            if !again || Instant::now() >= deadline {
                return Err(fail!(
                    "group {} could not be set up on {}: {}",
                    self.id,
                    conn.addr,
                    error_name(code)
                ));
            }
            if !rejoin {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The coordinator's address of every group id, from FindCoordinator v4 sent to
/// `bootstrap`, retried until every group has one or `deadline`.
fn find_coordinators(bootstrap: &str, ids: &[String], deadline: Instant) -> CliResult<Vec<String>> {
    let mut found: Vec<Option<String>> = vec![None; ids.len()];
    let mut conn = Conn::open(bootstrap)?;
    let mut last = String::from("no answer yet");
    loop {
        let missing: Vec<usize> = (0..ids.len()).filter(|&i| found[i].is_none()).collect();
        if missing.is_empty() {
            return Ok(found.into_iter().flatten().collect());
        }
        for chunk in missing.chunks(FIND_BATCH) {
            let req = FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(chunk.iter().map(|&i| kstr(&ids[i])).collect());
            let resp = conn.call(&req, FIND_COORDINATOR_VERSION)?;
            for (&i, c) in chunk.iter().zip(&resp.coordinators) {
                if c.error_code == 0 && c.port > 0 {
                    found[i] = Some(format!("{}:{}", c.host, c.port));
                } else {
                    last = error_name(c.error_code);
                }
            }
        }
        if found.iter().any(Option::is_none) {
            if Instant::now() >= deadline {
                return Err(fail!(
                    "not every group had a coordinator within {SETUP_TIMEOUT:?}: {last}"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The summed `RssAnon` of processes `pids`, in bytes (0 where it cannot be read).
fn rss_anon(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
        .filter_map(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("RssAnon:")?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        })
        .sum::<u64>()
        * 1024
}

/// What one connection's commit run counted.
#[derive(Default)]
struct Counted {
    /// Latency of each commit answered without error (due to answered), ns.
    latencies: Vec<u64>,
    commit_errors: u64,
    heartbeats: u64,
    heartbeat_errors: u64,
    /// The first error code a commit or heartbeat got.
    first_error: Option<i16>,
}

/// The commits (and heartbeats with `members`) of `groups` on `conn` for `seconds`
/// seconds from `t0`, up to `in_flight` requests sent and not answered yet: this thread
/// sends them when they are due, another reads the answers (in order).
fn run_commits(
    conn: &mut Conn,
    groups: &[PerfGroup],
    (t0, seconds, members, in_flight): (Instant, u64, bool, usize),
) -> CliResult<Counted> {
    // (due, is a heartbeat, group, second): commits on the group's phase, heartbeats
    // half a second after it.
    let mut due: Vec<(Duration, bool, usize, u64)> = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for k in 0..seconds {
            due.push((Duration::from_secs(k) + group.phase, false, g, k));
            if members && k % HEARTBEAT_EVERY == 0 {
                let at = Duration::from_secs(k) + group.phase + Duration::from_millis(500);
                due.push((at, true, g, k));
            }
        }
    }
    due.sort_unstable_by_key(|d| d.0);
    let total = due.len();
    let mut reader = conn
        .stream
        .try_clone()
        .map_err(|e| fail!("cannot read from {}: {e}", conn.addr))?;
    let addr = conn.addr.clone();
    // The requests sent, in order, for the reader: (correlation id, due, heartbeat).
    // Its bound (with the one the reader waits on) keeps `in_flight` unanswered.
    let (sent, to_read) =
        std::sync::mpsc::sync_channel::<(i32, Instant, bool)>(in_flight.saturating_sub(1));
    std::thread::scope(|s| {
        let read = s.spawn(move || -> CliResult<Counted> {
            let mut counted = Counted {
                latencies: Vec::with_capacity(total),
                ..Counted::default()
            };
            for (correlation, when, heartbeat) in to_read {
                let code = if heartbeat {
                    counted.heartbeats += 1;
                    read_response::<HeartbeatRequest>(
                        &mut reader,
                        &addr,
                        correlation,
                        HEARTBEAT_VERSION,
                    )?
                    .0
                    .error_code
                } else {
                    commit_error(
                        &read_response::<OffsetCommitRequest>(
                            &mut reader,
                            &addr,
                            correlation,
                            COMMIT_VERSION,
                        )?
                        .0,
                    )
                };
                let answered = Instant::now();
                if code != 0 {
                    counted.first_error.get_or_insert(code);
                }
                match (heartbeat, code) {
                    (true, 0) => {}
                    (true, _) => counted.heartbeat_errors += 1,
                    (false, 0) => counted
                        .latencies
                        .push(answered.saturating_duration_since(when).as_nanos() as u64),
                    (false, _) => counted.commit_errors += 1,
                }
            }
            Ok(counted)
        });
        let sending = (|| -> CliResult {
            for (at, heartbeat, g, k) in due {
                let when = t0 + at;
                let now = Instant::now();
                if when > now {
                    std::thread::sleep(when - now);
                }
                // Handed to the reader first: this waits while `in_flight` are unanswered.
                let correlation = conn.correlation.wrapping_add(1);
                if sent.send((correlation, when, heartbeat)).is_err() {
                    // The reader failed: its error is the run's.
                    break;
                }
                let group = &groups[g];
                match heartbeat {
                    true => conn.send(&group.heartbeat(), HEARTBEAT_VERSION)?,
                    false => conn.send(&group.commit(k as i64 + 1), COMMIT_VERSION)?,
                };
            }
            Ok(())
        })();
        drop(sent);
        let counted = read
            .join()
            .map_err(|_| fail!("a perf thread stopped unexpectedly"))?;
        sending.and(counted)
    })
}

/// Runs `tidelog perf groups`. See the module documentation.
pub(crate) fn groups(data: Option<&Path>, a: &PerfGroupsArgs) -> CliResult {
    let dir = RunDir::new(data, "perf groups")?;
    let base = dir.path().to_path_buf();
    let mut nodes = Nodes::start_with(
        &base,
        LABEL,
        NODES,
        &["--group-initial-rebalance-delay-ms", "0"],
    )?;
    create_topic(&mut nodes, &base, LABEL, TOPIC, TopicSpec::single(1))?;
    let n = a.groups as usize;
    let ids: Vec<String> = (0..n).map(|i| format!("perf-group-{i:06}")).collect();
    let setup_started = Instant::now();
    let deadline = setup_started + SETUP_TIMEOUT;
    let bootstrap = nodes.bootstrap();
    let first = bootstrap.split(',').next().unwrap_or_default().to_string();
    let coordinators = find_coordinators(&first, &ids, deadline)?;
    // Groups by coordinator, dealt round-robin over its connections.
    let mut by_node: BTreeMap<String, Vec<Vec<PerfGroup>>> = BTreeMap::new();
    for (i, (id, addr)) in ids.into_iter().zip(coordinators).enumerate() {
        let conns = by_node
            .entry(addr)
            .or_insert_with(|| (0..a.connections).map(|_| Vec::new()).collect());
        let slot = i % conns.len();
        conns[slot].push(PerfGroup {
            id,
            phase: Duration::from_nanos((i as u64 * 1_000_000_000) / a.groups),
            generation: -1,
            member_id: String::new(),
        });
    }
    // Every connection opens before memory is read, so their threads count in both.
    let mut work: Vec<(Conn, Vec<PerfGroup>)> = Vec::new();
    for (addr, conns) in by_node {
        for groups in conns.into_iter().filter(|g| !g.is_empty()) {
            work.push((Conn::open(&addr)?, groups));
        }
    }
    let pids = nodes.pids();
    let rss_before = rss_anon(&pids);
    std::thread::scope(|s| -> CliResult {
        let handles: Vec<_> = work
            .iter_mut()
            .map(|(conn, groups)| {
                s.spawn(move || -> CliResult {
                    for g in groups.iter_mut() {
                        g.set_up(conn, a.members, deadline)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| fail!("a perf thread stopped unexpectedly"))??;
        }
        Ok(())
    })?;
    let setup_seconds = setup_started.elapsed().as_secs_f64();
    nodes.check_alive(&base, LABEL)?;
    // Let the followers' fetches and the coordinators settle before reading memory.
    std::thread::sleep(Duration::from_millis(500));
    let rss_idle = rss_anon(&pids);
    let t0 = Instant::now() + Duration::from_millis(100);
    let counted: Vec<Counted> = std::thread::scope(|s| -> CliResult<Vec<Counted>> {
        let handles: Vec<_> = work
            .iter_mut()
            .map(|(conn, groups)| {
                s.spawn(move || {
                    run_commits(
                        conn,
                        groups,
                        (t0, a.seconds, a.members, a.in_flight as usize),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| fail!("a perf thread stopped unexpectedly"))?
            })
            .collect()
    })?;
    let elapsed = t0.elapsed().as_secs_f64();
    nodes.check_alive(&base, LABEL)?;
    let rss_end = rss_anon(&pids);
    drop(nodes);
    report(
        a,
        &counted,
        (setup_seconds, elapsed),
        (rss_before, rss_idle, rss_end),
    )
}

/// Prints the run's figures.
fn report(
    a: &PerfGroupsArgs,
    counted: &[Counted],
    (setup_seconds, elapsed): (f64, f64),
    (rss_before, rss_idle, rss_end): (u64, u64, u64),
) -> CliResult {
    let mut lat: Vec<u64> = counted
        .iter()
        .flat_map(|c| c.latencies.iter().copied())
        .collect();
    lat.sort_unstable();
    let sum = |f: fn(&Counted) -> u64| counted.iter().map(f).sum::<u64>();
    let commits = lat.len() as u64;
    let commit_errors = sum(|c| c.commit_errors);
    let first_error = counted.iter().find_map(|c| c.first_error).map_or_else(
        || "null".to_string(),
        |code| format!("\"{}\"", error_name(code)),
    );
    let per_group = (rss_idle as f64 - rss_before as f64) / a.groups as f64;
    let pct = |q: f64| format!("{:.1}", percentile_us(&lat, q));
    let fields: Vec<(&str, String)> = vec![
        ("groups", a.groups.to_string()),
        ("nodes", NODES.to_string()),
        ("members", a.members.to_string()),
        ("connections", a.connections.to_string()),
        ("in_flight", a.in_flight.to_string()),
        ("seconds", a.seconds.to_string()),
        ("setup_seconds", format!("{setup_seconds:.3}")),
        ("commits", commits.to_string()),
        ("commit_errors", commit_errors.to_string()),
        ("first_error", first_error),
        (
            "commits_per_s",
            format!("{:.1}", commits as f64 / elapsed.max(1e-9)),
        ),
        ("commit_p50_us", pct(0.5)),
        ("commit_p99_us", pct(0.99)),
        ("commit_p999_us", pct(0.999)),
        ("heartbeats", sum(|c| c.heartbeats).to_string()),
        ("heartbeat_errors", sum(|c| c.heartbeat_errors).to_string()),
        ("rss_anon_before_bytes", rss_before.to_string()),
        ("rss_anon_idle_bytes", rss_idle.to_string()),
        ("rss_anon_end_bytes", rss_end.to_string()),
        ("rss_per_group_bytes", format!("{per_group:.0}")),
    ];
    let summary = format!(
        "{} groups{} on {NODES} nodes, {:.0} commits/s: commit p50 {} / p99 {} / p99.9 {} µs, {per_group:.0} bytes of resident memory per idle group, {commit_errors} commit errors",
        a.groups,
        if a.members { " of one member" } else { "" },
        commits as f64 / elapsed.max(1e-9),
        pct(0.5),
        pct(0.99),
        pct(0.999),
    );
    report_fields("groups", &summary, &fields, a.json)
}
