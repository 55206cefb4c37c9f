//! `tidelog perf produce|consume|pubsub`, as kafka-producer-perf-test.
//!
//! `../shared/peers/compare.sh` drives these with exactly the options defined in
//! `cli.rs` and reads the one JSON object printed with `--json`. Payloads are generated
//! before the clock starts; records go through the public append path
//! (`BatchBuilder` then `Partition::append_batch`, B records per call) and are read back
//! through `Partition::read` with every batch's CRC checked, which touches every byte.
//! With `--keys K`, record `i` carries the key `key-{i % K:08}` and goes to the partition
//! the default partitioner picks for it (Kafka's murmur2); each partition then fills its
//! own batch. On a terminal, a progress bar shows on stderr (see `progress`).
//!
//! The paths applications call are measured beside those: `perf produce --producer`
//! sends every record through `tidelog::Producer` (`send_nowait`, Kafka's batching
//! defaults) and flushes; `perf consume --group` reads through a `GroupConsumer` member
//! of a new group (CRCs checked, as `check.crcs` does); `perf pubsub --producer` has
//! `--threads` threads sending through one `Producer` while a group member reads, and
//! its latency run sends through a `Producer` with linger 0 to a group member.
//!
//! `perf open|recover|lookup` measure how costs grow with the number of partitions and
//! the size of a log: reopening many partitions (time, memory, disk reserved), recovery
//! after a writer was killed with SIGKILL, and the latency of reading at a random offset.
//! `perf recover` runs the writer as a child process (the hidden `perf recover-writer`)
//! so that the kill leaves exactly what a crash of the process would: the page cache
//! keeps every acknowledged byte, but nothing was closed or checkpointed.
//!
//! The modes that write (`produce`, `pubsub`, `open`, `recover`) work in `--data DIR`
//! when it is given, and otherwise in a fresh temporary directory that they remove at
//! the end and name on stderr: a benchmark never writes into `./tidelog-data` unasked.
//! The modes that read what an earlier run wrote (`consume`, `lookup`) need `--data`.
//! `--partitions` that disagrees with an existing topic is an error.

use crate::cli::{
    PerfConsumeArgs, PerfLookupArgs, PerfOpenArgs, PerfProduceArgs, PerfPubsubArgs,
    PerfRecoverArgs, PerfRecoverWriterArgs,
};
use crate::common::{checked_batches, close_broker, counted, open_broker};
use crate::out::Out;
use crate::perf_machine::{MachineCounters, measured};
use crate::progress::Progress;
use crate::{CliResult, fail};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tidelog::consumer::Source;
use tidelog::producer::Destination;
use tidelog::producer::partition_for_key;
use tidelog::{
    Acks, BatchBuilder, Broker, ConsumerRecords, Durability, GroupConfig, GroupConsumer,
    OffsetReset, Partition, Producer, ProducerRecord, Topic, TopicConfig,
};

/// Bytes read from a partition per call.
const READ_BYTES: usize = 4 << 20;
/// Most bytes of distinct payloads generated up front.
const POOL_BYTES: usize = 64 << 20;
/// Topic of the pubsub throughput run (with `-P` appended for more than one partition).
const PUBSUB_TOPIC: &str = "perf-pubsub";
/// Longest a pubsub consumer that found nothing in any partition waits on one of them
/// before it looks at all of them again.
const IDLE_WAIT: Duration = Duration::from_millis(1);
/// Length of every key of a keyed run: `key-` and eight digits.
const KEY_LEN: usize = 12;
/// Most distinct keys of a keyed run (eight digits, at most 120 MB of keys).
const MAX_KEYS: u64 = 10_000_000;
/// Topic of the pubsub latency run.
const LATENCY_TOPIC: &str = "perf-latency";
/// Partitions of the topic `perf open` creates when `--partitions` is not given.
const OPEN_PARTITIONS: i32 = 1000;
/// How long a group member's poll waits for records in `--group` / `--producer` runs.
const GROUP_POLL: Duration = Duration::from_millis(100);
/// Longest a group member may take to join its group.
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The data directory of a perf run that writes: the `--data` directory, or a fresh
/// temporary directory that is removed when this value is dropped (also after an
/// error; declare it before the broker, so that the broker is closed first).
pub(crate) struct RunDir {
    path: PathBuf,
    temporary: bool,
}

impl RunDir {
    /// `given` (made if it is missing), or a new temporary directory, announced on
    /// stderr as `mode`'s.
    pub(crate) fn new(given: Option<&Path>, mode: &str) -> CliResult<RunDir> {
        if let Some(path) = given {
            std::fs::create_dir_all(path).map_err(|e| {
                fail!(
                    "cannot make the data directory {} of {mode}: {e}",
                    path.display()
                )
            })?;
            return Ok(RunDir {
                path: path.to_path_buf(),
                temporary: false,
            });
        }
        let base = std::env::temp_dir();
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        for attempt in 0..100u32 {
            let path = base.join(format!(
                "tidelog-perf-{}-{stamp}-{attempt}",
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    eprintln!(
                        "{mode}: no --data given: working in the temporary directory {}, removed at the end (give --data DIR to keep the data or to measure another disk)",
                        path.display()
                    );
                    return Ok(RunDir {
                        path,
                        temporary: true,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(fail!(
                        "cannot create a temporary directory in {}: {e} (give --data DIR)",
                        base.display()
                    ));
                }
            }
        }
        Err(fail!(
            "cannot find a free temporary directory name in {} (give --data DIR)",
            base.display()
        ))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if self.temporary
            && let Err(e) = std::fs::remove_dir_all(&self.path)
        {
            eprintln!(
                "warning: cannot remove the temporary directory {}: {e}",
                self.path.display()
            );
        }
    }
}

/// The `--data` directory of a mode that reads what an earlier run wrote.
fn written_data<'a>(given: Option<&'a Path>, mode: &str) -> CliResult<&'a Path> {
    given.ok_or_else(|| {
        fail!(
            "{mode} reads a topic that an earlier run wrote: give its --data DIR (without --data, perf produce works in a temporary directory that it removes)"
        )
    })
}

/// Random payloads generated before timing, used round-robin.
pub(crate) struct Payloads {
    pool: Vec<Vec<u8>>,
}

/// xorshift64*: fast, and random enough that nothing downstream could compress the
/// bytes or predict the offsets.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        Rng(0x9e37_79b9_7f4a_7c15)
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `[0, n)`.
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
}

impl Payloads {
    pub(crate) fn new(size: usize) -> Payloads {
        let count = (POOL_BYTES / size.max(1)).clamp(1, 1024);
        let mut rng = Rng::new();
        let pool = (0..count)
            .map(|_| (0..size).map(|_| (rng.next_u64() >> 56) as u8).collect())
            .collect();
        Payloads { pool }
    }

    #[inline]
    fn get(&self, i: u64) -> &[u8] {
        &self.pool[(i % self.pool.len() as u64) as usize]
    }
}

/// The keys of a keyed run, built before timing: record `i` gets `key-{i % K:08}`.
pub(crate) struct Keys {
    /// The keys back to back, `KEY_LEN` bytes each: only as many as there are records.
    flat: Vec<u8>,
    /// K, the number of distinct keys.
    count: u64,
}

impl Keys {
    /// The keys of `records` records over `count` distinct keys; None for no keys.
    fn new(count: u64, records: u64) -> CliResult<Option<Keys>> {
        if count == 0 {
            return Ok(None);
        }
        if count > MAX_KEYS {
            return Err(fail!(
                "--keys {count} is over the limit of {MAX_KEYS} distinct keys"
            ));
        }
        let built = count.min(records.max(1));
        let mut flat = Vec::with_capacity(built as usize * KEY_LEN);
        for i in 0..built {
            flat.extend_from_slice(format!("key-{i:08}").as_bytes());
        }
        Ok(Some(Keys { flat, count }))
    }

    /// The key of record `i` (of fewer records than were given to `new`).
    #[inline]
    fn get(&self, i: u64) -> &[u8] {
        let at = (i % self.count) as usize * KEY_LEN;
        &self.flat[at..at + KEY_LEN]
    }
}

/// Bytes of the key of each record: 0 without keys.
fn key_len(keys: Option<&Keys>) -> usize {
    keys.map_or(0, |_| KEY_LEN)
}

/// Appends `n` records of `payloads` to `partitions`, `batch` records per call, with one
/// timestamp for each `batch` records. Without keys, batches go round-robin over the
/// partitions. With keys, each record goes to `partition_for_key`'s partition, into that
/// partition's builder, which is appended once it holds `batch` records; what is left
/// is appended at the end. Stops early when `stop` is set.
pub(crate) fn produce_records(
    partitions: &[Partition],
    payloads: &Payloads,
    keys: Option<&Keys>,
    n: u64,
    batch: usize,
    progress: &mut Progress,
    stop: &AtomicBool,
) -> CliResult {
    let batch = batch.max(1);
    let partition_count = i32::try_from(partitions.len())
        .map_err(|_| fail!("{} partitions are too many", partitions.len()))?;
    // A keyed run fills one builder per partition, at most `batch` records each: room
    // for a whole batch (header, and at most 16 bytes of framing a record) up to 64 KiB.
    let builders = if keys.is_some() { partitions.len() } else { 1 };
    let record = payloads.get(0).len() + key_len(keys) + 16;
    let capacity = (64 + batch * record).min(64 * 1024);
    let mut builders: Vec<BatchBuilder> = (0..builders)
        .map(|_| BatchBuilder::with_capacity(capacity))
        .collect();
    let mut sent = 0u64;
    let mut next = 0usize;
    while sent < n && !stop.load(Ordering::Relaxed) {
        let k = (batch as u64).min(n - sent);
        let ts = tidelog::record::now_ms();
        match keys {
            None => {
                let builder = &mut builders[0];
                for i in sent..sent + k {
                    builder.push(ts, None, Some(payloads.get(i)), &[]);
                }
                partitions[next].append_builder(builder)?;
                next = (next + 1) % partitions.len();
            }
            Some(keys) => {
                for i in sent..sent + k {
                    let key = keys.get(i);
                    let p = partition_for_key(key, partition_count) as usize;
                    let builder = &mut builders[p];
                    builder.push(ts, Some(key), Some(payloads.get(i)), &[]);
                    if builder.len() >= batch {
                        partitions[p].append_builder(builder)?;
                    }
                }
            }
        }
        sent += k;
        progress.tick(sent);
    }
    for (builder, p) in builders.iter_mut().zip(partitions) {
        if !builder.is_empty() {
            p.append_builder(builder)?;
        }
    }
    Ok(())
}

