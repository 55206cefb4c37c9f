//! Replays the committed seed corpus of the fuzz targets (`fuzz/corpus-seed/<target>/`)
//! through the same code as the targets (`fuzz/fuzz_logic.rs`), so that CI checks
//! every seed and every crash once found (saved there as a regression input) even where
//! cargo-fuzz cannot run. `write_seed_corpus` (ignored) rebuilds the generated seeds.
//! Needs the `testing` and `server` features, as the fuzz targets do.
#![cfg(all(feature = "testing", feature = "server"))]

#[path = "../fuzz/fuzz_logic.rs"]
mod fuzz_logic;

use fuzz_logic::RecoveryInput;
use std::path::{Path, PathBuf};
use tidelog::storage::PartitionLog;
use tidelog::{Batch, BatchBuilder, Compression, LogConfig};

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus-seed")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("list corpus").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).expect("read seed");
            (p, b)
        })
        .collect()
}

/// Runs `f` on every seed, naming the seed that panics.
fn replay(target: &str, min_seeds: usize, f: fn(&[u8])) {
    let seeds = corpus(target);
    assert!(
        seeds.len() >= min_seeds,
        "{target}: only {} seeds",
        seeds.len()
    );
    for (path, bytes) in seeds {
        let r = std::panic::catch_unwind(|| f(&bytes));
        assert!(r.is_ok(), "{target} fails on {}", path.display());
    }
}

#[test]
fn batch_decoder_seed_corpus() {
    replay("batch_decoder", 8, fuzz_logic::batch_decoder);
}

#[test]
fn decompress_seed_corpus() {
    replay("decompress", 12, fuzz_logic::decompress);
}

#[test]
fn sasl_session_seed_corpus() {
    replay("sasl_session", 9, fuzz_logic::sasl_session);
}

#[test]
fn tls_handshake_seed_corpus() {
    replay("tls_handshake", 7, fuzz_logic::tls_handshake);
}

#[test]
fn request_decoder_seed_corpus() {
    replay("request_decoder", 40, |frame| {
        let _ = tidelog::testing::fuzz_decode_request(frame);
    });
}

#[test]
fn log_recovery_seed_corpus() {
    replay("log_recovery", 6, fuzz_logic::log_recovery);
}

fn sample_batch(first: i64, n: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new().producer(7, 1, 0);
    for o in first..first + n {
        b.push(
            1_700_000_000_000 + o,
            Some(format!("k{o}").as_bytes()),
            Some(format!("value {o}").as_bytes()),
            &[("h", b"x")],
        );
    }
    b.finish()
}

/// A real segment's files: a log of `batches` batches, closed cleanly.
fn sample_segment(batches: i64) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = LogConfig::default();
    c.index_interval_bytes = 128;
    let log = PartitionLog::open(tmp.path(), "s-0", c).unwrap();
    for i in 0..batches {
        log.append(&sample_batch(i * 2, 2)).unwrap();
    }
    log.close().unwrap();
    let f = |ext: &str| std::fs::read(tmp.path().join(format!("{:020}.{ext}", 0))).unwrap();
    (f("log"), f("index"), f("timeindex"))
}

