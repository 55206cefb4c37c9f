//! The bodies of the fuzz targets, shared by `fuzz/fuzz_targets/*.rs` (cargo-fuzz) and
//! `tests/fuzz_corpus_replay.rs` (which replays `fuzz/corpus-seed/` as a regular test
//! where fuzzing cannot run). Each function must never panic on any input; the
//! assertions inside are the properties checked.

#![allow(dead_code)]

use std::path::Path;
use tidelog::record::{Compression, batches};
use tidelog::storage::PartitionLog;
use tidelog::{Batch, BatchBuilder, LogConfig};

/// Decodes `data` every way tidelog can: as exactly one batch, as a run of batches, and
/// header-only; every record and header of a valid batch is walked.
pub fn batch_decoder(data: &[u8]) {
    match Batch::parse(data) {
        Ok(b) => {
            assert_eq!(b.len(), data.len(), "parse takes exactly the input");
            walk(&b);
        }
        Err(e) => assert!(e.is_corruption(), "a bad batch is Error::Corrupt: {e}"),
    }
    let mut end = 0;
    for b in batches(data).with_location("fuzz-input") {
        match b {
            Ok(b) => {
                end += b.len();
                walk(&b);
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(e.is_corruption(), "{msg}");
                assert!(msg.contains("fuzz-input"), "names the input: {msg}");
            }
        }
    }
    assert!(end <= data.len());
    if let Ok(b) = Batch::parse_header_at(data, "fuzz-input", 0) {
        // Header accessors of an unchecked batch must not panic either.
        let _ = (b.last_offset(), b.max_timestamp(), b.crc(), b.attributes());
    }
}

/// Output limit of [`decompress`]: small, so that a bomb is found quickly.
pub const DECOMPRESS_LIMIT: usize = 1 << 20;

/// Decompresses `data[1..]` with the codec `data[0] % 4 + 1` (gzip, snappy, lz4, zstd)
/// under [`DECOMPRESS_LIMIT`]: never a panic, never more output than the limit, an error
/// is `Error::Corrupt` and leaves nothing behind, and what decodes is re-encoded by
/// tidelog's own encoder and decodes back to the same bytes.
pub fn decompress(data: &[u8]) {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let codec = Compression::from_id(selector % 4 + 1).expect("ids 1-4 are codecs");
    let mut out = vec![0xAA];
    match codec.decompress(stream, DECOMPRESS_LIMIT, &mut out) {
        Ok(()) => {
            assert!(
                out.len() - 1 <= DECOMPRESS_LIMIT,
                "{codec}: output past the limit"
            );
            let plain = &out[1..];
            let mut packed = Vec::new();
            codec.compress(plain, &mut packed);
            let mut back = Vec::new();
            codec
                .decompress(&packed, DECOMPRESS_LIMIT, &mut back)
                .expect("tidelog's own stream decodes");
            assert_eq!(back, plain, "{codec}: round trip");
        }
        Err(e) => {
            assert!(
                e.is_corruption(),
                "{codec}: a bad stream is Error::Corrupt: {e}"
            );
            assert_eq!(out, [0xAA], "{codec}: a failed decode appends nothing");
        }
    }
}

fn walk(b: &Batch<'_>) {
    let _ = (
        b.base_offset(),
        b.last_offset(),
        b.record_count(),
        b.base_timestamp(),
        b.max_timestamp(),
        b.producer_id(),
        b.producer_epoch(),
        b.base_sequence(),
        b.is_control(),
        b.is_transactional(),
        b.timestamp_type_log_append(),
        b.partition_leader_epoch(),
    );
    let mut n = 0;
    for r in b.records() {
        let Ok(r) = r else { break };
        n += 1;
        let _ = (r.offset, r.timestamp, r.key.map(<[u8]>::len));
        let _ = r.value.map(<[u8]>::len);
        assert!(r.headers.iter().count() <= r.headers.len());
    }
    assert!(n <= b.record_count().max(0));
}

/// Input layout of [`log_recovery`], so that the fuzzer can shape every file of a
/// segment: byte 0 flags (bit 0: write a `partition.checkpoint`, bit 1: an `.index`,
/// bit 2: a `.timeindex`), bytes 1..3 and 3..5 the index and time index lengths (u16,
/// big-endian), bytes 5..13 the recovery point for the checkpoint (i64), then the
/// index bytes, the time index bytes, and the rest is the `.log`. Inputs shorter than
/// 13 bytes are a bare `.log`.
pub struct RecoveryInput<'a> {
    pub checkpoint: Option<i64>,
    pub index: Option<&'a [u8]>,
    pub time_index: Option<&'a [u8]>,
    pub log: &'a [u8],
}