/// Sends `n` records of `payloads` to `topic` through a `Producer` with its defaults,
/// one `send_nowait` each (keyed by `keys`, else placed by the default partitioner),
/// then flushes: the first failed append is the error.
fn send_records(
    broker: &Broker,
    topic: &str,
    payloads: &Payloads,
    keys: Option<&Keys>,
    n: u64,
    batch_bytes: usize,
    progress: &mut Progress,
) -> CliResult {
    let producer = Producer::builder(broker).batch_size(batch_bytes).build()?;
    for i in 0..n {
        let value = payloads.get(i);
        let record = match keys {
            Some(keys) => ProducerRecord::keyed(keys.get(i), value),
            None => ProducerRecord::new(value),
        };
        // Fire and forget: a failed batch is reported by the flush below.
        producer.send_nowait(topic, record)?;
        // As often as the batch path reports (once per batch of about 100 records).
        if i % 128 == 127 {
            progress.tick(i + 1);
        }
    }
    producer.flush()?;
    producer.close()?;
    Ok(())
}

/// The topic `name`, created with `partitions` (or else `default`) partitions if it does
/// not exist; an existing topic with another count than `partitions` is an error.
pub(crate) fn topic_or_create(
    broker: &Broker,
    name: &str,
    partitions: Option<i32>,
    default: i32,
) -> CliResult<Topic> {
    if partitions.is_some_and(|p| p < 1) {
        return Err(fail!("--partitions must be at least 1"));
    }
    let topic = match broker.topic(name) {
        Ok(t) => t,
        Err(tidelog::Error::UnknownTopic(_)) => {
            let count = partitions.unwrap_or(default);
            broker.create_topic(name, count, TopicConfig::new())?;
            return Ok(broker.topic(name)?);
        }
        Err(e) => return Err(e.into()),
    };
    match partitions {
        Some(p) if p != topic.partition_count() => Err(fail!(
            "topic {name:?} has {}, not the {p} of --partitions (leave --partitions out, or delete the topic with `tidelog topics delete {name}`)",
            counted(topic.partition_count() as u64, "partition", "partitions")
        )),
        _ => Ok(topic),
    }
}

/// Refuses a batch that the topic's `max.message.bytes` would reject, before timing.
fn check_batch_size(topic: &Topic, batch: usize, record_size: usize, key_len: usize) -> CliResult {
    let mut b = BatchBuilder::new();
    let payload = vec![0u8; record_size];
    let key = vec![b'k'; key_len];
    let key = (key_len > 0).then_some(key.as_slice());
    for _ in 0..batch.max(1) {
        b.push(tidelog::record::now_ms(), key, Some(&payload), &[]);
    }
    let size = b.size_bytes();
    let max = topic.partition(0)?.config().max_message_bytes as usize;
    if size > max {
        return Err(fail!(
            "--batch {batch} records of --record-size {record_size} bytes make batches of {size} bytes, over topic {:?}'s max.message.bytes of {max}",
            topic.name()
        ));
    }
    Ok(())
}

/// Runs `tidelog perf produce`.
pub(crate) fn produce(data: Option<&Path>, a: &PerfProduceArgs) -> CliResult {
    #[cfg(feature = "server")]
    if let Some(bootstrap) = &a.bootstrap {
        return match (a.transactional, a.producer) {
            (true, _) => produce_transactional_remote(bootstrap, a),
            (false, true) => produce_remote(bootstrap, a),
            (false, false) => Err(fail!("--bootstrap needs --producer or --transactional")),
        };
    }
    if a.batch == 0 {
        return Err(fail!("--batch must be at least 1"));
    }
    let keys = Keys::new(a.keys, a.records)?;
    let dir = RunDir::new(data, "perf produce")?;
    let broker = open_broker(dir.path(), true)?;
    let topic = topic_or_create(&broker, &a.topic, a.partitions, 1)?;
    check_batch_size(&topic, a.batch, a.record_size, key_len(keys.as_ref()))?;
    let partitions = topic.partitions();
    let payloads = Payloads::new(a.record_size);
    let mut progress = Progress::new("perf produce");
    let never = AtomicBool::new(false);
    if a.durable {
        drop(progress);
        return produce_durable(broker, &topic, &payloads, a);
    }
    if a.transactional {
        drop(progress);
        return produce_transactional(broker, &topic, &payloads, a);
    }
    let t0 = Instant::now();
    if a.producer {
        send_records(
            &broker,
            &a.topic,
            &payloads,
            keys.as_ref(),
            a.records,
            a.batch_bytes,
            &mut progress,
        )?;
    } else {
        produce_records(
            &partitions,
            &payloads,
            keys.as_ref(),
            a.records,
            a.batch,
            &mut progress,
            &never,
        )?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    close_broker(broker)?;
    let acks = if a.acks == "-1" { "all" } else { &a.acks };
    let [api, batch] = api_fields(a.producer, a.batch);
    let extra = [
        api,
        batch,
        ("partitions", partitions.len().to_string()),
        ("keys", a.keys.to_string()),
        ("acks", format!("\"{acks}\"")),
    ];
    report("produce", a.records, a.record_size, seconds, &extra, a.json)
}

/// Runs `perf produce --durable`: `--threads` threads share the records, each sending
/// one at a time through a `Producer` with `Durability::Fsync` and linger 0 and waiting
/// for its acknowledgement; reports the acknowledgement latency and the fsyncs made.
fn produce_durable(
    broker: Broker,
    topic: &Topic,
    payloads: &Payloads,
    a: &PerfProduceArgs,
) -> CliResult {
    if a.threads == 0 {
        return Err(fail!("--threads must be at least 1"));
    }
    let producer = Producer::builder(&broker)
        .linger(Duration::ZERO)
        .durability(Durability::Fsync)
        .build()?;
    let (n, threads) = (a.records, a.threads as u64);
    let fsyncs_before = broker.metrics().storage.fsync.count;
    let sent = std::sync::atomic::AtomicU64::new(0);
    let t0 = Instant::now();
    let results: Vec<CliResult<Vec<u64>>> = std::thread::scope(|scope| {
        let senders: Vec<_> = (0..threads)
            .map(|t| {
                let (producer, sent) = (&producer, &sent);
                // Thread t sends records t, t + T, t + 2T, ...: every record once.
                scope.spawn(move || -> CliResult<Vec<u64>> {
                    let mut latencies = Vec::with_capacity((n / threads + 1) as usize);
                    for i in (t..n).step_by(threads as usize) {
                        let record = ProducerRecord::new(payloads.get(i));
                        let started = Instant::now();
                        producer.send(topic.name(), record)?;
                        latencies.push(started.elapsed().as_nanos() as u64);
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(latencies)
                })
            })
            .collect();
        let mut progress = Progress::new("perf produce --durable");
        while !senders.iter().all(|s| s.is_finished()) {
            progress.tick(sent.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(50));
        }
        senders
            .into_iter()
            .map(|s| {
                s.join()
                    .map_err(|_| fail!("a perf thread stopped unexpectedly"))
                    .and_then(|r| r)
            })
            .collect()
    });
    let seconds = t0.elapsed().as_secs_f64();
    let fsyncs = broker.metrics().storage.fsync.count - fsyncs_before;
    let mut latencies = Vec::with_capacity(n as usize);
    for r in results {
        latencies.extend(r?);
    }
    producer.close()?;
    close_broker(broker)?;
    latencies.sort_unstable();
    let pct = |q: f64| percentile_us(&latencies, q);
    let extra = [
        ("api", "\"producer\"".into()),
        ("batch", "1".into()),
        ("durable", "true".into()),
        ("threads", a.threads.to_string()),
        ("partitions", topic.partition_count().to_string()),
        ("fsyncs", fsyncs.to_string()),
        (
            "records_per_fsync",
            format!("{:.2}", n as f64 / fsyncs.max(1) as f64),
        ),
        ("p50_us", format!("{:.1}", pct(0.5))),
        ("p99_us", format!("{:.1}", pct(0.99))),
        ("p999_us", format!("{:.1}", pct(0.999))),
        ("max_us", format!("{:.1}", pct(1.0))),
    ];
    report("produce", n, a.record_size, seconds, &extra, a.json)
}

/// Runs `perf produce --transactional` in process: `--rounds` rounds, each of N records
/// through a non-transactional `Producer` to `<topic>-plain` (the rate to compare
/// with) and through a transactional one to the topic in transactions of
/// `--txn-records` records, in alternating order (see [`transactions_beside_plain`]).
fn produce_transactional(
    broker: Broker,
    topic: &Topic,
    payloads: &Payloads,
    a: &PerfProduceArgs,
) -> CliResult {
    let plain_topic = format!("{}-plain", topic.name());
    topic_or_create(&broker, &plain_topic, Some(topic.partition_count()), 1)?;
    let result = transactions_beside_plain(
        Destination::from(&broker),
        Some(&broker),
        topic.name(),
        topic.partition_count(),
        payloads,
        a,
    );
    close_broker(broker)?;
    result
}

/// Runs `perf produce --producer --bootstrap HOSTS`: `n` records through the network
/// producer (`--acks`, `--batch-bytes`, linger 5 ms; idempotent with acks=all) to a
/// running node or cluster, `send_nowait` each, then a flush; the topic is created
/// there with the cluster's default replication factor if missing.
#[cfg(feature = "server")]
fn produce_remote(bootstrap: &str, a: &PerfProduceArgs) -> CliResult {
    let cluster = tidelog::Cluster::connect(
        tidelog::ClientConfig::new(bootstrap).set("client.id", "tidelog-perf"),
    )?;
    let partitions = a.partitions.unwrap_or(1);
    cluster.create_topic_if_missing(&a.topic, partitions, TopicConfig::new())?;
    let keys = Keys::new(a.keys, a.records)?;
    let payloads = Payloads::new(a.record_size);
    let acks = match a.acks.as_str() {
        "0" => Acks::None,
        "1" => Acks::Leader,
        _ => Acks::All,
    };
    let producer = Producer::builder(&cluster)
        .acks(acks)
        .batch_size(a.batch_bytes)
        .build()?;
    let mut progress = Progress::new("perf produce --bootstrap");
    let t0 = Instant::now();
    for i in 0..a.records {
        let value = payloads.get(i);
        let record = match &keys {
            Some(keys) => ProducerRecord::keyed(keys.get(i), value),
            None => ProducerRecord::new(value),
        };
        // Fire and forget: a failed batch is reported by the flush below.
        producer.send_nowait(&a.topic, record)?;
        if i % 128 == 127 {
            progress.tick(i + 1);
        }
    }
    producer.flush()?;
    let seconds = t0.elapsed().as_secs_f64();
    drop(progress);
    producer.close()?;
    let acks = if a.acks == "-1" { "all" } else { &a.acks };
    let extra = [
        ("api", "\"producer\"".into()),
        ("remote", "true".into()),
        ("batch_bytes", a.batch_bytes.to_string()),
        ("partitions", partitions.to_string()),
        ("keys", a.keys.to_string()),
        ("acks", format!("\"{acks}\"")),
    ];
    report("produce", a.records, a.record_size, seconds, &extra, a.json)
}

/// Runs `perf produce --transactional --bootstrap HOSTS`: the same rounds as
/// [`produce_transactional`] through the network producer against a running node or
/// cluster (both topics created there with the cluster's default replication factor
/// if missing; both producers idempotent with acks=all).
#[cfg(feature = "server")]
fn produce_transactional_remote(bootstrap: &str, a: &PerfProduceArgs) -> CliResult {
    let cluster = tidelog::Cluster::connect(
        tidelog::ClientConfig::new(bootstrap).set("client.id", "tidelog-perf"),
    )?;
    let partitions = a.partitions.unwrap_or(1);
    for name in [a.topic.clone(), format!("{}-plain", a.topic)] {
        cluster.create_topic_if_missing(&name, partitions, TopicConfig::new())?;
    }
    let payloads = Payloads::new(a.record_size);
    transactions_beside_plain(
        Destination::from(&cluster),
        None,
        &a.topic,
        partitions,
        &payloads,
        a,
    )
}

/// One round of `perf produce --transactional`: the rates of its two runs and the
/// commit latencies (nanoseconds) of its transactions.
struct TxnRound {
    plain_first: bool,
    plain_seconds: f64,
    seconds: f64,
    /// CPU seconds of the process during each run, where the system tells.
    plain_cpu: Option<f64>,
    cpu: Option<f64>,
    commits: Vec<u64>,
}

impl TxnRound {
    /// The transactional rate over the plain one.
    fn ratio(&self) -> f64 {
        self.plain_seconds / self.seconds.max(1e-9)
    }

    /// The plain run's CPU time over the transactional one's: the ratio of the rates
    /// each would reach on a CPU of its own.
    fn cpu_ratio(&self) -> Option<f64> {
        Some(self.plain_cpu? / self.cpu?.max(1e-9))
    }
}

/// The CPU time the process used so far (every thread), in seconds; None where the
/// system does not tell.
fn process_cpu_seconds() -> Option<f64> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        Some(t.tv_sec as f64 + t.tv_nsec as f64 / 1e9)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        None
    }
}

