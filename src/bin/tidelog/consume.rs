//! `tidelog consume TOPIC`: prints records with a kcat format, as kcat -C.
//!
//! Reads go straight to the partitions (`Partition::read`, zero-copy) and every batch's
//! CRC is checked on the way out: a corrupt batch stops the command with an error that
//! names the segment file and byte position, and is never printed. With `--group` the
//! start positions come from the group's committed offsets, and the offset after the
//! last record printed of each partition is committed before exit (also on Ctrl-C or
//! after an error), so the next run of the group continues where this one stopped.

use crate::cli::ConsumeArgs;
use crate::common::{
    checked_batches, close_broker, commit_offsets, open_broker, parse_time, select_partitions,
};
use crate::format::Format;
use crate::out::Out;
use crate::{CliResult, Fail, fail};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tidelog::record::decompression_limit;
use tidelog::{Broker, ConsumerRecord, Partition};

/// Bytes read from a partition at a time.
const READ_BYTES: usize = 1 << 20;

/// Where to start reading, from the command line.
enum Start {
    Beginning,
    End,
    Offset(i64),
    FromEnd(i64),
    Time(i64),
    /// Committed offset with --group, else the default (end, or beginning with
    /// --from-beginning).
    Default {
        beginning: bool,
    },
}

fn parse_start(args: &ConsumeArgs) -> CliResult<Start> {
    if let Some(t) = &args.timestamp {
        return Ok(Start::Time(parse_time(t, "--timestamp")?));
    }
    let Some(o) = &args.offset else {
        return Ok(Start::Default {
            beginning: args.from_beginning,
        });
    };
    Ok(match o.as_str() {
        "beginning" => Start::Beginning,
        "end" => Start::End,
        s => match s.parse::<i64>() {
            Ok(n) if s.starts_with('-') => Start::FromEnd(-n),
            Ok(n) => Start::Offset(n),
            Err(_) => {
                return Err(fail!(
                    "--offset {s:?} is not an offset: give N, -N, beginning or end"
                ));
            }
        },
    })
}

/// One partition being read.
struct Reader {
    partition: Partition,
    position: i64,
    /// One past the last offset printed, for the commit.
    printed: Option<i64>,
}

/// Runs `tidelog consume`.
pub(crate) fn run(data: &Path, args: &ConsumeArgs) -> CliResult {
    let format = match &args.format {
        Some(f) => Format::parse(f)?,
        None => Format::default_for(args.key_delimiter.as_deref()),
    };
    let start = parse_start(args)?;
    let broker = open_broker(data, false)?;
    let topic = broker.topic(&args.topic)?;
    let partitions = select_partitions(&topic, &args.partition)?;
    let mut readers = Vec::new();
    let committed = committed_offsets(&broker, args, &partitions);
    for (p, committed) in partitions.into_iter().zip(committed) {
        let position = start_position(&p, &start, committed)?;
        readers.push(Reader {
            partition: p,
            position,
            printed: None,
        });
    }
    // Ctrl-C (or SIGTERM) ends the command cleanly, after committing the group's
    // offsets: without -e it is the normal way to stop.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| fail!("cannot install the signal handler: {e}"))?;
    }
    let mut out = Out::new();
    let result = read_loop(args, &format, &mut readers, &mut out, &stop);
    let flushed = out.flush();
    drop(out);
    // Commit what was printed, unless the reader of our output went away (then what
    // reached it is unknown: leave those records to the next run).
    let pipe_closed = matches!(result, Err(Fail::BrokenPipe)) || flushed.is_err();
    let commit = match (&args.group, pipe_closed) {
        (Some(group), false) => commit(&broker, group, &args.topic, &readers),
        _ => Ok(()),
    };
    result.and(flushed).and(commit)?;
    close_broker(broker)
}

/// The group's committed offset per partition (None without --group or commit).
fn committed_offsets(
    broker: &Broker,
    args: &ConsumeArgs,
    partitions: &[Partition],
) -> Vec<Option<i64>> {
    let Some(group) = &args.group else {
        return vec![None; partitions.len()];
    };
    let list: Vec<(String, i32)> = partitions
        .iter()
        .map(|p| (args.topic.clone(), p.index()))
        .collect();
    let resp = broker.group_coordinator().offset_fetch(group, Some(&list));
    partitions
        .iter()
        .map(|p| {
            resp.offsets
                .iter()
                .find(|o| o.partition == p.index() && o.topic == args.topic)
                .and_then(|o| (o.offset >= 0).then_some(o.offset))
        })
        .collect()
}

