//! `tidelog perf produce|consume|pubsub`, as kafka-producer-perf-test.
//!
//! `../shared/peers/compare.sh` drives these with exactly the options defined in
//! `cli.rs` and reads the one JSON object printed with `--json`. Payloads are generated
//! before the clock starts; records go through the public append path
//! (`BatchBuilder` then `Partition::append_batch`, B records per call) and are read back
//! through `Partition::read` with every batch's CRC checked, which touches every byte.
//! A progress line goes to stderr at most once a second.

use crate::cli::{PerfConsumeArgs, PerfProduceArgs, PerfPubsubArgs};
use crate::common::{checked_batches, close_broker, now_ms, open_broker};
use crate::out::Out;
use crate::{CliResult, fail};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tidelog::{BatchBuilder, Broker, Partition, Topic, TopicConfig};

/// Bytes read from a partition per call.
const READ_BYTES: usize = 4 << 20;
/// Most bytes of distinct payloads generated up front.
const POOL_BYTES: usize = 64 << 20;
/// Topic of the pubsub throughput run.
const PUBSUB_TOPIC: &str = "perf-pubsub";
/// Topic of the pubsub latency run.
const LATENCY_TOPIC: &str = "perf-latency";

/// Random payloads generated before timing, used round-robin.
struct Payloads {
    pool: Vec<Vec<u8>>,
}

impl Payloads {
    fn new(size: usize) -> Payloads {
        let count = (POOL_BYTES / size.max(1)).clamp(1, 1024);
        // xorshift64*: fast, and random enough that nothing downstream could compress
        // the bytes.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let pool = (0..count)
            .map(|_| {
                (0..size)
                    .map(|_| {
                        state ^= state >> 12;
                        state ^= state << 25;
                        state ^= state >> 27;
                        (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
                    })
                    .collect()
            })
            .collect();
        Payloads { pool }
    }

    #[inline]
    fn get(&self, i: u64) -> &[u8] {
        &self.pool[(i % self.pool.len() as u64) as usize]
    }
}

/// A progress line on stderr, at most once a second.
struct Progress {
    label: &'static str,
    start: Instant,
    last: Instant,
    last_count: u64,
}

impl Progress {
    fn new(label: &'static str) -> Progress {
        let now = Instant::now();
        Progress {
            label,
            start: now,
            last: now,
            last_count: 0,
        }
    }