/// The median of `values` (sorted here; 0 when empty).
fn median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    let mid = values.len() / 2;
    match values.len() {
        0 => 0.0,
        n if n % 2 == 0 => (values[mid - 1] + values[mid]) / 2.0,
        _ => values[mid],
    }
}

/// The rounds of `perf produce --transactional` on `dest`. Each round sends `n`
/// records through an idempotent acks=all `Producer` to `<topic>-plain` and `n` through
/// a transactional one to `topic` in transactions of `--txn-records` records; the
/// order of the two runs alternates from round to round (plain first in the first), so
/// that neither run always meets the conditions the other left (a page cache the
/// other filled, its writeback still under way). In process, each run's partitions are
/// fsynced after it, outside the timing, so every run starts with no dirty pages of
/// the other. Reports each round, the median of the rounds' ratios, the rates over
/// all rounds and the commit latencies of every transaction.
fn transactions_beside_plain(
    dest: Destination,
    broker: Option<&Broker>,
    topic: &str,
    partition_count: i32,
    payloads: &Payloads,
    a: &PerfProduceArgs,
) -> CliResult {
    if a.txn_records == 0 {
        return Err(fail!("--txn-records must be at least 1"));
    }
    if a.rounds == 0 {
        return Err(fail!("--rounds must be at least 1"));
    }
    let n = a.records;
    let plain_topic = format!("{topic}-plain");
    let plain = Producer::builder(dest.clone()).acks(Acks::All).build()?;
    let producer = Producer::builder(dest)
        .acks(Acks::All)
        .transactional_id(format!("tidelog-perf-{}", std::process::id()))
        .build()?;
    producer.init_transactions()?;
    // Every run's partitions on disk before the next run starts (in process).
    let settle = |name: &str| -> CliResult {
        if let Some(broker) = broker {
            for p in broker.topic(name)?.partitions().iter() {
                p.sync()?;
            }
        }
        Ok(())
    };
    let mut rounds = Vec::with_capacity(a.rounds);
    for r in 0..a.rounds {
        let plain_first = r % 2 == 0;
        let mut round = TxnRound {
            plain_first,
            plain_seconds: 0.0,
            seconds: 0.0,
            plain_cpu: None,
            cpu: None,
            commits: Vec::with_capacity((n / a.txn_records + 1) as usize),
        };
        for plain_turn in [plain_first, !plain_first] {
            let cpu0 = process_cpu_seconds();
            if plain_turn {
                round.plain_seconds = plain_run(&plain, &plain_topic, payloads, n)?;
                round.plain_cpu = process_cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
                settle(&plain_topic)?;
            } else {
                round.seconds = transactional_run(
                    &producer,
                    topic,
                    payloads,
                    n,
                    a.txn_records,
                    &mut round.commits,
                )?;
                round.cpu = process_cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
                settle(topic)?;
            }
        }
        rounds.push(round);
    }
    plain.close()?;
    producer.close()?;
    report_transactional_rounds(&rounds, n, partition_count, a)
}

/// `n` records through `plain` to `topic`, fire and forget, then a flush: the seconds
/// it took.
fn plain_run(plain: &Producer, topic: &str, payloads: &Payloads, n: u64) -> CliResult<f64> {
    let mut progress = Progress::new("perf produce (non-transactional)");
    let t0 = Instant::now();
    for i in 0..n {
        // Fire and forget: a failed batch is reported by the flush below.
        plain.send_nowait(topic, ProducerRecord::new(payloads.get(i)))?;
        if i % 128 == 127 {
            progress.tick(i + 1);
        }
    }
    plain.flush()?;
    Ok(t0.elapsed().as_secs_f64().max(1e-9))
}

/// `n` records through `producer` to `topic` in transactions of `per_txn` records: the
/// seconds it took; each commit's latency goes to `commits`.
fn transactional_run(
    producer: &Producer,
    topic: &str,
    payloads: &Payloads,
    n: u64,
    per_txn: u64,
    commits: &mut Vec<u64>,
) -> CliResult<f64> {
    let mut progress = Progress::new("perf produce --transactional");
    let t0 = Instant::now();
    let mut i = 0;
    while i < n {
        producer.begin_transaction()?;
        let end = (i + per_txn).min(n);
        for j in i..end {
            producer.send_nowait(topic, ProducerRecord::new(payloads.get(j)))?;
        }
        let started = Instant::now();
        producer.commit_transaction()?;
        commits.push(started.elapsed().as_nanos() as u64);
        i = end;
        progress.tick(i);
    }
    Ok(t0.elapsed().as_secs_f64().max(1e-9))
}

/// Reports the rounds of `perf produce --transactional`: one line per round (a
/// `rounds_detail` array with `--json`), then the transactional rate over every round,
/// the plain one, the median of the rounds' ratios (of the rates, and of the CPU time
/// each run took) and the commit latencies of every transaction.
fn report_transactional_rounds(
    rounds: &[TxnRound],
    n: u64,
    partition_count: i32,
    a: &PerfProduceArgs,
) -> CliResult {
    let rate = |seconds: f64| n as f64 / seconds.max(1e-9);
    let json_or_null = |v: Option<f64>| v.map_or("null".into(), |v| format!("{v:.3}"));
    let mut details = Vec::with_capacity(rounds.len());
    for (r, round) in rounds.iter().enumerate() {
        let mut commits = round.commits.clone();
        commits.sort_unstable();
        let first = if round.plain_first {
            "plain"
        } else {
            "transactional"
        };
        let (p50, p99) = (percentile_us(&commits, 0.5), percentile_us(&commits, 0.99));
        details.push(format!(
            "{{\"round\":{},\"first\":\"{first}\",\"records_per_s\":{:.1},\"producer_records_per_s\":{:.1},\"ratio\":{:.3},\"cpu_ratio\":{},\"commit_p50_us\":{p50:.1},\"commit_p99_us\":{p99:.1}}}",
            r + 1,
            rate(round.seconds),
            rate(round.plain_seconds),
            round.ratio(),
            json_or_null(round.cpu_ratio()),
        ));
        if !a.json {
            Out::new().line(format_args!(
                "round {} ({first} first): transactional {:.0} records/s, producer {:.0} records/s, ratio {:.3}, cpu ratio {}, commit p50 {p50:.1} us, p99 {p99:.1} us",
                r + 1,
                rate(round.seconds),
                rate(round.plain_seconds),
                round.ratio(),
                json_or_null(round.cpu_ratio()),
            ))?;
        }
    }
    let mut ratios: Vec<f64> = rounds.iter().map(TxnRound::ratio).collect();
    let cpu_ratios: Option<Vec<f64>> = rounds.iter().map(TxnRound::cpu_ratio).collect();
    let mut commits: Vec<u64> = rounds
        .iter()
        .flat_map(|r| r.commits.iter().copied())
        .collect();
    commits.sort_unstable();
    let pct = |q: f64| percentile_us(&commits, q);
    let records = n * rounds.len() as u64;
    let seconds: f64 = rounds.iter().map(|r| r.seconds).sum();
    let plain_seconds: f64 = rounds.iter().map(|r| r.plain_seconds).sum();
    let mut extra = vec![
        ("api", "\"producer\"".into()),
        ("transactional", "true".into()),
        ("txn_records", a.txn_records.to_string()),
        ("transactions", commits.len().to_string()),
        ("partitions", partition_count.to_string()),
        ("rounds", rounds.len().to_string()),
        ("commit_p50_us", format!("{:.1}", pct(0.5))),
        ("commit_p99_us", format!("{:.1}", pct(0.99))),
        (
            "producer_records_per_s",
            format!("{:.1}", records as f64 / plain_seconds.max(1e-9)),
        ),
        ("ratio_to_producer", format!("{:.3}", median(&mut ratios))),
        (
            "cpu_ratio_to_producer",
            json_or_null(cpu_ratios.map(|mut r| median(&mut r))),
        ),
    ];
    if a.json {
        extra.push(("rounds_detail", format!("[{}]", details.join(","))));
    }
    report("produce", records, a.record_size, seconds, &extra, a.json)
}

