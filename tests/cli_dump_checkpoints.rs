//! `tidelog dump` of tidelog's checkpoint files: `partition.checkpoint`, the topic
//! registry `topics` and `producer-id-block` show their fields and whether their CRC is
//! valid; damaged ones are reported, with the fields still shown.
#![cfg(feature = "cli")]

mod cli_support;

use cli_support::{err, ok, tidelog_raw};
use std::path::Path;
use tidelog::{BatchBuilder, Broker, TopicConfig};

/// A file in the checkpoint framing as docs/format.md describes it: `TLCP`, version 1,
/// payload length, payload, CRC-32 (IEEE) of all that.
fn tlcp(path: &Path, payload: &[u8]) {
    let mut b = b"TLCP".to_vec();
    b.extend_from_slice(&1u16.to_be_bytes());
    b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    b.extend_from_slice(payload);
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, &b) as u32;
    b.extend_from_slice(&crc.to_be_bytes());
    std::fs::write(path, b).unwrap();
}

fn dump(path: &Path) -> cli_support::Run {
    tidelog_raw(&["dump", path.to_str().unwrap()], "")
}

#[test]
fn checkpoint_files_show_their_fields_and_crc() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let broker = Broker::open(&data).unwrap();
    let events = broker
        .create_topic("events", 3, TopicConfig::new().set("retention.ms", "1000"))
        .and_then(|()| broker.topic("events"))
        .unwrap();
    let p0 = events.partition(0).unwrap();
    let mut b = BatchBuilder::new();
    for i in 0..5i64 {
        b.push(1_700_000_000_000 + i, None, Some(b"v"), &[]);
    }
    p0.append_builder(&mut b).unwrap();
    broker.close().unwrap();
    // The producer id block the server keeps, in the same framing.
    let block = data.join("producer-id-block");
    tlcp(&block, &2000i64.to_be_bytes());

    let checkpoint = data.join("events-0").join("partition.checkpoint");
    let out = ok(dump(&checkpoint));
    assert!(out.contains("Kind: partition checkpoint"), "{out}");
    assert!(
        out.contains("magic: TLCP version: 1 payloadLength: 16 size: 30 crc: 0x"),
        "{out}"
    );
    assert!(out.contains("isValid: true"), "{out}");
    // A clean close flushes everything: the recovery point is the log end.
    assert!(out.contains("recoveryPoint: 5 logStartOffset: 0"), "{out}");

    let out = ok(dump(&data.join("topics")));
    assert!(out.contains("Kind: topic registry"), "{out}");
    assert!(out.contains("isValid: true"), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "topics: 2")
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        lines[at + 1..at + 5],
        [
            "  name: __consumer_offsets partitions: 50 internal: true configs: 1",
            "    key: cleanup.policy value: compact",
            "  name: events partitions: 3 internal: false configs: 1",
            "    key: retention.ms value: 1000",
        ],
        "{out}"
    );

    let out = ok(dump(&block));
    assert!(out.contains("Kind: producer id block"), "{out}");
    assert!(out.contains("nextUnreservedProducerId: 2000"), "{out}");

    // A flipped bit in the payload: the CRC says so, the (damaged) fields still show.
    let mut bytes = std::fs::read(&checkpoint).unwrap();
    bytes[17] ^= 0x01; // low byte of the recovery point
    let damaged = tmp.path().join("partition.checkpoint");
    std::fs::write(&damaged, &bytes).unwrap();
    let run = dump(&damaged);
    let stdout = run.stdout.clone();
    let line = err(run, 1, "1 problem(s) found");
    assert!(line.contains("at byte 26: CRC-32 mismatch"), "{line}");
    assert!(stdout.contains("isValid: false (computed 0x"), "{stdout}");
    assert!(
        stdout.contains("PROBLEM at byte 26: CRC-32 mismatch"),
        "{stdout}"
    );
    assert!(stdout.contains("logStartOffset: 0"), "{stdout}");

    // A torn file: the length and the CRC disagree with what is there.
    std::fs::write(&damaged, &bytes[..bytes.len() - 3]).unwrap();
    let run = dump(&damaged);
    let stdout = run.stdout.clone();
    err(run, 1, "problem(s) found");
    assert!(
        stdout.contains("PROBLEM at byte 6: payload length 16 does not match the file size"),
        "{stdout}"
    );

    // A registry whose payload stops in the middle of a topic (with a valid CRC).
    let short = tmp.path().join("short").join("topics");
    std::fs::create_dir_all(short.parent().unwrap()).unwrap();
    let mut payload = 1u32.to_be_bytes().to_vec();
    payload.extend_from_slice(&6u32.to_be_bytes());
    payload.extend_from_slice(b"eve");
    tlcp(&short, &payload);
    let run = dump(&short);
    let stdout = run.stdout.clone();
    err(run, 1, "problem(s) found");
    assert!(
        stdout.contains("PROBLEM at byte 18: the payload ends in the middle of name"),
        "{stdout}"
    );

    // Any other file in the framing: the framing is checked, the payload shown as bytes.
    let other = tmp.path().join("future-checkpoint");
    tlcp(&other, b"abc");
    let out = ok(dump(&other));
    assert!(out.contains("Kind: unknown checkpoint"), "{out}");
    assert!(out.contains("isValid: true"), "{out}");
    assert!(out.contains("payload: abc"), "{out}");
}