    #[inline]
    fn tick(&mut self, count: u64) {
        let now = Instant::now();
        let since = now.duration_since(self.last);
        if since >= Duration::from_secs(1) {
            let rate = (count - self.last_count) as f64 / since.as_secs_f64();
            eprintln!(
                "{}: {count} records after {:.1} s, {rate:.0} records/s",
                self.label,
                now.duration_since(self.start).as_secs_f64()
            );
            self.last = now;
            self.last_count = count;
        }
    }
}

/// Appends `n` records of `payloads` to `partitions`, `batch` records per call,
/// batches round-robin over the partitions. Stops early when `stop` is set.
fn produce_records(
    partitions: &[Partition],
    payloads: &Payloads,
    n: u64,
    batch: usize,
    progress: &mut Progress,
    stop: &AtomicBool,
) -> CliResult {
    let batch = batch.max(1) as u64;
    let mut builder = BatchBuilder::with_capacity(64 * 1024);
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut sent = 0u64;
    let mut next = 0usize;
    while sent < n && !stop.load(Ordering::Relaxed) {
        let k = batch.min(n - sent);
        let ts = now_ms();
        for i in 0..k {
            builder.push(ts, None, Some(payloads.get(sent + i)), &[]);
        }
        buf.clear();
        builder.finish_into(&mut buf);
        partitions[next].append_batch(&buf)?;
        next = (next + 1) % partitions.len();
        sent += k;
        progress.tick(sent);
    }
    Ok(())
}

/// The topic `name`, created with `partitions` partitions if it does not exist.
fn topic_or_create(broker: &Broker, name: &str, partitions: i32) -> CliResult<Topic> {
    match broker.topic(name) {
        Ok(t) => Ok(t),
        Err(tidelog::Error::UnknownTopic(_)) => {
            Ok(broker.create_topic(name, partitions, TopicConfig::new())?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Refuses a batch that the topic's `max.message.bytes` would reject, before timing.
fn check_batch_size(topic: &Topic, batch: usize, record_size: usize) -> CliResult {
    let mut b = BatchBuilder::new();
    let payload = vec![0u8; record_size];
    for _ in 0..batch.max(1) {
        b.push(now_ms(), None, Some(&payload), &[]);
    }
    let size = b.size_bytes();
    let max = topic.partition(0)?.log().config().max_message_bytes as usize;
    if size > max {
        return Err(fail!(
            "--batch {batch} records of --record-size {record_size} bytes make batches of {size} bytes, over topic {:?}'s max.message.bytes of {max}",
            topic.name()
        ));
    }
    Ok(())
}

/// Runs `tidelog perf produce`.
pub(crate) fn produce(data: &Path, a: &PerfProduceArgs) -> CliResult {
    if a.batch == 0 {
        return Err(fail!("--batch must be at least 1"));
    }
    let broker = open_broker(data, true)?;
    let topic = topic_or_create(&broker, &a.topic, a.partitions)?;
    check_batch_size(&topic, a.batch, a.record_size)?;
    let partitions = topic.partitions();
    let payloads = Payloads::new(a.record_size);
    let mut progress = Progress::new("perf produce");
    let never = AtomicBool::new(false);
    let t0 = Instant::now();
    produce_records(
        &partitions,
        &payloads,
        a.records,
        a.batch,
        &mut progress,
        &never,
    )?;
    let seconds = t0.elapsed().as_secs_f64();
    close_broker(broker)?;
    let acks = if a.acks == "-1" { "all" } else { &a.acks };
    let extra = [
        ("batch", a.batch.to_string()),
        ("partitions", partitions.len().to_string()),
        ("acks", format!("\"{acks}\"")),
    ];
    report("produce", a.records, a.record_size, seconds, &extra, a.json)
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
            if stop.load(Ordering::Relaxed) {
                return Err(fail!("the producer stopped before offset {to}"));
            }
            p.wait_for(pos, Duration::from_millis(100));
            continue;
        }
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
        pos = slice.next_offset().max(pos + 1);
        progress.tick(count.records);
    }
    Ok(())
}

/// Runs `tidelog perf consume`.
pub(crate) fn consume(data: &Path, a: &PerfConsumeArgs) -> CliResult {
    let broker = open_broker(data, false)?;
    let topic = broker.topic(&a.topic)?;
    let partitions = topic.partitions();
    let mut progress = Progress::new("perf consume");
    let mut count = ReadCount::default();
    let never = AtomicBool::new(false);
    // Touch the first byte of every value too, so that no value goes unread even if
    // the CRC pass were ever skipped.
    let mut sum = 0u64;
    let t0 = Instant::now();
    for p in partitions.iter() {
        let (from, to) = (p.log_start_offset(), p.high_watermark());
        read_range(p, from, to, &mut count, &mut progress, &never, |v| {
            sum = sum.wrapping_add(v.first().copied().unwrap_or(0) as u64);
        })?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    std::hint::black_box(sum);
    close_broker(broker)?;
    let record_bytes = count.bytes.checked_div(count.records).unwrap_or(0) as usize;
    let extra = [
        ("partitions", partitions.len().to_string()),
        ("bytes", count.bytes.to_string()),
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

/// Runs `tidelog perf pubsub`: a throughput run with a producer and a consumer thread,
/// then a latency run paced at `latency_rate`.
pub(crate) fn pubsub(data: &Path, a: &PerfPubsubArgs) -> CliResult {
    if a.batch == 0 || a.latency_rate == 0 {
        return Err(fail!("--batch and --latency-rate must be at least 1"));
    }
    let broker = open_broker(data, true)?;
    let topic = topic_or_create(&broker, PUBSUB_TOPIC, 1)?;
    check_batch_size(&topic, a.batch, a.record_size)?;
    let part = topic.partition(0)?;
    let payloads = Payloads::new(a.record_size);

    // Throughput: both threads at once; the clock stops when the consumer has read
    // the last record.
    let from = part.high_watermark();
    let to = from + a.records as i64;
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let consumer = {
        let (part, stop) = (part.clone(), Arc::clone(&stop));
        std::thread::spawn(move || -> CliResult<(ReadCount, Instant)> {
            let mut progress = Progress::new("perf pubsub (consumed)");
            let mut count = ReadCount::default();
            read_range(&part, from, to, &mut count, &mut progress, &stop, |_| {})?;
            Ok((count, Instant::now()))
        })
    };
    let mut progress = Progress::new("perf pubsub (produced)");
    let produced = produce_records(
        std::slice::from_ref(&part),
        &payloads,
        a.records,
        a.batch,
        &mut progress,
        &AtomicBool::new(false),
    );
    stop.store(true, Ordering::Relaxed);
    let consumed = join(consumer)?;
    produced?;
    let (count, done) = consumed?;
    let seconds = done.duration_since(t0).as_secs_f64();

    let latencies = latency_run(&broker, a)?;
    close_broker(broker)?;
    let pct = |q: f64| {
        let i = ((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1));
        latencies.get(i).map_or(0.0, |&ns| ns as f64 / 1000.0)
    };
    let extra = [
        ("batch", a.batch.to_string()),
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
    report(
        "pubsub",
        count.records,
        a.record_size,
        seconds,
        &extra,
        a.json,
    )
}

/// Joins a thread, turning a panic into an error.
fn join<T>(h: std::thread::JoinHandle<CliResult<T>>) -> CliResult<CliResult<T>> {
    h.join()
        .map_err(|_| fail!("a perf thread stopped unexpectedly"))
}

/// The latency run: `latency_records` records sent at `latency_rate` per second, one
/// per append, each carrying its send time (ns since a shared clock origin) in its
/// first 8 bytes; the consumer thread measures the delay on receipt. Returns the sorted
/// latencies in ns.
fn latency_run(broker: &Broker, a: &PerfPubsubArgs) -> CliResult<Vec<u64>> {
    let topic = topic_or_create(broker, LATENCY_TOPIC, 1)?;
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
        std::thread::spawn(move || -> CliResult<Vec<u64>> {
            let mut lat = Vec::with_capacity(n as usize);
            let mut progress = Progress::new("perf pubsub latency (consumed)");
            let mut count = ReadCount::default();
            read_range(&part, from, to, &mut count, &mut progress, &stop, |v| {
                let now = origin.elapsed().as_nanos() as u64;
                if let Some(stamp) = v.first_chunk::<8>() {
                    lat.push(now.saturating_sub(u64::from_be_bytes(*stamp)));
                }
            })?;
            Ok(lat)
        })
    };
    let sent = send_paced(&part, &payloads, n, a.latency_rate, origin);
    stop.store(true, Ordering::Relaxed);
    let received = join(consumer)?;
    sent?;
    let mut lat = received?;
    lat.sort_unstable();
    Ok(lat)
}

/// Sends `n` records, record `i` at `origin + i / rate`, stamping each with its send
/// time. Sleeps while far ahead of schedule and yields when close, so that the
/// consumer thread keeps a core.
fn send_paced(
    part: &Partition,
    payloads: &Payloads,
    n: u64,
    rate: u64,
    origin: Instant,
) -> CliResult {
    let mut builder = BatchBuilder::with_capacity(1024);
    let mut value = Vec::new();
    let mut buf = Vec::new();
    let mut progress = Progress::new("perf pubsub latency (produced)");
    for i in 0..n {
        let due = Duration::from_nanos((i as u128 * 1_000_000_000 / rate as u128) as u64);
        loop {
            let now = origin.elapsed();
            if now >= due {
                break;
            }
            let ahead = due - now;
            if ahead > Duration::from_micros(200) {
                std::thread::sleep(ahead - Duration::from_micros(100));
            } else {
                std::thread::yield_now();
            }
        }
        value.clear();
        value.extend_from_slice(payloads.get(i));
        let stamp = origin.elapsed().as_nanos() as u64;
        value[..8].copy_from_slice(&stamp.to_be_bytes());
        builder.push(now_ms(), None, Some(&value), &[]);
        buf.clear();
        builder.finish_into(&mut buf);
        part.append_batch(&buf)?;
        progress.tick(i + 1);
    }
    Ok(())
}

/// Prints the result: one JSON object with `--json`, else a human summary.
fn report(
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
            "{mode}: {records} records of {record_bytes} bytes in {seconds:.3} s: {records_per_s:.0} records/s, {mb_per_s:.2} MB/s"
        ))?;
        let details: Vec<String> = extra
            .iter()
            .map(|(k, v)| format!("{k} {}", v.trim_matches('"')))
            .collect();
        out.line(format_args!("  {}", details.join(", ")))?;
    }
    out.flush()
}