fn start_position(p: &Partition, start: &Start, committed: Option<i64>) -> CliResult<i64> {
    let (lo, hi) = (p.log_start_offset(), p.high_watermark());
    Ok(match *start {
        Start::Beginning => lo,
        Start::End => hi,
        Start::FromEnd(n) => (hi - n).max(lo),
        Start::Offset(n) => {
            if n < lo || n > hi {
                return Err(fail!(
                    "offset {n} is out of range for {}-{}: valid offsets are {lo}..{hi}",
                    p.topic(),
                    p.index()
                ));
            }
            n
        }
        Start::Time(ts) => match p.offset_for_timestamp(ts)? {
            Some((offset, _)) => offset,
            None => hi,
        },
        Start::Default { beginning } => match committed {
            Some(c) if (lo..=hi).contains(&c) => c,
            _ if beginning => lo,
            _ => hi,
        },
    })
}

fn read_loop(
    args: &ConsumeArgs,
    format: &Format,
    readers: &mut [Reader],
    out: &mut Out,
    stop: &AtomicBool,
) -> CliResult {
    let mut remaining = args.count.unwrap_or(u64::MAX);
    let mut buf = Vec::with_capacity(64 * 1024);
    while remaining > 0 && !stop.load(Ordering::Relaxed) {
        let mut progressed = false;
        for r in readers.iter_mut() {
            if remaining == 0 {
                break;
            }
            if r.position < r.partition.high_watermark() {
                progressed |= read_some(r, format, &mut remaining, &mut buf, out)?;
            }
        }
        if progressed {
            continue;
        }
        // Every partition is at its end.
        if args.exit_at_end {
            break;
        }
        out.flush()?;
        for r in readers.iter() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            r.partition.wait_for(
                r.position,
                Duration::from_millis(100) / readers.len().max(1) as u32,
            );
        }
    }
    Ok(())
}

/// Reads one slice of a partition, checks its batches and prints their records.
/// Returns false when there was nothing to read.
fn read_some(
    r: &mut Reader,
    format: &Format,
    remaining: &mut u64,
    buf: &mut Vec<u8>,
    out: &mut Out,
) -> CliResult<bool> {
    let from = r.position;
    let slice = match r.partition.read(r.position, READ_BYTES) {
        Ok(s) => s,
        Err(tidelog::Error::OffsetOutOfRange { start, .. }) if r.position < start => {
            // Retention removed records ahead of us: continue from the new start, as
            // a Kafka consumer with auto.offset.reset=earliest does.
            r.position = start;
            return Ok(true);
        }
        Err(e) => return Err(e.into()),
    };
    let base = slice.file_position();
    let topic = r.partition.topic().to_string();
    let location = format!("{topic}-{}", r.partition.index());
    let limit = decompression_limit(r.partition.log().config().max_message_bytes);
    let mut scratch = Vec::new();
    for batch in checked_batches(&slice, &r.partition) {
        let (at, batch) = batch?;
        if batch.is_control() {
            r.position = r.position.max(batch.last_offset() + 1);
            continue;
        }
        let undecodable = |e: tidelog::Error| {
            fail!(
                "cannot decode the batch in {} at byte {} ({topic}-{} offsets {}..={}): {e}",
                slice
                    .path()
                    .map_or_else(String::new, |p| p.display().to_string()),
                base + at as u64,
                r.partition.index(),
                batch.base_offset(),
                batch.last_offset()
            )
        };
        // Compressed batches are decompressed into `scratch`, bounded by the topic's
        // max.message.bytes (decompression_limit); the others are read in place.
        let records = batch
            .decode_records(&location, limit, &mut scratch)
            .map_err(undecodable)?;
        for rec in records {
            let rec = rec.map_err(undecodable)?;
            if rec.offset < r.position {
                continue;
            }
            buf.clear();
            format.render(
                &ConsumerRecord {
                    topic: &topic,
                    partition: r.partition.index(),
                    offset: rec.offset,
                    timestamp: rec.timestamp,
                    key: rec.key,
                    value: rec.value,
                    headers: rec.headers,
                },
                buf,
            );
            out.bytes(buf)?;
            r.position = rec.offset + 1;
            r.printed = Some(rec.offset + 1);
            *remaining -= 1;
            if *remaining == 0 {
                return Ok(true);
            }
        }
        r.position = r.position.max(batch.last_offset() + 1);
    }
    r.position = r.position.max(slice.next_offset());
    Ok(r.position > from)
}

/// Commits, for each partition something was printed from, the offset after it.
fn commit(broker: &Broker, group: &str, topic: &str, readers: &[Reader]) -> CliResult {
    let offsets: Vec<(i32, i64)> = readers
        .iter()
        .filter_map(|r| r.printed.map(|o| (r.partition.index(), o)))
        .collect();
    commit_offsets(broker, group, topic, &offsets, "committing the offsets")
}
