//! Producer and consumer benchmarks: send (single and batched), poll throughput,
//! live thread-to-thread publish-subscribe against crossbeam-channel, and end-to-end
//! latency (p50 / p99 printed).
//!
//! Run with `cargo bench --bench broker`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tidelog::{
    BatchBuilder, Broker, Consumer, ConsumerConfig, OffsetReset, Producer, ProducerRecord,
    TopicConfig,
};

const VALUE: [u8; 100] = [7u8; 100];

fn broker(dir: &std::path::Path, topic: &str) -> Broker {
    let broker = Broker::open(dir).expect("open broker");
    broker
        .create_topic(topic, 1, TopicConfig::new().retention(None))
        .expect("create topic");
    broker
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn send(c: &mut Criterion) {
    let dir = tempdir();
    let broker = broker(dir.path(), "send");
    let producer = Producer::new(&broker).expect("producer");
    let mut g = c.benchmark_group("send");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("async_1000x100B", |b| {
        b.iter(|| {
            for _ in 0..1000 {
                drop(producer.send_async("send", ProducerRecord::new(&VALUE).partition(0)));
            }
        })
    });
    g.bench_function("nowait_1000x100B", |b| {
        b.iter(|| {
            for _ in 0..1000 {
                producer
                    .send_nowait("send", ProducerRecord::new(&VALUE).partition(0))
                    .expect("send_nowait");
            }
        })
    });
    g.bench_function("batch_1000x100B", |b| {
        let records = vec![ProducerRecord::new(&VALUE).partition(0); 1000];
        b.iter(|| producer.send_batch("send", &records).expect("send_batch"))
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("sync_1x100B", |b| {
        b.iter(|| {
            producer
                .send("send", ProducerRecord::new(&VALUE).partition(0))
                .expect("send")
        })
    });
    g.finish();
}

fn poll(c: &mut Criterion) {
    let dir = tempdir();
    let broker = broker(dir.path(), "poll");
    let producer = Producer::new(&broker).expect("producer");
    const N: u64 = 200_000;
    let records = vec![ProducerRecord::new(&VALUE).partition(0); 1000];
    for _ in 0..N / 1000 {
        producer.send_batch("poll", &records).expect("fill");
    }
    let mut consumer = Consumer::new(
        &broker,
        ConsumerConfig::default().auto_offset_reset(OffsetReset::Earliest),
    );
    consumer.assign(&[("poll", 0)]).expect("assign");
    let mut g = c.benchmark_group("poll");
    g.throughput(Throughput::Elements(N));
    g.bench_function("read_200k_records", |b| {
        b.iter(|| {
            consumer.seek_to_beginning().expect("seek");
            let mut n = 0u64;
            while n < N {
                let batch = consumer.poll(Duration::from_secs(1)).expect("poll");
                for r in batch.iter() {
                    n += r.expect("record").value.map_or(0, |v| v.len() as u64 / 100);
                }
            }
            n
        })
    });
    g.finish();
}

/// A consumer thread at the end of `topic`-0 that returns once it read `n` records.
fn spawn_reader(broker: &Broker, topic: &str, n: u64) -> std::thread::JoinHandle<()> {
    let mut consumer = Consumer::new(broker, ConsumerConfig::default());
    consumer.assign(&[(topic, 0)]).expect("assign");
    consumer.seek_to_end().expect("seek");
    std::thread::spawn(move || {
        let mut got = 0u64;
        while got < n {
            let batch = consumer.poll(Duration::from_secs(5)).expect("poll");
            for r in batch.iter() {
                got += u64::from(r.expect("record").value.is_some());
            }
        }
    })
}

/// One producer thread, one consumer thread, `n` records of 100 bytes.
fn pubsub_once(broker: &Broker, topic: &str, n: u64) -> Duration {
    let producer = Producer::builder(broker)
        .linger(Duration::from_millis(1))
        .build()
        .expect("producer");
    let reader = spawn_reader(broker, topic, n);
    let start = Instant::now();
    for _ in 0..n {
        producer
            .send_nowait(topic, ProducerRecord::new(&VALUE).partition(0))
            .expect("send_nowait");
    }
    producer.flush().expect("flush");
    reader.join().expect("reader");
    start.elapsed()
}

/// The same, with the producer thread building whole batches itself and appending
/// them to the partition (the path the network server's Produce takes).
fn pubsub_prebatched_once(broker: &Broker, topic: &str, n: u64) -> Duration {
    let partition = broker
        .topic(topic)
        .and_then(|t| t.partition(0))
        .expect("partition");
    let reader = spawn_reader(broker, topic, n);
    let start = Instant::now();
    let mut builder = BatchBuilder::with_capacity(128 * 1024);
    let mut sent = 0;
    while sent < n {
        let ts = start.elapsed().as_millis() as i64;
        for _ in 0..(n - sent).min(1000) {
            builder.push(ts, None, Some(&VALUE), &[]);
            sent += 1;
        }
        partition.append_batch(&builder.finish()).expect("append");
    }
    reader.join().expect("reader");
    start.elapsed()
}

fn crossbeam_once(n: u64) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(4096);
    let start = Instant::now();
    let reader = std::thread::spawn(move || {
        let mut got = 0u64;
        while got < n {
            got += u64::from(!rx.recv().expect("recv").is_empty());
        }
    });
    for _ in 0..n {
        tx.send(VALUE.to_vec()).expect("send");
    }
    reader.join().expect("reader");
    start.elapsed()
}

fn pubsub(c: &mut Criterion) {
    let dir = tempdir();
    let broker = broker(dir.path(), "live");
    const N: u64 = 100_000;
    let mut g = c.benchmark_group("pubsub_thread_to_thread");
    g.throughput(Throughput::Elements(N));
    g.sample_size(10);
    g.bench_function("tidelog_100k_x100B", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| pubsub_once(&broker, "live", N)).sum())
    });
    g.bench_function("tidelog_prebatched_100k_x100B", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| pubsub_prebatched_once(&broker, "live", N))
                .sum()
        })
    });
    g.bench_function("crossbeam_vec_100k_x100B", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| crossbeam_once(N)).sum())
    });
    g.finish();
}

/// End-to-end latency of single records: send (sync) on one thread, the consumer
/// blocked in `poll` on another; prints p50 and p99.
fn latency(_c: &mut Criterion) {
    let dir = tempdir();
    let broker = broker(dir.path(), "lat");
    let producer = Producer::new(&broker).expect("producer");
    let mut consumer = Consumer::new(&broker, ConsumerConfig::default());
    consumer.assign(&[("lat", 0)]).expect("assign");
    consumer.seek_to_end().expect("seek");
    let received = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&received);
    const N: u64 = 20_000;
    let reader = std::thread::spawn(move || {
        let mut got = 0;
        while got < N {
            let batch = consumer.poll(Duration::from_secs(5)).expect("poll");
            for r in batch.iter() {
                r.expect("record");
                got += 1;
                seen.store(got, Ordering::Release);
            }
        }
    });
    let mut samples = Vec::with_capacity(N as usize);
    for i in 1..=N {
        let t0 = Instant::now();
        producer
            .send("lat", ProducerRecord::new(&VALUE).partition(0))
            .expect("send");
        while received.load(Ordering::Acquire) < i {
            std::hint::spin_loop();
        }
        samples.push(t0.elapsed());
    }
    reader.join().expect("reader");
    samples.sort_unstable();
    println!(
        "end-to-end latency over {N} records: p50 {:?}, p99 {:?}",
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100]
    );
}

criterion_group!(benches, send, poll, pubsub, latency);
criterion_main!(benches);
