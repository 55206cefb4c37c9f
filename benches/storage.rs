//! Storage benchmarks (criterion):
//!
//! * `append/batch_of_{1,100,1000}`: 100-byte records appended in batches of 1, 100 and
//!   1000 (no fsync: the page cache, as with Kafka's defaults); throughput in records/s.
//! * `read/sequential`: reading every record of a 100,000-record log from the start,
//!   decoding each record; throughput in records/s.
//! * `read/random_offset_lookup`: `read(offset, 1)` at random offsets of a log of at
//!   least 5 segments (index binary search plus header walk); time per lookup.
//! * `recovery/unflushed_active_segment`: opening a log whose only (active) segment was
//!   never flushed, so every batch is CRC-checked. 1 GiB as in the issue; set
//!   `TIDELOG_BENCH_RECOVERY_BYTES` (e.g. `64M`, `256M`, `1G` or a byte count) to shrink it.
//!
//! Run: `cargo bench --bench storage` (or `-- --quick` for a short pass).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};
use tidelog::storage::PartitionLog;
use tidelog::{BatchBuilder, LogConfig};

const RECORD_BYTES: usize = 100;

fn batch_of(records: usize) -> Vec<u8> {
    let mut b = BatchBuilder::with_capacity(records * (RECORD_BYTES + 16) + 64);
    let value = [0x5Au8; RECORD_BYTES];
    for i in 0..records {
        b.push(1_700_000_000_000 + i as i64, None, Some(&value), &[]);
    }
    b.finish()
}

fn open(dir: &Path, config: LogConfig) -> PartitionLog {
    PartitionLog::open(dir, "bench-0", config).expect("open bench log")
}

fn config(segment_bytes: u64) -> LogConfig {
    let mut c = LogConfig::default();
    c.segment_bytes = segment_bytes;
    c
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    for records in [1usize, 100, 1000] {
        let batch = batch_of(records);
        let tmp = tempfile::tempdir().expect("tempdir");
        let log = open(tmp.path(), config(128 << 20));
        group.throughput(Throughput::Elements(records as u64));
        group.bench_with_input(BenchmarkId::new("batch_of", records), &batch, |b, batch| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    // Appends in chunks; old segments are dropped between chunks
                    // (untimed) so that the disk use stays bounded.
                    let n = (iters - done).min(1 + (256 << 20) / batch.len() as u64);
                    let t = Instant::now();
                    for _ in 0..n {
                        black_box(log.append(batch).expect("append"));
                    }
                    spent += t.elapsed();
                    done += n;
                    if log.size_bytes() > 512 << 20 {
                        log.delete_records_before(log.log_end_offset())
                            .expect("trim");
                    }
                }
                spent
            });
        });
        log.close().expect("close");
    }
    group.finish();
}

fn fill(log: &PartitionLog, records: usize, per_batch: usize) {
    let batch = batch_of(per_batch);
    for _ in 0..records / per_batch {
        log.append(&batch).expect("append");
    }
}

fn read(c: &mut Criterion) {
    let mut group = c.benchmark_group("read");

    let tmp = tempfile::tempdir().expect("tempdir");
    let log = open(tmp.path(), config(1 << 30));
    const RECORDS: usize = 100_000;
    fill(&log, RECORDS, 100);
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.bench_function("sequential", |b| {
        b.iter(|| {
            let mut at = log.log_start_offset();
            let end = log.log_end_offset();
            let mut n = 0u64;
            while at < end {
                let s = log.read(at, 1 << 20).expect("read");
                for batch in s.batches() {
                    for r in batch.records() {
                        n += r.expect("record").value.map_or(0, |v| v.len() as u64);
                    }
                }
                at = s.next_offset();
            }
            black_box(n)
        });
    });
    log.close().expect("close");

    // At least 5 segments: 4 MiB segments, ~30 MiB of data.
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = open(tmp.path(), config(4 << 20));
    fill(&log, 250_000, 100);
    assert!(log.segment_count() >= 5, "{} segments", log.segment_count());
    let end = log.log_end_offset() as u64;
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    group.throughput(Throughput::Elements(1));
    group.bench_function(
        BenchmarkId::new(
            "random_offset_lookup",
            format!("{}_segments", log.segment_count()),
        ),
        |b| {
            b.iter(|| {
                // xorshift64*
                rng ^= rng >> 12;
                rng ^= rng << 25;
                rng ^= rng >> 27;
                let offset = (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % end) as i64;
                let s = log.read(offset, 1).expect("lookup");
                black_box(s.base_offset())
            });
        },
    );
    log.close().expect("close");
    group.finish();
}

/// `TIDELOG_BENCH_RECOVERY_BYTES`: a byte count with an optional K/M/G suffix.
fn recovery_bytes() -> u64 {
    let Ok(v) = std::env::var("TIDELOG_BENCH_RECOVERY_BYTES") else {
        return 1 << 30;
    };
    let v = v.trim();
    let (num, shift) = match v.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&v[..v.len() - 1], 10),
        Some('M') => (&v[..v.len() - 1], 20),
        Some('G') => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    num.parse::<u64>()
        .map(|n| n << shift)
        .unwrap_or_else(|_| panic!("TIDELOG_BENCH_RECOVERY_BYTES={v} is not a size"))
}

fn recovery(c: &mut Criterion) {
    let bytes = recovery_bytes();
    let mut group = c.benchmark_group("recovery");
    group.sample_size(10);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("bench-0");
    // One active segment holding `bytes` of batches, never fsynced or checkpointed.
    let seg_bytes = (bytes + (64 << 20)).min(i32::MAX as u64);
    let log = open(&dir, config(seg_bytes));
    let batch = batch_of(1000);
    while log.size_bytes() + (batch.len() as u64) <= bytes {
        log.append(&batch).expect("append");
    }
    let size = log.size_bytes();
    assert_eq!(log.segment_count(), 1);
    drop(log); // no close: nothing is flushed, no checkpoint is written
    let checkpoint = dir.join("partition.checkpoint");
    group.throughput(Throughput::Bytes(size));
    group.bench_function(
        BenchmarkId::new("unflushed_active_segment", format!("{}MiB", size >> 20)),
        |b| {
            b.iter_custom(|iters| {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    // Untimed: forget any recovery point so that the whole segment is
                    // validated again.
                    let _ = std::fs::remove_file(&checkpoint);
                    let t = Instant::now();
                    let log = open(&dir, config(seg_bytes));
                    spent += t.elapsed();
                    let r = log.recovery_report();
                    assert_eq!(r.segments_validated, 1, "{r:?}");
                    assert_eq!(r.bytes_validated, size, "{r:?}");
                    drop(log);
                }
                spent
            });
        },
    );
    group.finish();
}

criterion_group!(benches, append, read, recovery);
criterion_main!(benches);
