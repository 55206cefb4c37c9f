//! Store-and-forward (feature `client`): a [`Forwarder`] copies the records of local
//! topics (a [`Broker`]'s data directory: the application writes there whether or not
//! the network is up) to a remote Kafka-API cluster, and keeps at it across restarts
//! of either side and network loss, each record exactly once.
//!
//! Partition p of a local topic goes to partition p of the remote topic (of the same
//! name, or the one `rename` gives), created with as many partitions when it is missing;
//! when the counts differ, a keyed record goes where Kafka's murmur2 partitioner puts
//! its key and an unkeyed one to its partition modulo the remote count. Keys, values,
//! headers and timestamps are kept; records of one local partition arrive in their
//! local order. Records of aborted transactions are not forwarded (the forwarder reads
//! committed).
//!
//! **Exactly once.** Each forwarded record carries two headers: [`SOURCE_HEADER`]
//! (`NAME/TOPIC/PARTITION`) and [`OFFSET_HEADER`] (its local offset). When a session
//! starts (the process started, or the last one failed and the outcome of what was in
//! flight is unknown), the forwarder reads the tail of every remote partition it
//! writes, backwards until it has found its last record of each local partition (or
//! the partition's start), and resumes after it: what reached the remote is not sent
//! again, what did not is. The network [`Producer`] sends the records in chunks (up to
//! 256 KiB each) and the chunks in transactions (of up to 100 ms) of the transactional
//! id `tidelog-forward-NAME`, with `acks=all`: a session's `init_transactions` fences
//! the producer of the session before it (a produce request that session left on the
//! wire is refused when it lands) and aborts the transaction it left open, so the tail
//! it then reads is final, and the scan counts a transactional record only once its
//! transaction's marker says it committed. Readers of the remote topic see each record once with
//! `isolation.level=read_committed`; a reader of uncommitted records also sees the
//! copies of a transaction whose session was killed before its commit.
//!
//! With [`ForwarderBuilder::transactional`] false (a cluster without transactions) the
//! producer is only idempotent, so its retries neither duplicate nor reorder. Only
//! what is below a remote partition's high watermark can be read, so a batch the last
//! session's producer had appended on the leader and not yet replicated to every
//! in-sync replica (a follower down and not yet out of the ISR) would be missed, sent
//! again and then kept twice once the high watermark passes both. Each session
//! therefore records its producer ids in the data directory before it sends
//! (`tidelog-forward-NAME.producers`), and the next one asks each remote leader
//! (DescribeProducers) for the last sequence those producers appended: while it is
//! past the last one readable, the forwarder waits (its status says so) for the
//! remote side to commit or drop those records before it reads the tail; after
//! two minutes it resumes anyway and says so. A cluster that does not answer
//! DescribeProducers (Kafka before 2.8) is read without that wait. What this leaves
//! open is a produce request of a killed session still in the network when the next
//! session reads the tail: it can land after, as a second copy.
//! The positions committed locally (below) are a floor to that, so records the remote
//! side deleted by its retention are not sent twice.
//!
//! **The local log is the buffer.** The forwarder reads it incrementally (at most
//! `max.in.flight.records` sent and not acknowledged, and a bounded fetch), so a remote
//! side down for hours costs disk, not memory. Its position per partition (the first
//! record not acknowledged yet) is committed, when the data directory is opened for
//! writing, as the offsets of the consumer group `tidelog-forward-NAME` (so `tidelog
//! groups describe` shows it and its lag), and held as a retention hold on the local
//! partition, in memory and in a hold file of the partition directory
//! ([`PartitionLog::hold_retention_durably`](crate::storage::PartitionLog::hold_retention_durably)):
//! the retention of whichever process owns the directory (the application, when the
//! forwarder reads it read-only from another process) deletes nothing not forwarded
//! yet, across restarts of either, unless [`ForwarderBuilder::allow_retention_loss`]
//! says it may, in which case the records it deletes are counted in
//! [`ForwardStatus::records_lost`], logged, and skipped. [`Forwarder::release`] removes
//! the hold of a forwarder retired for good.
//!
//! **Metrics.** While it runs, a forwarder's status is part of its broker's
//! [`Broker::metrics`] ([`Metrics::forwarders`](crate::metrics::Metrics::forwarders)),
//! and so of the Prometheus text `tidelog serve --metrics-listen` serves
//! (`tidelog_forward_*`); it leaves them when it is stopped or dropped.
//!
//! ```no_run
//! use tidelog::{Broker, ClientConfig, forward::Forwarder};
//!
//! let broker = Broker::open("edge-data")?;
//! let forwarder = Forwarder::builder(&broker, ClientConfig::new("central:9092"))
//!     .topic("readings")
//!     .rename("readings", "site-7.readings")
//!     .start()?;
//! // ... the application produces to `broker` ...
//! println!("{} records behind", forwarder.status().records_behind());
//! forwarder.stop()?;
//! # Ok::<(), tidelog::Error>(())
//! ```

mod position;
#[cfg(feature = "server")] // the tests start a tidelog server
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};

pub use crate::metrics::{ForwardStatus, PartitionStatus};
pub use position::{OFFSET_HEADER, SOURCE_HEADER};

use crate::broker::{Broker, ForwarderProbe};
use crate::config::TopicConfig;
use crate::consumer::{Consumer, ConsumerConfig, IsolationLevel, OffsetReset};
use crate::error::{Error, Result};
use crate::producer::{DeliveryReceipt, Producer, ProducerRecord};
use crate::remote::{ClientConfig, Cluster};
use crate::topic::Partition;

/// Most bytes of records sent before their answers are awaited: below a batch the
/// remote side accepts (`max.message.bytes`, 1 MiB by default).
const CHUNK_BYTES: usize = 256 << 10;

/// How long a forwarder's transaction takes chunks at most before it is committed
/// (Kafka Streams' `commit.interval.ms` under exactly-once): what a commit costs (the
/// coordinator's record and a marker in each partition, each replicated) is paid once
/// per interval rather than once per chunk.
const TRANSACTION_TIME: Duration = Duration::from_millis(100);