/// The `q` quantile of `sorted` nanoseconds, in microseconds (0 when empty).
pub(crate) fn percentile_us(sorted: &[u64], q: f64) -> f64 {
    let i = ((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(i).map_or(0.0, |&ns| ns as f64 / 1000.0)
}

/// The `api` and `batch` fields of a run through the `Producer` (`producer`) or the
/// partitions in batches of `batch` records.
fn api_fields(producer: bool, batch: usize) -> [(&'static str, String); 2] {
    if producer {
        [("api", "\"producer\"".into()), ("batch", "null".into())]
    } else {
        [
            ("api", "\"partition\"".into()),
            ("batch", batch.to_string()),
        ]
    }
}

/// Counts of a read.
#[derive(Default)]
struct ReadCount {
    records: u64,
    bytes: u64,
}

/// Reads `p` from `from` up to `to` (exclusive), checking every batch's CRC and
/// decoding every record. `on_record` sees each value.
fn read_range(
    p: &Partition,
    from: i64,
    to: i64,
    count: &mut ReadCount,
    progress: &mut Progress,
    stop: &AtomicBool,
    mut on_record: impl FnMut(&[u8]),
) -> CliResult {
    let mut pos = from;
    while pos < to {
        if pos >= p.high_watermark() {
            if stop.load(Ordering::Acquire) {
                return Err(fail!("the producer stopped before offset {to}"));
            }
            p.wait_for(pos, Duration::from_millis(100));
            continue;
        }
        pos = read_slice(p, pos, count, &mut on_record)?;
        progress.tick(count.records);
    }
    Ok(())
}

/// Reads one slice of `p` at `pos` (below its high watermark), checking every batch's
/// CRC and decoding every record; `on_record` sees each value at or after `pos`.
/// Returns the offset to read next.
fn read_slice(
    p: &Partition,
    pos: i64,
    count: &mut ReadCount,
    on_record: &mut impl FnMut(&[u8]),
) -> CliResult<i64> {
    let slice = p.read(pos, READ_BYTES)?;
    for batch in checked_batches(&slice, p) {
        let (_, batch) = batch?;
        for r in batch.records() {
            let r = r?;
            if r.offset < pos {
                continue;
            }
            let v = r.value.unwrap_or_default();
            count.bytes += v.len() as u64;
            count.records += 1;
            on_record(v);
        }
    }
    Ok(slice.next_offset().max(pos + 1))
}

/// Reads `partitions`, each from its offset in `from`, one slice of each in turn, until
/// `n` more records were read. When a whole round finds nothing it waits on one
/// partition (the next one each time) for at most `IDLE_WAIT`, so that an idle consumer
/// sleeps instead of spinning. Fails when a round that began after `stop` was set finds
/// nothing.
fn read_partitions(
    partitions: &[Partition],
    from: &[i64],
    n: u64,
    count: &mut ReadCount,
    progress: &mut Progress,
    stop: &AtomicBool,
    mut on_record: impl FnMut(&[u8]),
) -> CliResult {
    let start = count.records;
    let target = start + n;
    let mut pos = from.to_vec();
    let mut waiting = 0usize;
    while count.records < target {
        // Read before the round: the producer sets `stop` after its last append, so a
        // round that began after that sees every record.
        let stopped = stop.load(Ordering::Acquire);
        let mut found = false;
        for (p, pos) in partitions.iter().zip(pos.iter_mut()) {
            if *pos < p.high_watermark() {
                *pos = read_slice(p, *pos, count, &mut on_record)?;
                found = true;
            }
        }
        progress.tick(count.records);
        if !found {
            if stopped {
                return Err(fail!(
                    "the producer stopped with {} of {n} records of topic {:?} read",
                    count.records - start,
                    partitions[0].topic()
                ));
            }
            partitions[waiting].wait_for(pos[waiting], IDLE_WAIT);
            waiting = (waiting + 1) % partitions.len();
        }
    }
    Ok(())
}

/// A consumer group no earlier run used.
fn fresh_group(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// A member of a new consumer group subscribed to `topic`, starting from `reset`, with
/// auto-commit off (a perf run leaves no offsets behind) and reads of up to `READ_BYTES`
/// per partition, as the direct reads of the other mode.
fn fresh_member(
    log: impl Into<Source>,
    topic: &str,
    reset: OffsetReset,
) -> CliResult<GroupConsumer> {
    let mut config = GroupConfig::new(fresh_group("perf"), &[topic])
        .auto_offset_reset(reset)
        .enable_auto_commit(false);
    config.max_partition_fetch_bytes = READ_BYTES;
    Ok(GroupConsumer::join(log, config)?)
}

/// Polls `member` until it has joined its group (it reads nothing: its topic has no
/// record past its `Latest` reset position yet).
fn join_member(member: &mut GroupConsumer) -> CliResult {
    let deadline = Instant::now() + JOIN_TIMEOUT;
    while member.assignment().is_empty() {
        if Instant::now() >= deadline {
            return Err(fail!(
                "the perf consumer did not join its group within {JOIN_TIMEOUT:?}"
            ));
        }
        let records = member.poll(Duration::ZERO)?;
        if !records.is_empty() {
            return Err(fail!("the perf consumer read records before the run began"));
        }
    }
    Ok(())
}

/// Counts the records of one poll; `on_record` sees each value.
fn count_records(
    records: &ConsumerRecords,
    count: &mut ReadCount,
    on_record: &mut impl FnMut(&[u8]),
) -> CliResult {
    for r in records {
        let v = r?.value.unwrap_or_default();
        count.bytes += v.len() as u64;
        count.records += 1;
        on_record(v);
    }
    Ok(())
}

/// Reads `n` records through `member`, decoding each; `on_record` sees each value.
/// Fails when the member has not joined its group within `JOIN_TIMEOUT`, and when a
/// poll of the joined member that began after `stop` was set finds nothing. Returns
/// when the member had joined.
fn read_member(
    member: &mut GroupConsumer,
    n: u64,
    count: &mut ReadCount,
    progress: &mut Progress,
    stop: &AtomicBool,
    mut on_record: impl FnMut(&[u8]),
) -> CliResult<Instant> {
    let start = count.records;
    let join_deadline = Instant::now() + JOIN_TIMEOUT;
    let mut joined = None;
    while count.records < start + n {
        let stopped = stop.load(Ordering::Acquire);
        let was_joined = joined.is_some();
        let records = member.poll(GROUP_POLL)?;
        if joined.is_none() && !member.assignment().is_empty() {
            joined = Some(Instant::now());
        }
        if records.is_empty() {
            if joined.is_none() && Instant::now() >= join_deadline {
                return Err(fail!(
                    "the perf consumer did not join its group within {JOIN_TIMEOUT:?}"
                ));
            }
            if stopped && was_joined {
                return Err(fail!(
                    "the group member found nothing more after {} of {n} records",
                    count.records - start
                ));
            }
            continue;
        }
        count_records(&records, count, &mut on_record)?;
        progress.tick(count.records);
    }
    Ok(joined.unwrap_or_else(Instant::now))
}

/// Runs `tidelog perf consume`.
pub(crate) fn consume(data: Option<&Path>, a: &PerfConsumeArgs) -> CliResult {
    #[cfg(feature = "server")]
    if let Some(bootstrap) = &a.bootstrap {
        return consume_remote(bootstrap, a);
    }
    let broker = open_broker(written_data(data, "perf consume")?, false)?;
    let topic = broker.topic(&a.topic)?;
    let partitions = topic.partitions();
    let mut progress = Progress::new("perf consume");
    let mut count = ReadCount::default();
    let never = AtomicBool::new(false);
    // Touch the first byte of every value too, so that no value goes unread even if
    // the CRC pass were ever skipped.
    let mut sum = 0u64;
    let mut touch = |v: &[u8]| sum = sum.wrapping_add(v.first().copied().unwrap_or(0) as u64);
    let t0 = Instant::now();
    let mut join_seconds = None;
    if a.group {
        let records: i64 = partitions
            .iter()
            .map(|p| p.high_watermark() - p.log_start_offset())
            .sum();
        let mut member = fresh_member(&broker, &a.topic, OffsetReset::Earliest)?;
        // Nothing writes to the topic: once joined, a poll that finds nothing is an
        // error, not a wait.
        let nothing_more = AtomicBool::new(true);
        let joined = read_member(
            &mut member,
            records as u64,
            &mut count,
            &mut progress,
            &nothing_more,
            &mut touch,
        )?;
        join_seconds = Some(joined.duration_since(t0).as_secs_f64());
        member.close();
    } else {
        for p in partitions.iter() {
            let (from, to) = (p.log_start_offset(), p.high_watermark());
            read_range(p, from, to, &mut count, &mut progress, &never, &mut touch)?;
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    close_broker(broker)?;
    let record_bytes = count.bytes.checked_div(count.records).unwrap_or(0) as usize;
    let extra = [
        (
            "api",
            format!("\"{}\"", if a.group { "group" } else { "partition" }),
        ),
        ("partitions", partitions.len().to_string()),
        ("bytes", count.bytes.to_string()),
        (
            "join_seconds",
            join_seconds.map_or("null".to_string(), |s| format!("{s:.6}")),
        ),
    ];
    report(
        "consume",
        count.records,
        record_bytes,
        seconds,
        &extra,
        a.json,
    )
}

/// Runs `perf consume --bootstrap HOSTS`: the network `Consumer` assigned every
/// partition of the topic reads from the first offset to the end each had when the run
/// began (both from `describe_topic`); fails naming what is missing if a poll brings
/// nothing for `request.timeout.ms`.
#[cfg(feature = "server")]
fn consume_remote(bootstrap: &str, a: &PerfConsumeArgs) -> CliResult {
    let config = tidelog::ClientConfig::new(bootstrap).set("client.id", "tidelog-perf");
    let cluster = tidelog::Cluster::connect(config)?;
    let described = cluster.describe_topic(&a.topic)?;
    let records: i64 = described
        .partitions
        .iter()
        .map(|p| p.log_end_offset - p.log_start_offset)
        .sum();
    let assigned: Vec<(&str, i32)> = described
        .partitions
        .iter()
        .map(|p| (a.topic.as_str(), p.partition))
        .collect();
    let mut consumer = tidelog::Consumer::new(
        &cluster,
        tidelog::ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    consumer.assign(&assigned)?;
    consumer.seek_to_beginning()?;
    let mut progress = Progress::new("perf consume --bootstrap");
    let (mut read, mut bytes, mut sum) = (0u64, 0u64, 0u64);
    let stall = Duration::from_secs(30);
    let t0 = Instant::now();
    let mut last_progress = t0;
    while (read as i64) < records {
        let batch = consumer.poll(Duration::from_millis(100))?;
        let before = read;
        for r in batch.iter() {
            let r = r?;
            let value = r.value.unwrap_or_default();
            sum = sum.wrapping_add(value.first().copied().unwrap_or(0) as u64);
            bytes += (value.len() + r.key.map_or(0, |k| k.len())) as u64;
            read += 1;
        }
        if read > before {
            last_progress = Instant::now();
            progress.tick(read);
        } else if last_progress.elapsed() > stall {
            return Err(fail!(
                "perf consume --bootstrap: {read} of {records} records of topic {} read, nothing more for {stall:?}",
                a.topic
            ));
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    drop(progress);
    consumer.close();
    let record_bytes = bytes.checked_div(read).unwrap_or(0) as usize;
    let extra = [
        ("api", "\"consumer\"".to_string()),
        ("remote", "true".into()),
        ("partitions", described.partitions.len().to_string()),
        ("bytes", bytes.to_string()),
        ("join_seconds", "null".into()),
    ];
    report("consume", read, record_bytes, seconds, &extra, a.json)
}

/// Runs `tidelog perf pubsub`: a throughput run with a producer and a consumer thread,
/// then a latency run paced at `latency_rate`.
pub(crate) fn pubsub(data: Option<&Path>, a: &PerfPubsubArgs) -> CliResult {
    if a.batch == 0 || a.latency_rate == 0 || a.partitions < 1 {
        return Err(fail!(
            "--batch, --latency-rate and --partitions must be at least 1"
        ));
    }
    #[cfg(feature = "server")]
    if let Some(bootstrap) = &a.bootstrap {
        return pubsub_remote(bootstrap, a);
    }
    let keys = Keys::new(a.keys, a.records)?;
    let dir = RunDir::new(data, "perf pubsub")?;
    let broker = open_broker(dir.path(), true)?;
    let name = match a.partitions {
        1 => PUBSUB_TOPIC.to_string(),
        n => format!("{PUBSUB_TOPIC}-{n}"),
    };
    let topic = topic_or_create(&broker, &name, Some(a.partitions), 1)?;
    check_batch_size(&topic, a.batch, a.record_size, key_len(keys.as_ref()))?;
    let parts = topic.partitions();
    let payloads = Payloads::new(a.record_size);
    if a.producer && a.threads == 0 {
        return Err(fail!("--threads must be at least 1"));
    }
    let (run, machine) = measured(|| -> CliResult<_> {
        if a.producer {
            let (count, seconds) = pubsub_api(&broker, a, &name, keys.as_ref(), &payloads)?;
            Ok((count, seconds, None))
        } else {
            let (count, seconds, switches) = pubsub_direct(&parts, a, keys.as_ref(), &payloads)?;
            Ok((count, seconds, Some(switches)))
        }
    });
    let (count, seconds, switches) = run?;

    // The latency run is a separate run: start it from a quiet system, not while the
    // kernel writes back the gigabyte the throughput run left dirty (the maintenance
    // thread fsyncs rolled segments, and that writeback shares the two cores).
    for p in parts.iter() {
        p.sync()?;
    }
    let latency = latency_run(&broker, a)?;
    close_broker(broker)?;
    pubsub_report(a, count, seconds, &latency, (switches, machine), false)
}

/// Prints what a `perf pubsub` run measured: the throughput run's `count` in `seconds`,
/// the latency run's sorted `latencies` (ns), the direct mode's context switches and
/// what the kernel's memory management did during the throughput run (`machine`).
fn pubsub_report(
    a: &PerfPubsubArgs,
    count: ReadCount,
    seconds: f64,
    latency: &LatencyRun,
    (switches, machine): (Option<[Switches; 2]>, Option<MachineCounters>),
    remote: bool,
) -> CliResult {
    let latencies = &latency.latencies;
    let pct = |q: f64| percentile_us(latencies, q);
    let [api, batch] = api_fields(a.producer, a.batch);
    let mut extra = vec![
        api,
        batch,
        (
            "threads",
            if a.producer { a.threads } else { 1 }.to_string(),
        ),
        ("partitions", a.partitions.to_string()),
        ("remote", remote.to_string()),
        ("keys", a.keys.to_string()),
        ("latency_records", latencies.len().to_string()),
        ("latency_rate", a.latency_rate.to_string()),
        ("p50_us", format!("{:.1}", pct(0.5))),
        ("p99_us", format!("{:.1}", pct(0.99))),
        ("p999_us", format!("{:.1}", pct(0.999))),
        (
            "max_us",
            format!(
                "{:.1}",
                latencies.last().map_or(0.0, |&n| n as f64 / 1000.0)
            ),
        ),
    ];
    if let Some([producer, consumer]) = switches {
        // Context switches of the throughput run's two threads (voluntary: it blocked or
        // yielded; involuntary: the scheduler took its core), per 1,000 records: what
        // the waiting costs, whatever the machine's speed.
        let per_k = |n: u64| format!("{:.3}", n as f64 * 1000.0 / count.records.max(1) as f64);
        extra.push(("producer_voluntary_cs_per_1k", per_k(producer.0)));
        extra.push(("producer_involuntary_cs_per_1k", per_k(producer.1)));
        extra.push(("consumer_voluntary_cs_per_1k", per_k(consumer.0)));
        extra.push(("consumer_involuntary_cs_per_1k", per_k(consumer.1)));
    }
    if let Some([producer, consumer]) = latency.switches {
        // The latency run's: its two threads wait by spinning, so each involuntary
        // switch is a time another task took the core of one of them, and a record then
        // waits for it (the records late by more than a millisecond count those waits).
        let late = latencies.len() - latencies.partition_point(|&ns| ns <= 1_000_000);
        extra.push(("latency_producer_involuntary_cs", producer.1.to_string()));
        extra.push(("latency_consumer_involuntary_cs", consumer.1.to_string()));
        extra.push(("latency_over_1ms", late.to_string()));
    }
    // Stalls of the whole machine: a slow run with many is the machine, not the build.
    extra.extend(machine.iter().flat_map(|m| m.fields()));
    report(
        "pubsub",
        count.records,
        a.record_size,
        seconds,
        &extra,
        a.json,
    )
}

/// Runs `perf pubsub --producer --bootstrap HOSTS`: the throughput and latency runs of
/// `--producer` through the network producer and group consumer against a running node
/// or cluster (the topics created there if missing).
#[cfg(feature = "server")]
fn pubsub_remote(bootstrap: &str, a: &PerfPubsubArgs) -> CliResult {
    if a.threads == 0 {
        return Err(fail!("--threads must be at least 1"));
    }
    let config = tidelog::ClientConfig::new(bootstrap).set("client.id", "tidelog-perf");
    let cluster = tidelog::Cluster::connect(config)?;
    let keys = Keys::new(a.keys, a.records)?;
    let name = match a.partitions {
        1 => PUBSUB_TOPIC.to_string(),
        n => format!("{PUBSUB_TOPIC}-{n}"),
    };
    cluster.create_topic_if_missing(&name, a.partitions, TopicConfig::new())?;
    cluster.create_topic_if_missing(LATENCY_TOPIC, 1, TopicConfig::new())?;
    let payloads = Payloads::new(a.record_size);
    let (run, machine) = measured(|| pubsub_api(&cluster, a, &name, keys.as_ref(), &payloads));
    let (count, seconds) = run?;
    let latencies = latency_api(&cluster, a, Pacing::Bursts)?;
    let latency = LatencyRun {
        latencies,
        switches: None,
    };
    pubsub_report(a, count, seconds, &latency, (None, machine), true)
}

/// The throughput run of `perf pubsub`: a producer thread appending batches of
/// `--batch` records and a consumer thread reading the partitions, both at once; the
/// clock stops when the consumer has read the last record. Returns what was read and
/// the seconds it took.
fn pubsub_direct(
    parts: &Arc<Vec<Partition>>,
    a: &PerfPubsubArgs,
    keys: Option<&Keys>,
    payloads: &Payloads,
) -> CliResult<(ReadCount, f64, [Switches; 2])> {
    let from: Vec<i64> = parts.iter().map(Partition::high_watermark).collect();
    let n = a.records;
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let consumer = {
        let (parts, stop) = (Arc::clone(parts), Arc::clone(&stop));
        std::thread::spawn(move || -> CliResult<(ReadCount, Instant, Switches)> {
            let before = thread_switches();
            let mut progress = Progress::new("perf pubsub (consumed)");
            let mut count = ReadCount::default();
            read_partitions(&parts, &from, n, &mut count, &mut progress, &stop, |_| {})?;
            Ok((count, Instant::now(), switches_since(before)))
        })
    };
    let mut progress = Progress::new("perf pubsub (produced)");
    let before = thread_switches();
    let produced = produce_records(
        parts,
        payloads,
        keys,
        n,
        a.batch,
        &mut progress,
        &AtomicBool::new(false),
    );
    let producer_switches = switches_since(before);
    stop.store(true, Ordering::Release);
    let consumed = join(consumer)?;
    produced?;
    let (count, done, consumer_switches) = consumed?;
    Ok((
        count,
        done.duration_since(t0).as_secs_f64(),
        [producer_switches, consumer_switches],
    ))
}

/// Context switches, voluntary and involuntary.
type Switches = (u64, u64);

/// This thread's context switches since `before` (a [`thread_switches`] of it).
fn switches_since(before: Switches) -> Switches {
    let now = thread_switches();
    (now.0 - before.0, now.1 - before.1)
}

/// This thread's context switches so far, voluntary and involuntary (Linux's
/// `/proc/thread-self/status`; zeros where there is no such file).
fn thread_switches() -> Switches {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches:"),
        field("nonvoluntary_ctxt_switches:"),
    )
}

/// The throughput run of `perf pubsub --producer`: `--threads` threads sending through
/// one `Producer` (`send_nowait`, Kafka's batching defaults), then a flush, while a
/// member of a new consumer group (joined before the clock starts) reads the topic on
/// its own thread; the clock stops when it has read the last record.
fn pubsub_api<L>(
    log: &L,
    a: &PerfPubsubArgs,
    topic: &str,
    keys: Option<&Keys>,
    payloads: &Payloads,
) -> CliResult<(ReadCount, f64)>
where
    for<'a> &'a L: Into<Source> + Into<Destination>,
{
    let n = a.records;
    let mut member = fresh_member(log, topic, OffsetReset::Latest)?;
    join_member(&mut member)?;
    let producer = Producer::new(log)?;
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let (consumed, produced) = std::thread::scope(|scope| {
        let consumer = scope.spawn(|| -> CliResult<(ReadCount, Instant)> {
            let mut progress = Progress::new("perf pubsub (consumed)");
            let mut count = ReadCount::default();
            read_member(&mut member, n, &mut count, &mut progress, &stop, |_| {})?;
            Ok((count, Instant::now()))
        });
        let threads = a.threads as u64;
        let senders: Vec<_> = (0..threads)
            .map(|t| {
                let producer = &producer;
                // Thread t sends records t, t + T, t + 2T, ...: every record once.
                scope.spawn(move || -> CliResult {
                    for i in (t..n).step_by(threads as usize) {
                        let value = payloads.get(i);
                        let record = match keys {
                            Some(keys) => ProducerRecord::keyed(keys.get(i), value),
                            None => ProducerRecord::new(value),
                        };
                        producer.send_nowait(topic, record)?;
                    }
                    Ok(())
                })
            })
            .collect();
        let mut produced: CliResult = Ok(());
        for s in senders {
            let r = s
                .join()
                .map_err(|_| fail!("a perf thread stopped unexpectedly"))
                .and_then(|r| r);
            if produced.is_ok() {
                produced = r;
            }
        }
        if produced.is_ok() {
            produced = producer.flush().map_err(Into::into);
        }
        stop.store(true, Ordering::Release);
        let consumed = consumer
            .join()
            .map_err(|_| fail!("a perf thread stopped unexpectedly"));
        (consumed, produced)
    });
    produced?;
    let (count, done) = consumed??;
    producer.close()?;
    member.close();
    Ok((count, done.duration_since(t0).as_secs_f64()))
}

/// Joins a thread, turning a panic into an error.
fn join<T>(h: std::thread::JoinHandle<CliResult<T>>) -> CliResult<CliResult<T>> {
    h.join()
        .map_err(|_| fail!("a perf thread stopped unexpectedly"))
}

/// The latency run: `latency_records` records sent at `latency_rate` per second, one
/// per append, each carrying its send time (ns since a shared clock origin) in its
/// first 8 bytes; the consumer thread measures the delay on receipt. Returns the sorted
/// latencies in ns and, without `--producer`, the two threads' context switches. With
/// `--producer`, each record goes through a `Producer` with linger
/// 0 (`send_nowait` appends it at once) and is read by a group member.
fn latency_run(broker: &Broker, a: &PerfPubsubArgs) -> CliResult<LatencyRun> {
    let topic = topic_or_create(broker, LATENCY_TOPIC, Some(1), 1)?;
    if a.producer {
        return Ok(LatencyRun {
            latencies: latency_api(broker, a, Pacing::Spin)?,
            switches: None,
        });
    }
    let part = topic.partition(0)?;
    let size = a.record_size.max(8);
    let payloads = Payloads::new(size);
    let n = a.latency_records;
    let from = part.high_watermark();
    let to = from + n as i64;
    let origin = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (part, stop) = (part.clone(), Arc::clone(&stop));
        std::thread::spawn(move || -> CliResult<(Vec<u64>, Switches)> {
            let before = thread_switches();
            let mut lat = Vec::with_capacity(n as usize);
            let mut progress = Progress::new("perf pubsub latency (consumed)");
            let mut count = ReadCount::default();
            let on_record = |v: &[u8]| record_latency(origin, &mut lat, v);
            read_range(&part, from, to, &mut count, &mut progress, &stop, on_record)?;
            Ok((lat, switches_since(before)))
        })
    };
    let mut builder = BatchBuilder::with_capacity(1024);
    let before = thread_switches();
    let sent = send_paced(
        &payloads,
        n,
        a.latency_rate,
        origin,
        Pacing::Spin,
        |value| {
            builder.push(tidelog::record::now_ms(), None, Some(value), &[]);
            part.append_builder(&mut builder)?;
            Ok(())
        },
    );
    let producer_switches = switches_since(before);
    stop.store(true, Ordering::Release);
    let received = join(consumer)?;
    sent?;
    let (mut latencies, consumer_switches) = received?;
    latencies.sort_unstable();
    Ok(LatencyRun {
        latencies,
        switches: Some([producer_switches, consumer_switches]),
    })
}

/// What a latency run measured: the latencies (ns, sorted) and, in process without
/// `--producer`, the context switches of its producer and consumer threads.
struct LatencyRun {
    latencies: Vec<u64>,
    switches: Option<[Switches; 2]>,
}

/// Adds to `lat` the delay of a record whose first 8 bytes are its send time (ns since
/// `origin`, big-endian).
fn record_latency(origin: Instant, lat: &mut Vec<u64>, value: &[u8]) {
    let now = origin.elapsed().as_nanos() as u64;
    if let Some(stamp) = value.first_chunk::<8>() {
        lat.push(now.saturating_sub(u64::from_be_bytes(*stamp)));
    }
}

/// The latency run of `--producer` (in process or over the network): each record goes
/// through a `Producer` with linger 0 (`send_nowait` sends it at once) to partition 0
/// of the latency topic, which must exist, and is read by a member of a new group. A
/// warm-up record goes first, unmeasured; `pacing` says how the sends are paced.
fn latency_api<L>(log: &L, a: &PerfPubsubArgs, pacing: Pacing) -> CliResult<Vec<u64>>
where
    for<'a> &'a L: Into<Source> + Into<Destination>,
    L: Sync,
{
    let payloads = Payloads::new(a.record_size.max(8));
    let n = a.latency_records;
    let mut member = fresh_member(log, LATENCY_TOPIC, OffsetReset::Latest)?;
    join_member(&mut member)?;
    let producer = Producer::builder(log).linger(Duration::ZERO).build()?;
    // One warm-up record, read before the clock starts: the member has resolved its
    // position and the producer its connection, as the peer harness does.
    producer.send_nowait(
        LATENCY_TOPIC,
        ProducerRecord::new(payloads.get(0)).partition(0),
    )?;
    producer.flush()?;
    let mut warm = ReadCount::default();
    let mut quiet = Progress::new("perf pubsub latency (warm-up)");
    read_member(
        &mut member,
        1,
        &mut warm,
        &mut quiet,
        &AtomicBool::new(false),
        |_| {},
    )?;
    let origin = Instant::now();
    let stop = AtomicBool::new(false);
    let (received, sent) = std::thread::scope(|scope| {
        let consumer = scope.spawn(|| -> CliResult<Vec<u64>> {
            let mut lat = Vec::with_capacity(n as usize);
            let mut progress = Progress::new("perf pubsub latency (consumed)");
            let mut count = ReadCount::default();
            let on_record = |v: &[u8]| record_latency(origin, &mut lat, v);
            read_member(&mut member, n, &mut count, &mut progress, &stop, on_record)?;
            member.close();
            Ok(lat)
        });
        let sent = send_paced(&payloads, n, a.latency_rate, origin, pacing, |value| {
            let record = ProducerRecord::new(value).partition(0);
            Ok(producer.send_nowait(LATENCY_TOPIC, record)?)
        });
        let sent = sent.and(producer.flush().map_err(Into::into));
        stop.store(true, Ordering::Release);
        let received = consumer
            .join()
            .map_err(|_| fail!("a perf thread stopped unexpectedly"));
        (received, sent)
    });
    producer.close()?;
    sent?;
    let mut lat = received??;
    lat.sort_unstable();
    Ok(lat)
}

/// How a latency run waits for each record's send time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pacing {
    /// Sleep while far ahead of schedule and yield when close: each record leaves at
    /// its time. In process, as the peer harness paces crossbeam.
    Spin,
    /// Send every record that is due, then sleep about 50 µs: over the network, as the
    /// peer harness paces rdkafka, so that the pacing thread leaves the machine's cores
    /// to the client's network threads and the broker.
    #[cfg_attr(not(feature = "server"), allow(dead_code))]
    Bursts,
}

/// Sends `n` records with `send`, record `i` at `origin + i / rate` (or in the burst
/// after that time, see [`Pacing`]), stamping each with its send time.
fn send_paced(
    payloads: &Payloads,
    n: u64,
    rate: u64,
    origin: Instant,
    pacing: Pacing,
    mut send: impl FnMut(&[u8]) -> CliResult,
) -> CliResult {
    let mut value = Vec::new();
    let mut progress = Progress::new("perf pubsub latency (produced)");
    for i in 0..n {
        let due = Duration::from_nanos((i as u128 * 1_000_000_000 / rate as u128) as u64);
        loop {
            let now = origin.elapsed();
            if now >= due {
                break;
            }
            match pacing {
                Pacing::Bursts => std::thread::sleep(Duration::from_micros(50)),
                Pacing::Spin if due - now > Duration::from_micros(200) => {
                    std::thread::sleep(due - now - Duration::from_micros(100))
                }
                Pacing::Spin => std::thread::yield_now(),
            }
        }
        value.clear();
        value.extend_from_slice(payloads.get(i));
        let stamp = origin.elapsed().as_nanos() as u64;
        value[..8].copy_from_slice(&stamp.to_be_bytes());
        send(&value)?;
        progress.tick(i + 1);
    }
    Ok(())
}

/// Prints the result: one JSON object with `--json`, else a human summary.
pub(crate) fn report(
    mode: &str,
    records: u64,
    record_bytes: usize,
    seconds: f64,
    extra: &[(&str, String)],
    json: bool,
) -> CliResult {
    let secs = seconds.max(1e-9);
    let records_per_s = records as f64 / secs;
    let mb_per_s = records as f64 * record_bytes as f64 / (1024.0 * 1024.0) / secs;
    let mut out = Out::new();
    if json {
        let mut s = format!(
            "{{\"mode\":\"{mode}\",\"records\":{records},\"record_bytes\":{record_bytes},\"seconds\":{seconds:.6},\"records_per_s\":{records_per_s:.1},\"mb_per_s\":{mb_per_s:.3}"
        );
        for (k, v) in extra {
            s.push_str(&format!(",\"{k}\":{v}"));
        }
        s.push('}');
        out.line(s)?;
    } else {
        out.line(format_args!(
            "{mode}: {} of {} in {seconds:.3} s: {records_per_s:.0} records/s, {mb_per_s:.2} MB/s",
            counted(records, "record", "records"),
            counted(record_bytes as u64, "byte", "bytes")
        ))?;
        let details: Vec<String> = extra
            .iter()
            .map(|(k, v)| format!("{k} {}", v.trim_matches('"')))
            .collect();
        out.line(format_args!("  {}", details.join(", ")))?;
    }
    out.flush()
}

/// Prints a result that is not a record count: one JSON object with `--json` (`mode`
/// then `fields`; values are JSON already), else `summary` and a details line.
pub(crate) fn report_fields(
    mode: &str,
    summary: &str,
    fields: &[(&str, String)],
    json: bool,
) -> CliResult {
    let mut out = Out::new();
    if json {
        let mut s = format!("{{\"mode\":\"{mode}\"");
        for (k, v) in fields {
            s.push_str(&format!(",\"{k}\":{v}"));
        }
        s.push('}');
        out.line(s)?;
    } else {
        out.line(format_args!("{mode}: {summary}"))?;
        let details: Vec<String> = fields
            .iter()
            .map(|(k, v)| format!("{k} {}", v.trim_matches('"')))
            .collect();
        out.line(format_args!("  {}", details.join(", ")))?;
    }
    out.flush()
}

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmSize`), in kB; 0 where there is
/// no such file (not Linux).
fn proc_status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix(key)?
                    .strip_prefix(':')?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
        })
        .unwrap_or(0)
}

/// Space taken under `dir`, as `du` counts it (allocated blocks, so fallocated but
/// unwritten space counts) and as `du --apparent-size` does (file lengths).
fn disk_usage(dir: &Path) -> CliResult<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (mut allocated, mut apparent) = (0u64, 0u64);
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let list = |e: std::io::Error| fail!("cannot list {}: {e}", d.display());
        for entry in std::fs::read_dir(&d).map_err(list)? {
            let entry = entry.map_err(list)?;
            let m = entry
                .metadata()
                .map_err(|e| fail!("cannot stat {}: {e}", entry.path().display()))?;
            if m.is_dir() {
                dirs.push(entry.path());
            } else {
                allocated += m.blocks() * 512;
                apparent += m.len();
            }
        }
    }
    Ok((allocated, apparent))
}

/// What recovery reported, summed over partitions.
#[derive(Default)]
struct RecoverySum {
    trusted: usize,
    validated: usize,
    bytes_validated: u64,
    repaired: usize,
}

impl RecoverySum {
    fn of(partitions: &[Partition]) -> RecoverySum {
        let mut sum = RecoverySum::default();
        for p in partitions {
            let r = p.recovery_report();
            sum.trusted += r.segments_trusted;
            sum.validated += r.segments_validated;
            sum.bytes_validated += r.bytes_validated;
            sum.repaired += usize::from(!r.is_clean());
        }
        sum
    }

    /// The sums as report fields, each name prefixed with `prefix`.
    fn fields(&self, prefix: &str) -> Vec<(String, String)> {
        vec![
            (
                format!("{prefix}segments_trusted"),
                self.trusted.to_string(),
            ),
            (
                format!("{prefix}segments_validated"),
                self.validated.to_string(),
            ),
            (
                format!("{prefix}bytes_validated"),
                self.bytes_validated.to_string(),
            ),
            (
                format!("{prefix}partitions_repaired"),
                self.repaired.to_string(),
            ),
        ]
    }
}

/// Borrows owned field names for [`report_fields`].
fn as_fields(owned: &[(String, String)]) -> Vec<(&str, String)> {
    owned.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()
}

/// Appends one batch of `records` records of `size` bytes to each partition.
fn one_batch_each(partitions: &[Partition], records: usize, size: usize) -> CliResult {
    let payload = vec![0x5au8; size];
    let mut b = BatchBuilder::new();
    for _ in 0..records {
        b.push(tidelog::record::now_ms(), None, Some(&payload), &[]);
    }
    let batch = b.finish();
    for p in partitions {
        p.append_batch(&batch)?;
    }
    Ok(())
}

/// The line `perf open --setup-only` prints: whether it created the topic and the
/// disk space taken while its broker was open.
const SETUP_PREFIX: &str = "setup";

/// Creates the topic of `perf open` with one small batch in each partition if it is
/// missing. Returns whether it did, and the allocated bytes under `data` measured while
/// the writing broker is open (when each active segment holds its reserved space).
fn open_setup(data: &Path, a: &PerfOpenArgs) -> CliResult<(bool, Option<u64>)> {
    let broker = open_broker(data, true)?;
    let existed = broker.topics()?.contains(&a.topic);
    let topic = topic_or_create(&broker, &a.topic, a.partitions, OPEN_PARTITIONS)?;
    let setup = if existed {
        (false, None)
    } else {
        one_batch_each(&topic.partitions(), 10, 100)?;
        (true, Some(disk_usage(data)?.0))
    };
    drop(topic);
    close_broker(broker)?;
    Ok(setup)
}

/// Runs `perf open --setup-only` in a child process, so that nothing the setup
/// allocated stays in this process's heap and hides what the timed open allocates.
fn open_setup_in_child(data: &Path, a: &PerfOpenArgs) -> CliResult<(bool, Option<u64>)> {
    let mut setup = Command::new(current_exe()?);
    setup
        .arg("--data")
        .arg(data)
        .args(["perf", "open", "--setup-only", "--topic", &a.topic]);
    if let Some(p) = a.partitions {
        setup.args(["--partitions", &p.to_string()]);
    }
    let out = setup
        .output()
        .map_err(|e| fail!("cannot run the setup process of perf open: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        // Its `error: ...` line is ours: the setup is part of this command.
        return Err(
            match stderr.lines().find_map(|l| l.strip_prefix("error: ")) {
                Some(reason) => fail!("{reason}"),
                None => fail!("the setup process of perf open failed ({})", out.status),
            },
        );
    }
    eprint!("{stderr}");
    let line = String::from_utf8_lossy(&out.stdout);
    let mut words = line.split_whitespace();
    let parsed = (words.next() == Some(SETUP_PREFIX))
        .then(|| {
            let created = words.next()?.parse().ok()?;
            let disk = words.next()?;
            Some((created, (disk != "-").then(|| disk.parse().ok()).flatten()))
        })
        .flatten();
    parsed.ok_or_else(|| fail!("the setup process of perf open printed {line:?}"))
}

/// This executable, to run the helper processes of `perf open` and `perf recover`.
pub(crate) fn current_exe() -> CliResult<std::path::PathBuf> {
    std::env::current_exe()
        .map_err(|e| fail!("cannot find the tidelog executable to run a helper process: {e}"))
}

/// Runs `tidelog perf open`: creates the topic (one small batch per partition) if it is
/// missing, in a child process, then times `Broker::open` recovering every partition.
pub(crate) fn open(data: Option<&Path>, a: &PerfOpenArgs) -> CliResult {
    if a.partitions.is_some_and(|p| p < 1) {
        return Err(fail!("--partitions must be at least 1"));
    }
    let dir = RunDir::new(data, "perf open")?;
    let data = dir.path();
    if a.setup_only {
        let (created, disk) = open_setup(data, a)?;
        let disk = disk.map_or("-".to_string(), |d| d.to_string());
        let mut out = Out::new();
        out.line(format_args!("{SETUP_PREFIX} {created} {disk}"))?;
        return out.flush();
    }
    let (created, written_disk) = open_setup_in_child(data, a)?;
    let (closed_disk, closed_apparent) = disk_usage(data)?;

    let rss_before = proc_status_kb("VmRSS");
    let vm_before = proc_status_kb("VmSize");
    let t0 = Instant::now();
    let broker = open_broker(data, false)?;
    let seconds = t0.elapsed().as_secs_f64();
    let rss_after = proc_status_kb("VmRSS");
    let vm_after = proc_status_kb("VmSize");
    let (open_disk, _) = disk_usage(data)?;
    let topic = broker.topic(&a.topic)?;
    let partitions = topic.partitions();
    let recovery = RecoverySum::of(&partitions);
    drop(topic);
    let t1 = Instant::now();
    close_broker(broker)?;
    let close_seconds = t1.elapsed().as_secs_f64();

    let n = partitions.len();
    let mut fields = vec![
        ("topic".to_string(), format!("\"{}\"", a.topic)),
        ("partitions".to_string(), n.to_string()),
        ("created".to_string(), created.to_string()),
        ("seconds".to_string(), format!("{seconds:.6}")),
        ("close_seconds".to_string(), format!("{close_seconds:.6}")),
        ("rss_before_kb".to_string(), rss_before.to_string()),
        ("rss_after_kb".to_string(), rss_after.to_string()),
        ("vm_size_before_kb".to_string(), vm_before.to_string()),
        ("vm_size_after_kb".to_string(), vm_after.to_string()),
        (
            "disk_bytes_written".to_string(),
            written_disk.map_or("null".to_string(), |d| d.to_string()),
        ),
        ("disk_bytes_closed".to_string(), closed_disk.to_string()),
        ("disk_bytes_open".to_string(), open_disk.to_string()),
        (
            "apparent_bytes_closed".to_string(),
            closed_apparent.to_string(),
        ),
    ];
    fields.extend(recovery.fields(""));
    let rss_per = (rss_after.saturating_sub(rss_before)) as f64 / n.max(1) as f64;
    let summary = format!(
        "{} of topic {:?} reopened in {seconds:.3} s, RSS +{} kB ({rss_per:.1} kB a partition)",
        counted(n as u64, "partition", "partitions"),
        a.topic,
        rss_after.saturating_sub(rss_before)
    );
    report_fields("open", &summary, &as_fields(&fields), a.json)
}

/// Parses a size: a number with an optional K, M, G or T suffix (powers of 1024, an
/// optional trailing `B` or `iB`).
fn parse_size(s: &str) -> CliResult<u64> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => {
                    return Err(fail!(
                        "--bytes {s:?} has an unknown unit (use K, M, G or T)"
                    ));
                }
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| fail!("--bytes {s:?} is not a size such as 2M or 10G"))
}

/// What the writer process acknowledged: the log end offset after its last append,
/// the bytes of batches it appended and how long that took.
struct WriterAck {
    end_offset: i64,
    bytes: u64,
    seconds: f64,
}

/// The line the writer prints once its last append returned.
const ACK_PREFIX: &str = "acknowledged";

/// Runs `tidelog perf recover`: a child process appends `--bytes` of batches to one
/// partition and is killed with SIGKILL once its last append is acknowledged; then
/// `Broker::open` is timed recovering the log, and timed again after a clean close.
pub(crate) fn recover(data: Option<&Path>, a: &PerfRecoverArgs) -> CliResult {
    let bytes = parse_size(&a.bytes)?;
    if a.batch == 0 {
        return Err(fail!("--batch must be at least 1"));
    }
    if !(0.0..=3600.0).contains(&a.wait_before_kill) {
        return Err(fail!(
            "--wait-before-kill must be between 0 and 3600 seconds"
        ));
    }
    let dir = RunDir::new(data, "perf recover")?;
    let data = dir.path();
    let mut child = Command::new(current_exe()?)
        .arg("--data")
        .arg(data)
        .args(["perf", "recover-writer", "--topic", &a.topic])
        .args(["--bytes", &bytes.to_string()])
        .args(["--record-size", &a.record_size.to_string()])
        .args(["--batch", &a.batch.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail!("cannot start the writer process: {e}"))?;
    let mut line = String::new();
    let read = match child.stdout.take() {
        Some(out) => BufReader::new(out).read_line(&mut line).map(|_| ()),
        None => Ok(()),
    };
    if line.starts_with(ACK_PREFIX) {
        std::thread::sleep(Duration::from_secs_f64(a.wait_before_kill));
    }
    // SIGKILL (std's `kill` on Unix): no destructor, no close, no checkpoint.
    let killed = child.kill();
    let status = child
        .wait()
        .map_err(|e| fail!("cannot wait for the writer process: {e}"))?;
    let ack = parse_ack(&line).ok_or_else(|| {
        fail!(
            "the writer process ended ({status}) before acknowledging its last append{}",
            read.err().map_or(String::new(), |e| format!(": {e}"))
        )
    })?;
    killed.map_err(|e| fail!("cannot kill the writer process: {e}"))?;

    let t0 = Instant::now();
    let broker = open_broker(data, false)?;
    let seconds = t0.elapsed().as_secs_f64();
    let part = broker.topic(&a.topic)?.partition(0)?;
    let recovery = RecoverySum::of(std::slice::from_ref(&part));
    let end = part.log_end_offset();
    let segments = part.segment_count();
    let size = part.size_bytes();
    drop(part);
    let t1 = Instant::now();
    close_broker(broker)?;
    let close_seconds = t1.elapsed().as_secs_f64();
    if end < ack.end_offset {
        return Err(fail!(
            "recovery lost acknowledged records of {}-0: the log ends at offset {end}, the writer was acknowledged up to offset {}",
            a.topic,
            ack.end_offset
        ));
    }

    // The same log once more, after a clean close wrote the checkpoint.
    let t2 = Instant::now();
    let broker = open_broker(data, false)?;
    let clean_seconds = t2.elapsed().as_secs_f64();
    let clean = RecoverySum::of(&broker.topic(&a.topic)?.partitions());
    close_broker(broker)?;

    let mut fields = vec![
        ("topic".to_string(), format!("\"{}\"", a.topic)),
        ("bytes_written".to_string(), ack.bytes.to_string()),
        ("write_seconds".to_string(), format!("{:.6}", ack.seconds)),
        (
            "wait_before_kill".to_string(),
            a.wait_before_kill.to_string(),
        ),
        ("log_bytes".to_string(), size.to_string()),
        ("segments".to_string(), segments.to_string()),
        ("records".to_string(), end.to_string()),
        (
            "acknowledged_end_offset".to_string(),
            ack.end_offset.to_string(),
        ),
        ("seconds".to_string(), format!("{seconds:.6}")),
    ];
    fields.extend(recovery.fields(""));
    fields.push(("close_seconds".to_string(), format!("{close_seconds:.6}")));
    fields.push(("clean_seconds".to_string(), format!("{clean_seconds:.6}")));
    fields.extend(clean.fields("clean_"));
    let summary = format!(
        "{} in {} recovered after SIGKILL in {seconds:.3} s ({} validated); after a clean close in {clean_seconds:.3} s",
        counted(size, "byte", "bytes"),
        counted(segments as u64, "segment", "segments"),
        counted(recovery.bytes_validated, "byte", "bytes")
    );
    report_fields("recover", &summary, &as_fields(&fields), a.json)
}

/// Parses the writer's `acknowledged END BYTES SECONDS` line.
fn parse_ack(line: &str) -> Option<WriterAck> {
    let mut words = line.split_whitespace();
    if words.next()? != ACK_PREFIX {
        return None;
    }
    Some(WriterAck {
        end_offset: words.next()?.parse().ok()?,
        bytes: words.next()?.parse().ok()?,
        seconds: words.next()?.parse().ok()?,
    })
}

/// Runs `tidelog perf recover-writer`: appends `--bytes` of batches to partition 0 of
/// the topic, prints `acknowledged END BYTES SECONDS`, then waits to be killed (or for
/// its standard input to close, when it leaves without closing anything either).
pub(crate) fn recover_writer(data: Option<&Path>, a: &PerfRecoverWriterArgs) -> CliResult {
    let data = data.ok_or_else(|| fail!("perf recover-writer needs --data DIR"))?;
    let broker = open_broker(data, true)?;
    let topic = topic_or_create(&broker, &a.topic, None, 1)?;
    check_batch_size(&topic, a.batch, a.record_size, 0)?;
    let part = topic.partition(0)?;
    let payloads = Payloads::new(a.record_size);
    let mut progress = Progress::new("perf recover (written)");
    let mut builder = BatchBuilder::with_capacity(64 * 1024);
    let (mut written, mut records) = (0u64, 0u64);
    let t0 = Instant::now();
    while written < a.bytes {
        let ts = tidelog::record::now_ms();
        for i in 0..a.batch as u64 {
            builder.push(ts, None, Some(payloads.get(records + i)), &[]);
        }
        written +=
            builder.finish_with(|batch| part.append_batch(batch).map(|_| batch.len()))? as u64;
        records += a.batch as u64;
        progress.tick(records);
    }
    let seconds = t0.elapsed().as_secs_f64();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{ACK_PREFIX} {} {written} {seconds:.6}",
        part.log_end_offset()
    )
    .and_then(|()| out.flush())
    .map_err(crate::out::stdout_err)?;
    let _ = std::io::stdin().read(&mut [0u8]);
    // Leave as a crash would: no close, no checkpoint.
    std::process::exit(0)
}

/// Runs `tidelog perf lookup`: `read(offset, 1)` at uniformly random offsets of the
/// topic's partitions; latency percentiles of the call.
pub(crate) fn lookup(data: Option<&Path>, a: &PerfLookupArgs) -> CliResult {
    if a.samples == 0 {
        return Err(fail!("--samples must be at least 1"));
    }
    let broker = open_broker(written_data(data, "perf lookup")?, false)?;
    let topic = broker.topic(&a.topic)?;
    let ranges: Vec<(Partition, i64, u64)> = topic
        .partitions()
        .iter()
        .filter_map(|p| {
            let (from, to) = (p.log_start_offset(), p.high_watermark());
            (to > from).then(|| (p.clone(), from, (to - from) as u64))
        })
        .collect();
    let records: u64 = ranges.iter().map(|r| r.2).sum();
    if records == 0 {
        return Err(fail!("topic {:?} has no records to look up", a.topic));
    }
    let log_bytes: u64 = ranges.iter().map(|r| r.0.size_bytes()).sum();
    if a.warm {
        for (p, from, n) in &ranges {
            touch_pages(p, *from, from + *n as i64)?;
        }
    }
    let mut rng = Rng::new();
    let mut lat = Vec::with_capacity(a.samples as usize);
    for _ in 0..a.samples {
        let (p, from, n) = &ranges[rng.below(ranges.len() as u64) as usize];
        let offset = from + rng.below(*n) as i64;
        let t = Instant::now();
        let slice = p.read(offset, 1)?;
        let ns = t.elapsed().as_nanos() as u64;
        if !(slice.base_offset() <= offset && offset < slice.next_offset()) {
            return Err(fail!(
                "read at offset {offset} of {}-{} returned offsets {}..{}",
                p.topic(),
                p.index(),
                slice.base_offset(),
                slice.next_offset()
            ));
        }
        lat.push(ns);
    }
    drop(ranges);
    drop(topic);
    close_broker(broker)?;
    lat.sort_unstable();
    let pct = |q: f64| {
        let i = ((lat.len() as f64 * q) as usize).min(lat.len() - 1);
        lat[i] as f64 / 1000.0
    };
    let (p50, p99, p999) = (pct(0.5), pct(0.99), pct(0.999));
    let max = lat[lat.len() - 1] as f64 / 1000.0;
    let fields = [
        ("topic", format!("\"{}\"", a.topic)),
        ("samples", a.samples.to_string()),
        ("warm", a.warm.to_string()),
        ("records", records.to_string()),
        ("log_bytes", log_bytes.to_string()),
        ("p50_us", format!("{p50:.3}")),
        ("p99_us", format!("{p99:.3}")),
        ("p999_us", format!("{p999:.3}")),
        ("max_us", format!("{max:.3}")),
    ];
    let summary = format!(
        "{} over {} ({}): p50 {p50:.2} us, p99 {p99:.2} us, p99.9 {p999:.2} us",
        counted(a.samples, "random read", "random reads"),
        counted(records, "record", "records"),
        counted(log_bytes, "byte", "bytes")
    );
    report_fields("lookup", &summary, &fields, a.json)
}

/// Reads `p` from `from` to `to`, touching one byte of every page, so that the log's
/// pages are mapped in this process.
fn touch_pages(p: &Partition, from: i64, to: i64) -> CliResult {
    let mut sum = 0u64;
    let mut pos = from;
    while pos < to {
        let slice = p.read(pos, READ_BYTES)?;
        sum += slice.iter().step_by(4096).map(|&b| b as u64).sum::<u64>();
        pos = slice.next_offset().max(pos + 1);
    }
    std::hint::black_box(sum);
    Ok(())
}