#[test]
#[ignore = "rebuilds fuzz/corpus-seed; run explicitly"]
fn write_seed_corpus() {
    // Guard against `--include-ignored` rewriting seeds while the replay reads them.
    if std::env::var_os("TIDELOG_REGENERATE_FIXTURES").is_none() {
        eprintln!("set TIDELOG_REGENERATE_FIXTURES=1 to rebuild fuzz/corpus-seed");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus-seed");
    let put = |target: &str, name: &str, bytes: &[u8]| {
        let d = root.join(target);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(name), bytes).unwrap();
    };
    // batch_decoder: valid batches, the kafka-python one, and damaged variants.
    let kp = include_bytes!("fixtures/kafka-python/batch.bin");
    let kpz = include_bytes!("fixtures/kafka-python/batch-gzip.bin");
    let one = sample_batch(0, 3);
    let two = [sample_batch(0, 2), sample_batch(2, 1)].concat();
    let mut flipped = one.clone();
    flipped[30] ^= 1;
    let mut bad_magic = one.clone();
    bad_magic[16] = 1;
    let mut max_base = one.clone();
    tidelog::record::set_base_offset(&mut max_base, i64::MAX);
    let seeds: [(&str, &[u8]); 10] = [
        ("base-offset-max", &max_base),
        ("kafka-python", kp),
        ("kafka-python-gzip", kpz),
        ("tidelog-3-records", &one),
        ("two-batches", &two),
        ("torn", &one[..one.len() - 5]),
        ("header-only", &one[..61]),
        ("flipped-crc", &flipped),
        ("bad-magic", &bad_magic),
        ("empty", &[]),
    ];
    for (name, bytes) in seeds {
        put("batch_decoder", name, bytes);
    }
    // decompress: the records sections of the real clients' compressed batches (selector
    // byte = codec id - 1), tidelog's own streams, and cut or damaged ones.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compressed");
    for client in ["confluent-kafka", "kafka-python"] {
        for codec in ["gzip", "snappy", "lz4", "zstd"] {
            let bytes = std::fs::read(fixtures.join(format!("{client}-{codec}.log"))).unwrap();
            let b = Batch::parse_at(&bytes, "fixture", 0).unwrap();
            let seed = [&[b.compression() - 1][..], b.records_bytes()].concat();
            put("decompress", &format!("{client}-{codec}"), &seed);
            if client == "kafka-python" {
                put(
                    "decompress",
                    &format!("{codec}-cut"),
                    &seed[..seed.len() * 2 / 3],
                );
                let mut flipped = seed.clone();
                let n = flipped.len();
                flipped[n / 2] ^= 0x10;
                put("decompress", &format!("{codec}-flipped"), &flipped);
            }
        }
    }
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let plain: Vec<u8> = (0..100_000u32).map(|i| (i % 97) as u8).collect();
        let mut seed = vec![codec.id() - 1];
        codec.compress(&plain, &mut seed);
        put("decompress", &format!("tidelog-{codec}"), &seed);
    }
    // log_recovery: a clean segment with and without its indexes and checkpoint,
    // a torn one, and one with a damaged batch.
    let (log, index, time_index) = sample_segment(20);
    let torn = &log[..log.len() - 9];
    let mut flipped = log.clone();
    let mid = log.len() / 2;
    flipped[mid] ^= 0x40;
    let cases: [(&str, RecoveryInput<'_>); 7] = [
        (
            "bare-log",
            RecoveryInput {
                checkpoint: None,
                index: None,
                time_index: None,
                log: &log,
            },
        ),
        (
            "with-indexes",
            RecoveryInput {
                checkpoint: None,
                index: Some(&index),
                time_index: Some(&time_index),
                log: &log,
            },
        ),
        (
            "trusted",
            RecoveryInput {
                checkpoint: Some(40),
                index: Some(&index),
                time_index: Some(&time_index),
                log: &log,
            },
        ),
        (
            "trusted-bad-index",
            RecoveryInput {
                checkpoint: Some(40),
                index: Some(&time_index),
                time_index: Some(&index),
                log: &log,
            },
        ),
        (
            "torn",
            RecoveryInput {
                checkpoint: None,
                index: Some(&index),
                time_index: None,
                log: torn,
            },
        ),
        (
            "flipped",
            RecoveryInput {
                checkpoint: Some(10),
                index: None,
                time_index: None,
                log: &flipped,
            },
        ),
        (
            "empty",
            RecoveryInput {
                checkpoint: None,
                index: None,
                time_index: None,
                log: &[],
            },
        ),
    ];
    for (name, input) in cases {
        put("log_recovery", name, &input.join());
    }
}