/// What a session's sending keeps between chunks.
struct Sending {
    /// The producer ids on disk (an idempotent producer's).
    ids: Vec<i64>,
    /// When the open transaction began: it takes the chunks sent for up to
    /// [`TRANSACTION_TIME`], or until the local log has nothing more.
    open: Option<Instant>,
    /// Whether a chunk was acknowledged since the session began (its last error is
    /// cleared then).
    ok: bool,
}

impl Sending {
    /// True if a transaction has been open for `time` or longer.
    fn open_for(&self, time: Duration) -> bool {
        self.open.is_some_and(|t| t.elapsed() >= time)
    }
}

/// The prefix of the consumer group a forwarder commits its positions as.
pub const GROUP_PREFIX: &str = "tidelog-forward-";

/// The suffix of the file of the data directory recording a forwarder's last error.
const ERROR_SUFFIX: &str = ".last-error";

/// The suffix of the file of the data directory recording the producer ids of a
/// forwarder's last session.
const PRODUCERS_SUFFIX: &str = ".producers";

/// How long a session waits for records of the last session that a remote leader
/// appended and did not replicate yet (a follower down is dropped from the ISR after
/// `replica.lag.time.max.ms`, 30 s by default, and the high watermark moves on).
const UNREPLICATED_WAIT: Duration = Duration::from_secs(120);

/// Settings of a [`Forwarder`].
#[derive(Debug, Clone)]
pub struct ForwarderConfig {
    /// The forwarder's name: its records' source header and its group
    /// (`tidelog-forward-NAME`). Default `default`.
    pub name: String,
    /// The local topics to forward; empty forwards every topic that is not internal.
    pub topics: Vec<String>,
    /// Remote names of local topics, `(local, remote)`.
    pub renames: Vec<(String, String)>,
    /// Lets local retention delete records not forwarded yet (they are then lost to
    /// the remote side, counted and logged). Default false: the forwarder holds
    /// retention at its position.
    pub allow_retention_loss: bool,
    /// Most records sent and not acknowledged at once (`max.in.flight.records`).
    /// Default 10,000.
    pub max_in_flight_records: usize,
    /// How often positions are committed and the status refreshed. Default 1 s.
    pub commit_interval: Duration,
    /// The pause after a failed session before the next. Default 1 s.
    pub retry_backoff: Duration,
    /// Sends the records in remote transactions of the transactional id
    /// `tidelog-forward-NAME`, so that a session fences every request its predecessor
    /// left on the wire. Default true; false forwards with an idempotent producer only,
    /// for a cluster without transactions (see the module documentation for what that
    /// leaves open).
    pub transactional: bool,
}

impl Default for ForwarderConfig {
    fn default() -> Self {
        ForwarderConfig {
            name: "default".into(),
            topics: Vec::new(),
            renames: Vec::new(),
            allow_retention_loss: false,
            max_in_flight_records: 10_000,
            commit_interval: Duration::from_secs(1),
            retry_backoff: Duration::from_secs(1),
            transactional: true,
        }
    }
}

/// Builds a [`Forwarder`].
#[derive(Debug)]
#[must_use]
pub struct ForwarderBuilder {
    broker: Broker,
    client: ClientConfig,
    config: ForwarderConfig,
}

impl ForwarderBuilder {
    /// Names the forwarder (letters, digits, `.`, `_`, `-`): two forwarders of one data
    /// directory, or of several to one remote topic, need different names.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.config.name = name.into();
        self
    }

    /// Forwards this local topic (repeat for several); none given forwards every topic
    /// that is not internal.
    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.config.topics.push(topic.into());
        self
    }

    /// Writes local topic `from` to remote topic `to`.
    pub fn rename(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.config.renames.push((from.into(), to.into()));
        self
    }

    /// Lets local retention delete records not forwarded yet (see
    /// [`ForwarderConfig::allow_retention_loss`]).
    pub fn allow_retention_loss(mut self, yes: bool) -> Self {
        self.config.allow_retention_loss = yes;
        self
    }

    /// Most records sent and not acknowledged at once.
    pub fn max_in_flight_records(mut self, n: usize) -> Self {
        self.config.max_in_flight_records = n;
        self
    }

    /// Forwards in remote transactions (the default) or, with false, with an
    /// idempotent producer only (see [`ForwarderConfig::transactional`]).
    pub fn transactional(mut self, yes: bool) -> Self {
        self.config.transactional = yes;
        self
    }

    /// Replaces every setting.
    pub fn config(mut self, config: ForwarderConfig) -> Self {
        self.config = config;
        self
    }

    /// Checks the settings and the local topics, and starts forwarding on a thread of
    /// its own. The remote cluster need not be reachable yet: the forwarder connects,
    /// and reconnects, by itself ([`ForwardStatus::last_error`] says why it waits).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad name, rename or in-flight limit;
    /// [`Error::UnknownTopic`] for a local topic given that does not exist; an I/O
    /// error naming a partition's hold file that cannot be written (a directory this
    /// process may not write: forward with `allow_retention_loss`, which writes none).
    pub fn start(self) -> Result<Forwarder> {
        let c = &self.config;
        let bad = |key: &str, reason: String| Error::InvalidConfig {
            key: key.into(),
            reason,
        };
        check_name(&c.name)?;
        if c.max_in_flight_records == 0 {
            return Err(bad("max.in.flight.records", "0 is less than 1".into()));
        }
        for (from, to) in &c.renames {
            crate::config::validate_topic_name(to)?;
            if !c.topics.is_empty() && !c.topics.contains(from) {
                return Err(bad(
                    "rename",
                    format!("{from}={to}: {from} is not one of the topics forwarded"),
                ));
            }
        }
        for t in &c.topics {
            self.broker.topic(t)?;
        }
        let name = self.config.name.clone();
        let broker = self.broker.clone();
        let worker = Worker {
            broker: self.broker,
            client: self.client,
            config: self.config,
            written_error: RefCell::new(Some(String::new())),
            shared: Arc::new(Shared {
                stop: AtomicBool::new(false),
                wake: (Mutex::new(()), Condvar::new()),
                status: Mutex::new(ForwardStatus {
                    name,
                    ..ForwardStatus::default()
                }),
            }),
        };
        // Retention waits for the forwarder from now on, reachable remote or not.
        worker.hold_committed()?;
        let shared = Arc::clone(&worker.shared);
        // The broker's metrics show it while it runs (held weakly: it leaves when the
        // `Forwarder` is stopped or dropped, the thread having ended).
        let probe: Arc<dyn ForwarderProbe> = shared.clone();
        broker.register_forwarder(Arc::downgrade(&probe));
        let thread = std::thread::Builder::new()
            .name("tidelog-forward".into())
            .spawn(move || worker.run())
            .map_err(|e| Error::io("start the forwarder thread", "", e))?;
        Ok(Forwarder {
            shared,
            thread: Some(thread),
            broker,
        })
    }
}
/// Refuses a forwarder name that is not letters, digits, `.`, `_` and `-`.
fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(Error::InvalidConfig {
            key: "name".into(),
            reason: format!("{name:?}: use letters, digits, '.', '_' and '-'"),
        });
    }
    Ok(())
}