impl<'a> RecoveryInput<'a> {
    pub fn split(data: &'a [u8]) -> RecoveryInput<'a> {
        if data.len() < 13 {
            return RecoveryInput {
                checkpoint: None,
                index: None,
                time_index: None,
                log: data,
            };
        }
        let flags = data[0];
        let il = u16::from_be_bytes([data[1], data[2]]) as usize;
        let tl = u16::from_be_bytes([data[3], data[4]]) as usize;
        let rp = i64::from_be_bytes(data[5..13].try_into().expect("8 bytes"));
        let rest = &data[13..];
        let il = il.min(rest.len());
        let (index, rest) = rest.split_at(il);
        let tl = tl.min(rest.len());
        let (time_index, log) = rest.split_at(tl);
        RecoveryInput {
            checkpoint: (flags & 1 != 0).then_some(rp),
            index: (flags & 2 != 0).then_some(index),
            time_index: (flags & 4 != 0).then_some(time_index),
            log,
        }
    }

    /// The inverse of [`RecoveryInput::split`] (to write seeds).
    pub fn join(&self) -> Vec<u8> {
        let flags = self.checkpoint.is_some() as u8
            | (self.index.is_some() as u8) << 1
            | (self.time_index.is_some() as u8) << 2;
        let index = self.index.unwrap_or(&[]);
        let time_index = self.time_index.unwrap_or(&[]);
        let mut v = vec![flags];
        v.extend_from_slice(&(index.len() as u16).to_be_bytes());
        v.extend_from_slice(&(time_index.len() as u16).to_be_bytes());
        v.extend_from_slice(&self.checkpoint.unwrap_or(0).to_be_bytes());
        v.extend_from_slice(index);
        v.extend_from_slice(time_index);
        v.extend_from_slice(self.log);
        v
    }
}

fn config() -> LogConfig {
    let mut c = LogConfig::default();
    c.segment_bytes = 64 * 1024;
    c.index_interval_bytes = 128;
    c.index_max_bytes = 1024;
    c
}

/// A directory on tmpfs when there is one (fsyncs are free there).
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().expect("tempdir")
}

/// Writes the input as the files of one segment, opens the log, reads everything back,
/// appends, and reopens. Without a checkpoint nothing is trusted, so every batch served
/// must be valid.
pub fn log_recovery(data: &[u8]) {
    let input = RecoveryInput::split(data);
    let tmp = scratch_dir();
    let dir = tmp.path().join("fuzz-0");
    std::fs::create_dir(&dir).expect("mkdir");
    let seg = |ext: &str| dir.join(format!("{:020}.{ext}", 0));
    std::fs::write(seg("log"), input.log).expect("write log");
    if let Some(i) = input.index {
        std::fs::write(seg("index"), i).expect("write index");
    }
    if let Some(t) = input.time_index {
        std::fs::write(seg("timeindex"), t).expect("write timeindex");
    }
    if let Some(rp) = input.checkpoint {
        let mut p = rp.to_be_bytes().to_vec();
        p.extend_from_slice(&0i64.to_be_bytes());
        tidelog::testing::write_checkpoint(&dir.join("partition.checkpoint"), &p)
            .expect("write checkpoint");
    }
    let validated = input.checkpoint.is_none();

    let log = PartitionLog::open(&dir, "fuzz-0", config())
        .unwrap_or_else(|e| panic!("recovery must open any segment bytes: {e}"));
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(start <= end, "start {start} > end {end}");
    let mut at = start;
    while at < end {
        let s = match log.read(at, 1 << 16) {
            Ok(s) => s,
            // Damage in a trusted segment that opening did not read (before its last
            // index entry) is reported by the read that meets it, never skipped.
            Err(e) if !validated && e.is_corruption() => break,
            Err(e) => panic!("read({at}) of a recovered log: {e}"),
        };
        if s.is_empty() || s.next_offset() <= at {
            // Trusted segments (below the checkpoint's recovery point) are not
            // validated by design, so a damaged trusted index can hide batches; only
            // validated logs must read through to the end.
            assert!(!validated, "read({at}) made no progress below end {end}");
            break;
        }
        if validated {
            for b in batches(&s) {
                let b = b.unwrap_or_else(|e| panic!("a corrupt batch was served: {e}"));
                for r in b.records() {
                    r.unwrap_or_else(|e| panic!("a served record does not decode: {e}"));
                }
            }
        }
        at = s.next_offset();
    }
    for ts in [i64::MIN, -1, 0, 1_700_000_000_000, i64::MAX] {
        let _ = log.offset_for_timestamp(ts);
    }
    let mut b = BatchBuilder::new();
    b.push(1_700_000_000_000, Some(b"k"), Some(b"after recovery"), &[]);
    let info = log.append(&b.finish()).expect("append after recovery");
    assert_eq!(info.base_offset, end);
    let s = log.read(end, 1 << 16).expect("read the new batch");
    assert_eq!(s.base_offset(), end);
    log.close().expect("close");
    drop(log);
    let again = PartitionLog::open(&dir, "fuzz-0", config()).expect("reopen");
    assert_eq!(
        again.log_end_offset(),
        end + 1,
        "the repaired log reopens as left"
    );
    if validated {
        let r = again.recovery_report();
        assert!(r.truncated.is_empty(), "second recovery cut again: {r:?}");
    }
}

/// A SASL listener's connection fed the frames of `data` (each a big-endian `u16`
/// length and its bytes): the server's own checks (`tidelog::testing::fuzz_sasl_session`)
/// panic if a request passes the gate before authentication or a session authenticates
/// as anyone but the one user.
pub fn sasl_session(data: &[u8]) {
    tidelog::testing::fuzz_sasl_session(data);
}

/// The `tls_handshake` target: `data` as a client's bytes on an SSL listener, with the
/// committed self-signed certificate (`fuzz/tls/`; its dates do not matter to the
/// server side), written to a temporary directory once.
pub fn tls_handshake(data: &[u8]) {
    use std::sync::OnceLock;
    static TLS: OnceLock<tidelog::security::TlsSettings> = OnceLock::new();
    let tls = TLS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tidelog-fuzz-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let (pem, key) = (dir.join("server.pem"), dir.join("server.key"));
        std::fs::write(&pem, include_str!("tls/server.pem")).expect("write the certificate");
        std::fs::write(&key, include_str!("tls/server.key")).expect("write the key");
        tidelog::security::TlsSettings::from_pem_files(&pem, &key).client_ca(&pem)
    });
    tidelog::testing::fuzz_tls_handshake(tls, data);
}