/// The file of the data directory `dir` recording the last error of forwarder `name`:
/// `tidelog-forward-NAME.last-error`, a checkpoint file whose payload is the time of
/// the error (i64, Unix ms) and its message (UTF-8); there only while the forwarder's
/// last session failed.
fn error_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{GROUP_PREFIX}{name}{ERROR_SUFFIX}"))
}

/// The file of the data directory `dir` recording the producer ids forwarder `name`'s
/// last session sent with: `tidelog-forward-NAME.producers`, a checkpoint file whose
/// payload is each id as an i64 (big-endian), written before the session sends.
fn producers_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{GROUP_PREFIX}{name}{PRODUCERS_SUFFIX}"))
}

/// The producer ids [`producers_path`] records (none when there is no file).
fn read_producers(path: &Path) -> Result<Vec<i64>> {
    let Some(payload) = crate::storage::read_checkpoint(path)? else {
        return Ok(Vec::new());
    };
    if payload.len() % 8 != 0 {
        return Err(Error::corrupt(
            path.display(),
            0,
            format!("{} bytes are not a list of producer ids", payload.len()),
        ));
    }
    Ok(payload
        .chunks_exact(8)
        .map(|c| i64::from_be_bytes(c.try_into().expect("8 bytes")))
        .collect())
}

/// Records `ids` at [`producers_path`], durably.
fn write_producers(path: &Path, ids: &[i64]) -> Result<()> {
    let payload: Vec<u8> = ids.iter().flat_map(|id| id.to_be_bytes()).collect();
    crate::storage::write_checkpoint(path, &payload)
}

/// Reads the last error [`error_path`] records: its time and message.
fn read_last_error(path: &Path) -> Result<Option<(SystemTime, String)>> {
    let Some(payload) = crate::storage::read_checkpoint(path)? else {
        return Ok(None);
    };
    let bad = || Error::corrupt(path.display(), 10, "not a forwarder's last error");
    let (ms, message) = payload.split_first_chunk::<8>().ok_or_else(bad)?;
    let ms = u64::try_from(i64::from_be_bytes(*ms)).map_err(|_| bad())?;
    let message = std::str::from_utf8(message).map_err(|_| bad())?;
    Ok(Some((
        UNIX_EPOCH + Duration::from_millis(ms),
        message.to_string(),
    )))
}

/// Records (`Some`) or removes (`None`) the last error at [`error_path`].
fn write_last_error(path: &Path, error: Option<(SystemTime, &str)>) -> Result<()> {
    match error {
        Some((at, message)) => {
            let ms = at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let mut payload = ms.to_be_bytes().to_vec();
            payload.extend_from_slice(message.as_bytes());
            crate::storage::write_checkpoint(path, &payload)
        }
        None => match std::fs::remove_file(path) {
            Ok(()) => path.parent().map_or(Ok(()), crate::storage::sync_dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", path, e)),
        },
    }
}

/// Copies local topics to a remote cluster, exactly once; see the [module
/// documentation](self). Stops (after sending what it read and committing its
/// position) on [`stop`](Self::stop) or when dropped.
#[derive(Debug)]
pub struct Forwarder {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<()>>>,
    /// The local log, whose ends `wait_caught_up` compares the positions with.
    broker: Broker,
}

#[derive(Debug)]
struct Shared {
    stop: AtomicBool,
    wake: (Mutex<()>, Condvar),
    status: Mutex<ForwardStatus>,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Sleeps up to `d`, less if the forwarder is stopped meanwhile.
    fn pause(&self, d: Duration) {
        let mut g = self.wake.0.lock();
        if !self.stopping() {
            self.wake.1.wait_for(&mut g, d);
        }
    }
}

impl ForwarderProbe for Shared {
    fn forwarder_status(&self) -> Option<ForwardStatus> {
        (!self.stopping()).then(|| self.status.lock().clone())
    }
}

/// Partition `p` of local `topic` forwarded up to `position`, against its end now.
fn partition_at(
    topic: &str,
    p: &Partition,
    remote_topic: &str,
    position: i64,
) -> Result<PartitionStatus> {
    let end = p.last_stable_offset()?;
    Ok(PartitionStatus {
        topic: topic.to_string(),
        partition: p.index(),
        remote_topic: remote_topic.to_string(),
        position,
        end,
        bytes_behind: if position < end {
            p.log().bytes_from(position)
        } else {
            0
        },
    })
}

impl Forwarder {
    /// A forwarder of `broker`'s topics to the cluster `client` connects to.
    pub fn builder(broker: &Broker, client: ClientConfig) -> ForwarderBuilder {
        ForwarderBuilder {
            broker: broker.clone(),
            client,
            config: ForwarderConfig::default(),
        }
    }

    /// Releases the retention holds the forwarder `name` left on `broker`'s partitions
    /// (in memory and in their hold files): for a forwarder retired for good, whose
    /// holds would otherwise keep its records forever. Returns how many hold files it
    /// removed. A forwarder started again holds again.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad name; an I/O error naming a hold file.
    pub fn release(broker: &Broker, name: &str) -> Result<usize> {
        let holder = format!("{GROUP_PREFIX}{name}");
        let mut released = 0;
        for topic in broker.topic_names() {
            for p in broker.topic(&topic)?.partitions().iter() {
                let log = p.log();
                log.hold_retention(&holder, None);
                if log.durable_retention_hold(&holder)?.is_some() {
                    log.hold_retention_durably(&holder, None)?;
                    released += 1;
                }
            }
        }
        Ok(released)
    }

    /// Where the forwarder `name` of `broker`'s topics stands, as it left it in the
    /// data directory (while it runs in another process, which may hold the directory,
    /// or after it stopped): per local partition it has a position in (the higher of
    /// the offset committed as its group and its retention hold), that position, the
    /// partition's end and the bytes between; and its last error, while its last
    /// session failed. The counters and each `remote_topic` are the running
    /// forwarder's own ([`status`](Self::status)): 0 and empty here.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad name; [`Error::Corrupt`] naming a damaged
    /// hold or last-error file; an I/O error naming a file.
    pub fn positions(broker: &Broker, name: &str) -> Result<ForwardStatus> {
        check_name(name)?;
        let group = format!("{GROUP_PREFIX}{name}");
        let consumer = Consumer::new(
            broker,
            ConsumerConfig {
                group_id: Some(group.clone()),
                ..ConsumerConfig::default()
            },
        );
        let mut names = broker.topic_names();
        names.sort();
        let mut partitions = Vec::new();
        for topic in names {
            let t = broker.topic(&topic)?;
            if t.is_internal() {
                continue;
            }
            for p in t.partitions().iter() {
                let Some(position) = known_position(&consumer, &group, &topic, p)? else {
                    continue;
                };
                partitions.push(partition_at(&topic, p, "", position)?);
            }
        }
        let error = read_last_error(&error_path(broker.dir(), name))?;
        Ok(ForwardStatus {
            name: name.to_string(),
            partitions,
            last_error_at: error.as_ref().map(|(at, _)| *at),
            last_error: error.map(|(_, e)| e),
            ..ForwardStatus::default()
        })
    }

    /// Where the forwarder stands now.
    pub fn status(&self) -> ForwardStatus {
        self.shared.status.lock().clone()
    }

    /// Waits up to `timeout` until every partition is forwarded to its end as the local
    /// log has it now (the status's ends are those of its last refresh, which may
    /// predate records written since); true if it is.
    pub fn wait_caught_up(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status();
            let at_end = |p: &PartitionStatus| {
                self.broker
                    .topic(&p.topic)
                    .and_then(|t| t.partition(p.partition))
                    .and_then(|l| l.last_stable_offset())
                    .is_ok_and(|end| p.position >= end)
            };
            if status.caught_up() && status.partitions.iter().all(at_end) {
                return true;
            }
            if Instant::now() >= deadline || self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops: sends what was read, waits for its acknowledgements (at most the remote
    /// client's `delivery.timeout.ms`), commits the position, and returns the error that
    /// ended the forwarder's thread, if one did.
    pub fn stop(mut self) -> Result<()> {
        self.halt()
    }

    fn halt(&mut self) -> Result<()> {
        self.shared.stop.store(true, Ordering::Release);
        {
            let _g = self.shared.wake.0.lock();
            self.shared.wake.1.notify_all();
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(Error::Closed("the forwarder's thread panicked".into()))),
            None => Ok(()),
        }
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// One local partition in a session.
struct Source {
    topic: String,
    partition: Partition,
    remote_topic: String,
    local_count: i32,
    remote_count: i32,
    /// Per remote partition: the local offset of the last record of this partition
    /// found there when the session started (-1: none); records up to it are skipped.
    last: Vec<i64>,
    /// Records sent and not acknowledged yet, in local order.
    in_flight: VecDeque<(i64, u64, DeliveryReceipt)>,
    /// The offset after the last record read.
    next: i64,
    /// The offset the partition's hold file holds, as this session last wrote it.
    held: Option<i64>,
}

impl Source {
    /// The first offset not acknowledged yet.
    fn position(&self) -> i64 {
        self.in_flight.front().map_or(self.next, |(o, _, _)| *o)
    }
}

struct Worker {
    broker: Broker,
    client: ClientConfig,
    config: ForwarderConfig,
    /// The last error as the data directory records it, None when it records none
    /// (at start, an empty message: unknown, a previous run may have left one).
    written_error: RefCell<Option<String>>,
    shared: Arc<Shared>,
}

/// Why a session ended.
enum End {
    Stopped,
    /// The local topics or partitions changed: start again with them.
    TopicsChanged,
}

impl Worker {
    /// The client settings: the user's, with `delivery.timeout.ms` 30 s unless given
    /// (a batch waits that long for an unreachable remote side before the session
    /// ends, and a stop waits for at most that).
    fn client(&self) -> ClientConfig {
        match self.client.get("delivery.timeout.ms") {
            Some(_) => self.client.clone(),
            None => self.client.clone().set("delivery.timeout.ms", 30_000),
        }
    }

    fn group(&self) -> String {
        format!("{GROUP_PREFIX}{}", self.config.name)
    }

    fn run(self) -> Result<()> {
        let mut cluster: Option<Cluster> = None;
        loop {
            if self.shared.stopping() {
                return Ok(());
            }
            self.shared.status.lock().sessions += 1;
            let c = match &cluster {
                Some(c) => c.clone(),
                None => match Cluster::connect(self.client()) {
                    Ok(c) => {
                        cluster = Some(c.clone());
                        c
                    }
                    Err(e) => {
                        self.failed(&e);
                        continue;
                    }
                },
            };
            match self.session(&c) {
                Ok(End::Stopped) => return Ok(()),
                Ok(End::TopicsChanged) => {}
                Err(e @ (Error::Closed(_) | Error::ReadOnly(_))) if self.broker.is_closed() => {
                    return Err(e);
                }
                Err(e) => self.failed(&e),
            }
        }
    }

    fn failed(&self, e: &Error) {
        let message = session_error(e);
        emit_error(&self.config.name, &message);
        self.shared.status.lock().errors += 1;
        self.note_error(message);
        self.shared.pause(self.config.retry_backoff);
    }

    /// Makes `message` the last error: in the status, and in the data directory when it
    /// changed (a failure to write it there is logged; forwarding goes on).
    fn note_error(&self, message: String) {
        let at = SystemTime::now();
        {
            let mut st = self.shared.status.lock();
            st.last_error = Some(message.clone());
            st.last_error_at = Some(at);
        }
        if self.written_error.borrow().as_ref() != Some(&message) {
            let path = error_path(self.broker.dir(), &self.config.name);
            match write_last_error(&path, Some((at, &message))) {
                Ok(()) => *self.written_error.borrow_mut() = Some(message),
                Err(e) => emit_error(&self.config.name, &e),
            }
        }
    }

    /// The remote cluster answered: there is no last error any more.
    fn clear_error(&self) {
        {
            let mut st = self.shared.status.lock();
            st.last_error = None;
            st.last_error_at = None;
        }
        if self.written_error.borrow().is_some() {
            let path = error_path(self.broker.dir(), &self.config.name);
            match write_last_error(&path, None) {
                Ok(()) => *self.written_error.borrow_mut() = None,
                Err(e) => emit_error(&self.config.name, &e),
            }
        }
    }

    /// The local topics to forward now, with their remote names.
    fn topics(&self) -> Result<Vec<(String, String)>> {
        let names = if self.config.topics.is_empty() {
            let mut all = Vec::new();
            for t in self.broker.topic_names() {
                if !self.broker.topic(&t)?.is_internal() {
                    all.push(t);
                }
            }
            all.sort();
            all
        } else {
            self.config.topics.clone()
        };
        Ok(names
            .into_iter()
            .map(|t| {
                let remote = self
                    .config
                    .renames
                    .iter()
                    .find(|(from, _)| *from == t)
                    .map_or_else(|| t.clone(), |(_, to)| to.clone());
                (t, remote)
            })
            .collect())
    }

    /// The local partitions to forward: (topic, partition count).
    fn layout(&self) -> Result<Vec<(String, i32)>> {
        let mut out = Vec::new();
        for (t, _) in self.topics()? {
            out.push((t.clone(), self.broker.topic(&t)?.partition_count()));
        }
        Ok(out)
    }

    fn session(&self, cluster: &Cluster) -> Result<End> {
        let layout = self.layout()?;
        let mut sources = Vec::new();
        for (topic, remote_topic) in self.topics()? {
            let local = self.broker.topic(&topic)?;
            let remote_count = match cluster.partition_count(&remote_topic) {
                Err(Error::UnknownTopic(_)) => {
                    cluster.create_topic_if_missing(
                        &remote_topic,
                        local.partition_count(),
                        TopicConfig::new(),
                    )?;
                    cluster.partition_count(&remote_topic)?
                }
                other => other?,
            };
            for partition in local.partitions().iter() {
                sources.push(Source {
                    topic: topic.clone(),
                    partition: partition.clone(),
                    remote_topic: remote_topic.clone(),
                    local_count: local.partition_count(),
                    remote_count,
                    last: vec![-1; remote_count as usize],
                    in_flight: VecDeque::new(),
                    next: 0,
                    held: None,
                });
            }
        }
        let writable = !self.broker.is_read_only();
        let mut consumer = Consumer::new(
            &self.broker,
            ConsumerConfig {
                group_id: Some(self.group()),
                auto_offset_reset: OffsetReset::Earliest,
                max_partition_fetch_bytes: 256 << 10,
                fetch_max_bytes: 1 << 20,
                check_crcs: true,
                isolation_level: IsolationLevel::ReadCommitted,
                client_rack: None,
            },
        );
        let assignment: Vec<(&str, i32)> = sources
            .iter()
            .map(|s| (s.topic.as_str(), s.partition.index()))
            .collect();
        consumer.assign(&assignment)?;
        // Hold retention at the known positions before anything else.
        let mut committed = Vec::with_capacity(sources.len());
        for s in &mut sources {
            let c = self.known_position(&consumer, &s.topic, &s.partition)?;
            if let Some(c) = c {
                self.hold(s, c)?;
            }
            committed.push(c);
        }
        // The producer comes first: in transactions its `init_transactions` fences the
        // last session's producer (a request of it still on the wire is refused when
        // it arrives) and aborts the transaction it left open, so the tail read next
        // is final. (An idempotent one sends nothing before the tail is read.)
        let producer = self.producer(cluster)?;
        if !self.recover(cluster, &mut sources)? {
            return Ok(End::Stopped);
        }
        // The remote cluster answered: whatever kept it away is over.
        self.clear_error();
        let mut skipped = 0;
        for (s, c) in sources.iter_mut().zip(&committed) {
            let log_start = s.partition.log_start_offset();
            let targets = position::targets(s.partition.index(), s.local_count, s.remote_count);
            let last: Vec<i64> = targets.map(|q| s.last[q as usize]).collect();
            let mut start = position::resume_at(*c, 0, &last);
            if start < log_start {
                self.lost(s, start, log_start);
                start = log_start;
            }
            s.next = start;
            consumer.seek(&s.topic, s.partition.index(), start)?;
            self.hold(s, start)?;
        }
        // An idempotent producer's id is on disk before anything is sent with it: the
        // next session asks the remote leaders about it (`recover`). The last
        // session's are settled by now. A transactional one's successor fences it
        // instead, so none is listed.
        let ids: Vec<i64> = producer
            .remote_producer_id()
            .filter(|_| !self.config.transactional)
            .map(|(id, _)| id)
            .into_iter()
            .collect();
        write_producers(&self.producers_path(), &ids)?;
        let mut sending = Sending {
            ids,
            open: None,
            ok: false,
        };
        self.publish(&mut sources, writable.then_some(&mut consumer))?;
        // What each source's records carry in `SOURCE_HEADER`, made once.
        let source_headers: Vec<String> = sources
            .iter()
            .map(|s| position::source(&self.config.name, &s.topic, s.partition.index()))
            .collect();
        let mut last_commit = Instant::now();
        let result = loop {
            if self.shared.stopping() {
                // Not a transaction left open: it would hold the last stable offset of
                // its remote partitions (what readers of committed records get to)
                // until the coordinator aborts it at its timeout.
                break self
                    .settle(&producer, &mut sources, &mut sending, true)
                    .map(|()| End::Stopped);
            }
            let records = consumer.poll(Duration::from_millis(50))?;
            let caught_up = records.is_empty();
            let (mut chunk_bytes, mut chunk_records) = (0, 0);
            let mut failed = None;
            for r in records.iter() {
                let r = r?;
                let Some(i) = sources
                    .iter()
                    .position(|s| s.topic == r.topic && s.partition.index() == r.partition)
                else {
                    continue;
                };
                let s = &mut sources[i];
                if r.offset > s.next && s.in_flight.is_empty() {
                    let log_start = s.partition.log_start_offset();
                    if log_start > s.next {
                        let (from, to) = (s.next, log_start.min(r.offset));
                        self.lost(s, from, to);
                    }
                }
                s.next = r.offset + 1;
                let q = position::target(r.key, r.partition, s.local_count, s.remote_count);
                if position::already_forwarded(r.offset, s.last[q as usize]) {
                    skipped += 1;
                    continue;
                }
                let mut digits = [0u8; 20];
                let offset = position::decimal(r.offset, &mut digits);
                let ours = [
                    (SOURCE_HEADER, source_headers[i].as_bytes()),
                    (OFFSET_HEADER, offset),
                ];
                // A record without headers of its own (the usual case) sends these two
                // as they are: no allocation a record.
                let theirs: Vec<(&str, &[u8])>;
                let headers: &[(&str, &[u8])] = if r.headers.is_empty() {
                    &ours
                } else {
                    theirs = r
                        .headers
                        .iter()
                        .filter(|(k, _)| *k != SOURCE_HEADER && *k != OFFSET_HEADER)
                        .map(|(k, v)| (k, v.unwrap_or_default()))
                        .chain(ours)
                        .collect();
                    &theirs
                };
                let bytes = r.key.map_or(0, <[u8]>::len)
                    + r.value.map_or(0, <[u8]>::len)
                    + headers
                        .iter()
                        .map(|(k, v)| k.len() + v.len())
                        .sum::<usize>();
                // A record's overhead in a batch is at most a few dozen bytes. A chunk
                // that this record would take past the limit is settled first.
                let size = bytes + 64;
                if chunk_records > 0
                    && (chunk_bytes + size > CHUNK_BYTES
                        || chunk_records >= self.config.max_in_flight_records)
                {
                    let due = sending.open_for(TRANSACTION_TIME);
                    if let Err(e) = self.settle(&producer, &mut sources, &mut sending, due) {
                        failed = Some(e);
                        break;
                    }
                    (chunk_bytes, chunk_records) = (0, 0);
                }
                if self.config.transactional && sending.open.is_none() {
                    producer.begin_transaction()?;
                    sending.open = Some(Instant::now());
                }
                let s = &mut sources[i];
                let record = ProducerRecord {
                    key: r.key,
                    value: r.value,
                    headers,
                    partition: Some(q),
                    timestamp: Some(r.timestamp),
                };
                let receipt = producer.send_async(&s.remote_topic, record)?;
                s.in_flight.push_back((r.offset, bytes as u64, receipt));
                chunk_bytes += size;
                chunk_records += 1;
            }
            if skipped > 0 {
                self.shared.status.lock().records_skipped += skipped;
                skipped = 0;
            }
            if let Some(e) = failed {
                break Err(e);
            }
            // Committed when it is old enough, when nothing more came, and before the
            // topics are looked at (they may have changed: the loop ends). A stop
            // commits it at the top of the loop.
            let due = caught_up
                || sending.open_for(TRANSACTION_TIME)
                || last_commit.elapsed() >= self.config.commit_interval;
            if let Err(e) = self.settle(&producer, &mut sources, &mut sending, due) {
                break Err(e);
            }
            if last_commit.elapsed() >= self.config.commit_interval {
                last_commit = Instant::now();
                self.publish(&mut sources, writable.then_some(&mut consumer))?;
                if self.layout()? != layout {
                    break Ok(End::TopicsChanged);
                }
            }
        };
        // Nothing is left unsent: `settle` waited for every batch (a failed one ends
        // the session, whose successor finds what reached the remote side).
        let _ = producer.close();
        let end = result?;
        self.publish(&mut sources, writable.then_some(&mut consumer))?;
        Ok(end)
    }

    /// Sends the open batches and waits for their answers (the remote client's
    /// `delivery.timeout.ms` at most), commits the open transaction when `commit` says
    /// so, and counts what was acknowledged: with transactions, only once the commit
    /// is. A producer id an idempotent producer took since (after a batch failed for
    /// good) joins the ids on disk.
    fn settle(
        &self,
        producer: &Producer,
        sources: &mut [Source],
        sending: &mut Sending,
        commit: bool,
    ) -> Result<()> {
        let Sending { ids, open, ok } = sending;
        if sources.iter().all(|s| s.in_flight.is_empty()) {
            return Ok(());
        }
        let flushed = if commit && open.take().is_some() {
            producer.commit_transaction()
        } else {
            producer.flush()
        };
        if self.config.transactional {
            // Not committed: nothing of the transaction counts (the next session's
            // `init_transactions` aborts it, and its scan skips what it holds).
            flushed.as_ref().map_err(Clone::clone)?;
            if open.is_some() {
                return Ok(());
            }
        } else if let Some((id, _)) = producer.remote_producer_id()
            && !ids.contains(&id)
        {
            ids.push(id);
            write_producers(&self.producers_path(), ids)?;
        }
        let (records, bytes) = acknowledged(sources);
        if records > 0 {
            let partitions = partition_status(sources)?;
            {
                let mut st = self.shared.status.lock();
                st.partitions = partitions;
                st.records_forwarded += records;
                st.bytes_forwarded += bytes;
            }
            if !*ok {
                self.clear_error();
                *ok = true;
            }
        }
        flushed?;
        match sources.iter().find_map(|s| s.in_flight.front()) {
            None => Ok(()),
            Some(_) => {
                let e = sources
                    .iter_mut()
                    .find_map(|s| s.in_flight.pop_front())
                    .map(|(_, _, r)| r.wait());
                match e {
                    Some(Err(e)) => Err(e),
                    _ => Err(Error::Timeout("a forwarded batch was not answered".into())),
                }
            }
        }
    }

    /// The session's producer: one open batch per remote partition, sealed only by
    /// `settle`, so a batch that fails for good is never followed by a later one of its
    /// partition and what reached a remote partition is a prefix of what was sent to
    /// it. Transactional (and registered: the last session's producer fenced) unless
    /// the forwarder is told otherwise.
    fn producer(&self, cluster: &Cluster) -> Result<Producer> {
        let builder = Producer::builder(cluster)
            .linger(Duration::from_secs(24 * 3600))
            .batch_size(2 * CHUNK_BYTES);
        if !self.config.transactional {
            return builder.build();
        }
        let producer = builder.transactional_id(self.group()).build()?;
        producer.init_transactions()?;
        Ok(producer)
    }

    fn producers_path(&self) -> PathBuf {
        producers_path(self.broker.dir(), &self.config.name)
    }

    /// Finds, for every source, the last record of it in each of its remote targets,
    /// once no record the last session sent is appended there and unreadable
    /// ([`settled_tail`](Self::settled_tail)). False when the forwarder was stopped
    /// meanwhile.
    fn recover(&self, cluster: &Cluster, sources: &mut [Source]) -> Result<bool> {
        let ours = read_producers(&self.producers_path())?;
        let mut by_remote: HashMap<(String, i32), Vec<usize>> = HashMap::new();
        for (i, s) in sources.iter().enumerate() {
            for q in position::targets(s.partition.index(), s.local_count, s.remote_count) {
                by_remote
                    .entry((s.remote_topic.clone(), q))
                    .or_default()
                    .push(i);
            }
        }
        for ((topic, q), ids) in by_remote {
            let wanted: HashMap<Vec<u8>, usize> = ids
                .iter()
                .map(|&i| {
                    let s = &sources[i];
                    (
                        position::source(&self.config.name, &s.topic, s.partition.index())
                            .into_bytes(),
                        i,
                    )
                })
                .collect();
            let Some(found) = self.settled_tail(cluster, &topic, q, &wanted, &ours)? else {
                return Ok(false);
            };
            for (i, last) in found {
                sources[i].last[q as usize] = last;
            }
        }
        Ok(true)
    }

    /// [`last_forwarded`] of `wanted` in `partition` of remote `topic`, read once its
    /// leader holds no record of the producers `ours` (the last session's) that a
    /// reader cannot see yet ([`position::unreplicated`]): until then, or
    /// [`UNREPLICATED_WAIT`], it asks again every half second, the wait its last error.
    /// None when the forwarder is stopped meanwhile.
    fn settled_tail(
        &self,
        cluster: &Cluster,
        topic: &str,
        partition: i32,
        wanted: &HashMap<Vec<u8>, usize>,
        ours: &[i64],
    ) -> Result<Option<HashMap<usize, i64>>> {
        let deadline = Instant::now() + UNREPLICATED_WAIT;
        loop {
            // The leader first: what it appended then and is committed by the time
            // the tail is read is read; what is committed later is waited for.
            let leader: Vec<(i64, i16, i32)> = if ours.is_empty() {
                Vec::new()
            } else {
                match cluster.producer_sequences(topic, partition) {
                    Ok(list) => list
                        .iter()
                        .map(|p| (p.producer_id, p.epoch, p.last_sequence))
                        .collect(),
                    Err(Error::UnsupportedApi { .. }) => Vec::new(),
                    Err(e) => return Err(e),
                }
            };
            let to_read: Vec<i64> = position::appended_by(ours, &leader)
                .map(|(id, _, _)| *id)
                .collect();
            let (found, read) = last_forwarded(cluster, topic, partition, wanted, &to_read)?;
            let waiting = position::unreplicated(ours, &leader, &read);
            let Some(&(id, readable, appended)) = waiting.first() else {
                return Ok(Some(found));
            };
            let line = format!(
                "forwarder {}: remote partition {topic}-{partition} holds records its last session sent and the leader did not replicate yet (producer {id}: sequence {appended} appended, {readable} readable)",
                self.config.name
            );
            if Instant::now() >= deadline {
                let line = format!(
                    "{line}; resuming after {} s: those records are sent again, and are there twice if the remote side keeps them",
                    UNREPLICATED_WAIT.as_secs()
                );
                emit_loss(&line);
                self.note_error(line);
                return Ok(Some(found));
            }
            self.note_error(format!("{line}; waiting for them"));
            self.shared.pause(Duration::from_millis(500));
            if self.shared.stopping() {
                return Ok(None);
            }
        }
    }

    /// Holds retention of every local partition forwarded, in memory and durably, at
    /// its known position (its log start when none is known: nothing of it is
    /// forwarded yet); with `allow_retention_loss`, releases both holds.
    fn hold_committed(&self) -> Result<()> {
        let consumer = Consumer::new(
            &self.broker,
            ConsumerConfig {
                group_id: Some(self.group()),
                ..ConsumerConfig::default()
            },
        );
        for (topic, _) in self.topics()? {
            for p in self.broker.topic(&topic)?.partitions().iter() {
                let log = p.log();
                if self.config.allow_retention_loss {
                    log.hold_retention(&self.group(), None);
                    log.hold_retention_durably(&self.group(), None)?;
                    continue;
                }
                let at = self
                    .known_position(&consumer, &topic, p)?
                    .unwrap_or_else(|| p.log_start_offset());
                log.hold_retention(&self.group(), Some(at));
                log.hold_retention_durably(&self.group(), Some(at))?;
            }
        }
        Ok(())
    }

    /// The position of `p` as this forwarder left it: the higher of its committed
    /// offset and its durable retention hold (a read-only forwarder commits nothing;
    /// both are offsets below which every record was acknowledged).
    fn known_position(
        &self,
        consumer: &Consumer,
        topic: &str,
        p: &Partition,
    ) -> Result<Option<i64>> {
        known_position(consumer, &self.group(), topic, p)
    }

    /// Holds local retention at `offset` for this forwarder (unless loss is allowed):
    /// in memory, and in the partition's hold file when it moved.
    fn hold(&self, s: &mut Source, offset: i64) -> Result<()> {
        if self.config.allow_retention_loss {
            return Ok(());
        }
        let log = s.partition.log();
        log.hold_retention(&self.group(), Some(offset));
        if s.held != Some(offset) {
            log.hold_retention_durably(&self.group(), Some(offset))?;
            s.held = Some(offset);
        }
        Ok(())
    }

    /// Records `from..to` of `s` were deleted by retention before they were forwarded.
    fn lost(&self, s: &Source, from: i64, to: i64) {
        let n = (to - from).max(0) as u64;
        if n == 0 {
            return;
        }
        let line = format!(
            "forwarder {}: {n} records of {}-{} (offsets {from} to {}) were deleted by local retention before they were forwarded",
            self.config.name,
            s.topic,
            s.partition.index(),
            to - 1
        );
        emit_loss(&line);
        self.shared.status.lock().records_lost += n;
        self.note_error(line);
    }

    /// Commits the positions (when the directory is writable), moves the retention
    /// holds and refreshes the status.
    fn publish(&self, sources: &mut [Source], consumer: Option<&mut Consumer>) -> Result<()> {
        let positions: Vec<(&str, i32, i64)> = sources
            .iter()
            .map(|s| (s.topic.as_str(), s.partition.index(), s.position()))
            .collect();
        if let Some(c) = consumer {
            c.commit_offsets(&positions)?;
        }
        for s in sources.iter_mut() {
            let at = s.position();
            self.hold(s, at)?;
        }
        let partitions = partition_status(sources)?;
        self.shared.status.lock().partitions = partitions;
        Ok(())
    }
}

/// The position of `p` as the forwarder of group `group` left it: the higher of its
/// committed offset and its durable retention hold (a read-only forwarder commits
/// nothing; both are offsets below which every record was acknowledged).
fn known_position(
    consumer: &Consumer,
    group: &str,
    topic: &str,
    p: &Partition,
) -> Result<Option<i64>> {
    let committed = consumer.committed(topic, p.index())?;
    let held = p.log().durable_retention_hold(group)?;
    Ok(committed.max(held))
}

/// Where each source stands now.
fn partition_status(sources: &[Source]) -> Result<Vec<PartitionStatus>> {
    let mut partitions = Vec::with_capacity(sources.len());
    for s in sources {
        partitions.push(partition_at(
            &s.topic,
            &s.partition,
            &s.remote_topic,
            s.position(),
        )?);
    }
    Ok(partitions)
}

/// Pops the acknowledged records at the head of every source's queue: their count and
/// bytes. A failed one stays at the head (the caller reports it).
fn acknowledged(sources: &mut [Source]) -> (u64, u64) {
    let (mut records, mut bytes) = (0, 0);
    for s in sources {
        while let Some((_, b, r)) = s.in_flight.front() {
            if !r.is_done() || r.wait_timeout(Duration::ZERO).is_err() {
                break;
            }
            records += 1;
            bytes += *b;
            s.in_flight.pop_front();
        }
    }
    (records, bytes)
}

/// The local offset of the last record of each wanted source in `partition` of remote
/// `topic`, and the last sequence read of each producer, read backwards from its end
/// (the high watermark) in growing windows until every source and every producer of
/// `producers` is found or the partition's start is reached.
fn last_forwarded(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    wanted: &HashMap<Vec<u8>, usize>,
    producers: &[i64],
) -> Result<(HashMap<usize, i64>, position::Sequences)> {
    let uncommitted = IsolationLevel::ReadUncommitted;
    let start = cluster
        .list_offset(topic, partition, Cluster::EARLIEST, uncommitted)?
        .offset;
    let end = cluster
        .list_offset(topic, partition, Cluster::LATEST, uncommitted)?
        .offset;
    let location = format!("{topic}-{partition}");
    let mut found: HashMap<usize, i64> = HashMap::new();
    let mut read = position::Sequences::new();
    let mut txns = position::Transactions::default();
    let mut hi = end;
    let mut window = 1_000i64;
    while hi > start
        && (found.len() < wanted.len() || producers.iter().any(|p| !read.contains_key(p)))
    {
        let lo = (hi - window).max(start);
        let mut in_window = HashMap::new();
        let mut in_window_read = position::Sequences::new();
        let mut at = lo;
        while at < hi {
            let fetched =
                cluster.fetch(topic, partition, at, 1 << 20, Duration::ZERO, uncommitted)?;
            let next = position::scan(
                &fetched.records,
                (at, hi),
                wanted,
                (&mut in_window, &mut in_window_read, &mut txns),
                (&location, 64 << 20),
            )?;
            if next <= at {
                break;
            }
            at = next;
        }
        txns.end_window(&mut in_window);
        for (i, last) in in_window {
            // A later window's find is the larger: records of a source arrive in order.
            found.entry(i).or_insert(last);
        }
        for (p, last) in in_window_read {
            read.entry(p).or_insert(last);
        }
        hi = lo;
        window = (window * 4).min(1 << 20);
    }
    Ok((found, read))
}

/// What a failed session reports: its error, and when the remote cluster refuses the
/// forwarder's transactions (its principal may not write as the forwarder's
/// transactional id), the two ways on.
fn session_error(e: &Error) -> String {
    match e {
        Error::Api(a)
            if a.code == crate::error::ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                && matches!(a.resource, crate::error::Resource::TransactionalId(_)) =>
        {
            format!(
                "{e}: the remote cluster refuses this forwarder's transactions; allow its \
                 principal Write and Describe on that TransactionalId there, or forward \
                 without transactions (`tidelog forward --no-transactions`, \
                 `ForwarderBuilder::transactional(false)`)"
            )
        }
        _ => e.to_string(),
    }
}

#[cfg(feature = "server")]
fn emit_error(name: &str, e: &dyn std::fmt::Display) {
    tracing::warn!(forwarder = name, "forwarding paused, retrying: {e}");
}

#[cfg(not(feature = "server"))]
fn emit_error(_name: &str, _e: &dyn std::fmt::Display) {}

#[cfg(feature = "server")]
fn emit_loss(line: &str) {
    tracing::warn!("{line}");
}

#[cfg(not(feature = "server"))]
fn emit_loss(_line: &str) {}
