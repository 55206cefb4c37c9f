//! `tidelog consume TOPIC`: prints records with a kcat format, as kcat -C and
//! kafka-console-consumer.
//!
//! Without `--group`, reads go straight to the partitions (`Partition::read`, zero-copy)
//! and every batch's CRC is checked on the way out: a corrupt batch stops the command
//! with an error that names the segment file and byte position, and is never printed.
//!
//! With `--group G` the command is a member of consumer group G, as Kafka's console
//! consumer is: it joins through [`GroupConsumer`], reads the partitions the group
//! assigns it from the group's committed offsets (`--from-beginning` is
//! `auto.offset.reset=earliest`: it applies only to partitions without a committed
//! offset), and on exit (after `-c`, `-e`, Ctrl-C or an error) commits the position of
//! every partition assigned to it, a partition it read nothing from at its reset
//! position, then leaves the group. So the next run continues exactly where the group
//! stands. Records handed out by a poll but not printed (after `-c`) are not committed.
//!
//! With `--bootstrap HOST:PORT` the command reads a running node or any Kafka-API
//! cluster over the Kafka protocol through [`tidelog::Cluster`] (feature `server`), with
//! the versions each broker negotiates: with `--group G` the same member as above
//! ([`GroupConsumer`] of the cluster; several such processes share the group's
//! partitions, as Kafka's console consumers do), without it a [`tidelog::Consumer`]
//! assigned the partitions and start chosen on the command line.

use crate::cli::ConsumeArgs;
use crate::common::{
    checked_batches, close_broker, open_broker, open_broker_read_only, parse_time,
    select_partitions,
};
use crate::format::Format;
use crate::out::Out;
use crate::progress::{Progress, Unit};
use crate::{CliResult, Fail, fail};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tidelog::record::decompression_limit;
use tidelog::{
    Broker, ConsumerRecord, ConsumerRecords, GroupConfig, GroupConsumer, OffsetReset, Partition,
};
#[cfg(feature = "server")]
use tidelog::{Consumer, ConsumerConfig};

/// Bytes read from a partition at a time.
const READ_BYTES: usize = 1 << 20;

/// How long one poll of a group member waits for records (also how soon Ctrl-C is seen).
const POLL: Duration = Duration::from_millis(100);

/// Where to start reading, from the command line.
enum Start {
    Beginning,
    End,
    Offset(i64),
    FromEnd(i64),
    Time(i64),
    /// The end, or the beginning with --from-beginning.
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
    /// read_committed: up to the last stable offset, without aborted transactions.
    committed: bool,
}

impl Reader {
    /// Where reading stops for now: the last stable offset reading committed, else
    /// the high watermark.
    fn end(&self) -> CliResult<i64> {
        Ok(match self.committed {
            true => self.partition.last_stable_offset()?,
            false => self.partition.high_watermark(),
        })
    }
}

/// Runs `tidelog consume`; `given` is `--data`, if given.
pub(crate) fn run(given: Option<&Path>, args: &ConsumeArgs) -> CliResult {
    let format = match &args.format {
        Some(f) => Format::parse(f)?,
        None => Format::default_for(args.key_delimiter.as_deref()),
    };
    let start = parse_start(args)?;
    // Ctrl-C (or SIGTERM) ends the command cleanly (a group member commits first):
    // without -e it is the normal way to stop.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| fail!("cannot install the signal handler: {e}"))?;
    }
    if let Some(bootstrap) = &args.target.bootstrap {
        return consume_remote(given, bootstrap, args, &format, &start, &stop);
    }
    let data = crate::common::data_dir(given);
    // Without a group nothing is written: the directory is read as it is (and followed,
    // while another process writes it).
    let broker = match &args.group {
        Some(_) => open_broker(data, false)?,
        None => open_broker_read_only(data)?,
    };
    match &args.group {
        Some(group) => consume_group(&broker, group, args, &format, &stop)?,
        None => consume_partitions(&broker, args, &format, &start, &stop)?,
    }
    close_broker(broker)
}

/// `consume --bootstrap ADDRS`: reads a running node or cluster, as a member of
/// `--group` or from the partitions and start chosen on the command line.
#[cfg(feature = "server")]
fn consume_remote(
    given: Option<&Path>,
    bootstrap: &str,
    args: &ConsumeArgs,
    format: &Format,
    start: &Start,
    stop: &AtomicBool,
) -> CliResult {
    crate::common::only_bootstrap(bootstrap, given)?;
    let config = crate::common::client_config(bootstrap, &args.target, "tidelog-consume");
    let cluster = tidelog::Cluster::connect(config)?;
    match &args.group {
        Some(group) => {
            let mut member = GroupConsumer::join(&cluster, group_config(group, args))?;
            member.set_listener(CommitOnRevoke);
            run_member(member, args, format, stop)
        }
        None => consume_remote_partitions(&cluster, args, format, start, stop),
    }
}

/// Commits the positions of the partitions a member over the network gives up in a
/// rebalance (auto-commit is off): every record a poll handed out before was printed,
/// so the next owner continues after them instead of printing them again.
#[cfg(feature = "server")]
struct CommitOnRevoke;

#[cfg(feature = "server")]
impl tidelog::consumer::RebalanceListener for CommitOnRevoke {
    fn on_partitions_revoked(
        &mut self,
        ctx: &tidelog::consumer::RebalanceContext<'_>,
        partitions: &[(String, i32)],
    ) {
        if let Err(e) = ctx.commit_sync() {
            // The next owner reads these partitions again from the group's last commit.
            eprintln!("warning: cannot commit {partitions:?} before the rebalance: {e}");
        }
    }
}

/// Without the Kafka client, `--bootstrap` is an error.
#[cfg(not(feature = "server"))]
fn consume_remote(
    _given: Option<&Path>,
    _bootstrap: &str,
    _args: &ConsumeArgs,
    _format: &Format,
    _start: &Start,
    _stop: &AtomicBool,
) -> CliResult {
    Err(crate::common::no_admin_client())
}

/// `consume --bootstrap` without `--group`: a [`Consumer`] of the cluster assigned the
/// partitions of `-p` (default all), each starting where `start` says.
#[cfg(feature = "server")]
fn consume_remote_partitions(
    cluster: &tidelog::Cluster,
    args: &ConsumeArgs,
    format: &Format,
    start: &Start,
    stop: &AtomicBool,
) -> CliResult {
    let partitions = match args.partition.is_empty() {
        true => (0..cluster.partition_count(&args.topic)?).collect(),
        false => args.partition.clone(),
    };
    let config = ConsumerConfig::default()
        .auto_offset_reset(OffsetReset::Earliest)
        .isolation_level(args.isolation_level.level());
    let mut consumer = Consumer::new(cluster, config);
    let assigned: Vec<(&str, i32)> = partitions
        .iter()
        .map(|&p| (args.topic.as_str(), p))
        .collect();
    consumer.assign(&assigned)?;
    seek_start(&mut consumer, start)?;
    let mut out = Out::new();
    let result = group_loop(
        args,
        format,
        stop,
        &mut consumer,
        &mut out,
        &mut BTreeMap::new(),
    );
    let flushed = out.flush();
    consumer.close();
    result.and(flushed)
}

/// The (topic, partition, log start, end) of every partition `consumer` is assigned.
#[cfg(feature = "server")]
fn ranges(consumer: &mut Consumer) -> CliResult<Vec<(String, i32, i64, i64)>> {
    consumer.seek_to_beginning()?;
    let mut out = Vec::new();
    for (t, p) in consumer.assignment() {
        let lo = consumer.position(&t, p)?;
        let hi = consumer.end_offset(&t, p)?;
        out.push((t, p, lo, hi));
    }
    Ok(out)
}

/// Moves every partition `consumer` is assigned to where `start` says, with the same
/// range check as in a data directory.
#[cfg(feature = "server")]
fn seek_start(consumer: &mut Consumer, start: &Start) -> CliResult {
    match *start {
        Start::Beginning | Start::Default { beginning: true } => consumer.seek_to_beginning()?,
        Start::End | Start::Default { beginning: false } => consumer.seek_to_end()?,
        Start::Time(ts) => consumer.seek_to_timestamp(ts)?,
        Start::FromEnd(n) => {
            for (t, p, lo, hi) in ranges(consumer)? {
                consumer.seek(&t, p, (hi - n).max(lo))?;
            }
        }
        Start::Offset(n) => {
            for (t, p, lo, hi) in ranges(consumer)? {
                if n < lo || n > hi {
                    return Err(fail!(
                        "offset {n} is out of range for {t}-{p}: valid offsets are {lo}..{hi}"
                    ));
                }
                consumer.seek(&t, p, n)?;
            }
        }
    }
    Ok(())
}

/// Reads the partitions chosen on the command line, from the start chosen there.
fn consume_partitions(
    broker: &Broker,
    args: &ConsumeArgs,
    format: &Format,
    start: &Start,
    stop: &AtomicBool,
) -> CliResult {
    let topic = broker.topic(&args.topic)?;
    let committed = args.isolation_level == crate::cli::Isolation::ReadCommitted;
    let mut readers = Vec::new();
    for partition in select_partitions(&topic, &args.partition)? {
        let mut r = Reader {
            partition,
            position: 0,
            committed,
        };
        r.position = start_position(&r, start)?;
        readers.push(r);
    }
    let mut out = Out::new();
    let result = read_loop(args, format, &mut readers, &mut out, stop);
    let flushed = out.flush();
    result.and(flushed)
}

fn start_position(r: &Reader, start: &Start) -> CliResult<i64> {
    let p = &r.partition;
    let (lo, hi) = (p.log_start_offset(), r.end()?);
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
        Start::Default { beginning } => {
            if beginning {
                lo
            } else {
                hi
            }
        }
    })
}

/// Renders one record with `format` and writes it out.
fn print(format: &Format, rec: &ConsumerRecord<'_>, buf: &mut Vec<u8>, out: &mut Out) -> CliResult {
    buf.clear();
    format.render(rec, buf);
    out.bytes(buf)
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
    let progress = range_progress(args, readers);
    let mut done = 0u64;
    while remaining > 0 && !stop.load(Ordering::Relaxed) {
        let mut progressed = false;
        for r in readers.iter_mut() {
            if remaining == 0 {
                break;
            }
            if r.position < r.end()? {
                let from = r.position;
                progressed |= read_some(r, format, &mut remaining, &mut buf, out)?;
                done += (r.position - from).max(0) as u64;
                progress.set(done);
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
            let wait = Duration::from_millis(100) / readers.len().max(1) as u32;
            if r.position < r.partition.high_watermark() {
                // Reading committed, behind an open transaction: the high watermark
                // is already past, so nothing wakes us when the transaction ends.
                std::thread::sleep(wait);
            } else {
                r.partition.wait_for(r.position, wait);
            }
        }
    }
    Ok(())
}

/// With `-e`, a bar over the offsets from each partition's start to its end (at most
/// `-c` of them), shown when stdout is not the terminal (see `progress`).
fn range_progress(args: &ConsumeArgs, readers: &[Reader]) -> Progress {
    let total = readers
        .iter()
        .map(|r| (r.partition.high_watermark() - r.position).max(0) as u64)
        .sum::<u64>();
    let total = args.count.map_or(total, |c| total.min(c));
    Progress::when(
        args.exit_at_end && crate::progress::beside_stdout(),
        format!("consume {}", args.topic),
        Unit::Records,
        Some(total),
    )
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
    let end = r.end()?;
    let aborted = match r.committed {
        true => r.partition.aborted_transactions(from, end)?,
        false => Vec::new(),
    };
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
    let limit = decompression_limit(r.partition.config().max_message_bytes);
    let mut scratch = Vec::new();
    for batch in checked_batches(&slice, &r.partition) {
        let (at, batch) = batch?;
        if batch.base_offset() >= end {
            break;
        }
        let aborted = batch.is_transactional()
            && aborted.iter().any(|a| {
                a.producer_id == batch.producer_id()
                    && (a.first_offset..a.last_offset).contains(&batch.base_offset())
            });
        if batch.is_control() || aborted {
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
            let record = ConsumerRecord {
                topic: &topic,
                partition: r.partition.index(),
                offset: rec.offset,
                timestamp: rec.timestamp,
                key: rec.key,
                value: rec.value,
                headers: rec.headers,
            };
            print(format, &record, buf, out)?;
            r.position = rec.offset + 1;
            *remaining -= 1;
            if *remaining == 0 {
                return Ok(true);
            }
        }
        r.position = r.position.max(batch.last_offset() + 1);
    }
    r.position = r.position.max(slice.next_offset().min(end));
    Ok(r.position > from)
}

/// The partitions of one poll and, for each, the offset its next record to print has:
/// filled while printing, in the order the poll hands records out (partition by
/// partition), so that a stop in the middle of a poll commits nothing unprinted.
#[derive(Default)]
struct PollProgress {
    next: Vec<(String, i32, i64)>,
}

impl PollProgress {
    /// Records that `offset` of `topic`-`partition` is the next one to print.
    fn set(&mut self, topic: &str, partition: i32, offset: i64) {
        match self.next.last_mut() {
            Some((t, p, o)) if t == topic && *p == partition => *o = offset,
            _ => self.next.push((topic.to_string(), partition, offset)),
        }
    }

    fn get(&self, topic: &str, partition: i32) -> Option<i64> {
        self.next
            .iter()
            .find(|(t, p, _)| t == topic && *p == partition)
            .map(|(_, _, o)| *o)
    }
}

/// What `consume --group` needs of a group member: a [`GroupConsumer`] of the data
/// directory or of a cluster (and of the loop of `consume --bootstrap` without a group,
/// a [`Consumer`]).
trait Member {
    fn assignment(&self) -> Vec<(String, i32)>;
    fn position(&mut self, topic: &str, partition: i32) -> tidelog::Result<i64>;
    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> tidelog::Result<()>;
    fn poll(&mut self, timeout: Duration) -> tidelog::Result<ConsumerRecords>;
    fn commit_sync(&mut self) -> tidelog::Result<()>;
    fn close(&mut self);
    /// The end of a partition, `None` while not known.
    fn end(&self, topic: &str, partition: i32) -> CliResult<Option<i64>>;
}

impl Member for GroupConsumer {
    fn assignment(&self) -> Vec<(String, i32)> {
        self.assignment()
    }
    fn position(&mut self, topic: &str, partition: i32) -> tidelog::Result<i64> {
        self.position(topic, partition)
    }
    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> tidelog::Result<()> {
        self.seek(topic, partition, offset)
    }
    fn poll(&mut self, timeout: Duration) -> tidelog::Result<ConsumerRecords> {
        self.poll(timeout)
    }
    fn commit_sync(&mut self) -> tidelog::Result<()> {
        self.commit_sync()
    }
    fn close(&mut self) {
        self.close();
    }
    fn end(&self, topic: &str, partition: i32) -> CliResult<Option<i64>> {
        Ok(Some(self.end_offset(topic, partition)?))
    }
}

/// The reader of `consume --bootstrap` without a group (its loop is the group's; it
/// commits nothing).
#[cfg(feature = "server")]
impl Member for Consumer {
    fn assignment(&self) -> Vec<(String, i32)> {
        self.assignment()
    }
    fn position(&mut self, topic: &str, partition: i32) -> tidelog::Result<i64> {
        self.position(topic, partition)
    }
    fn seek(&mut self, topic: &str, partition: i32, offset: i64) -> tidelog::Result<()> {
        self.seek(topic, partition, offset)
    }
    fn poll(&mut self, timeout: Duration) -> tidelog::Result<ConsumerRecords> {
        self.poll(timeout)
    }
    fn commit_sync(&mut self) -> tidelog::Result<()> {
        self.commit_sync()
    }
    fn close(&mut self) {
        self.close();
    }
    fn end(&self, topic: &str, partition: i32) -> CliResult<Option<i64>> {
        Ok(Some(self.end_offset(topic, partition)?))
    }
}

/// The member settings of `consume --group`.
fn group_config(group: &str, args: &ConsumeArgs) -> GroupConfig {
    let reset = if args.from_beginning {
        OffsetReset::Earliest
    } else {
        OffsetReset::Latest
    };
    GroupConfig::new(group, &[args.topic.as_str()])
        .auto_offset_reset(reset)
        .enable_auto_commit(false)
        .isolation_level(args.isolation_level.level())
        .client_id("tidelog-consume")
}

/// Runs `tidelog consume --group`: reads as a member of the group, then commits and
/// leaves (see the module documentation).
fn consume_group(
    broker: &Broker,
    group: &str,
    args: &ConsumeArgs,
    format: &Format,
    stop: &AtomicBool,
) -> CliResult {
    let member = GroupConsumer::join(broker, group_config(group, args))?;
    run_member(member, args, format, stop)
}

/// Prints what `member` polls, then commits and leaves.
fn run_member(
    mut member: impl Member,
    args: &ConsumeArgs,
    format: &Format,
    stop: &AtomicBool,
) -> CliResult {
    let mut out = Out::new();
    let mut resume = BTreeMap::new();
    let result = group_loop(args, format, stop, &mut member, &mut out, &mut resume);
    let flushed = out.flush();
    drop(out);
    // Commit, unless the reader of our output went away (then what reached it is
    // unknown: leave those records to the next run).
    let pipe_closed = matches!(result, Err(Fail::BrokenPipe)) || flushed.is_err();
    let commit = if pipe_closed {
        Ok(())
    } else {
        commit_assigned(&mut member, &resume)
    };
    member.close();
    result.and(flushed).and(commit)
}

/// Polls and prints until `-c` records, the end of every assigned partition (`-e`) or
/// a signal. When it stops in the middle of a poll, `resume` gets, for the partitions
/// of that poll, the offset of the first record not printed.
fn group_loop(
    args: &ConsumeArgs,
    format: &Format,
    stop: &AtomicBool,
    member: &mut impl Member,
    out: &mut Out,
    resume: &mut BTreeMap<(String, i32), i64>,
) -> CliResult {
    let mut remaining = args.count.unwrap_or(u64::MAX);
    let mut buf = Vec::with_capacity(64 * 1024);
    while remaining > 0 && !stop.load(Ordering::Relaxed) {
        // Positions before the poll: where a partition of the poll continues if an
        // error stops the printing before any of its records.
        let mut before = BTreeMap::new();
        for (t, p) in member.assignment() {
            let position = member.position(&t, p)?;
            before.insert((t, p), position);
        }
        let records = member.poll(POLL)?;
        if records.is_empty() {
            if args.exit_at_end && at_end(member)? {
                break;
            }
            out.flush()?;
            continue;
        }
        let mut progress = PollProgress::default();
        let mut failed = None;
        for rec in records.iter() {
            let rec = match rec {
                Ok(r) => r,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            if remaining == 0 {
                // Handed out but not printed: the first of each partition is where it
                // continues.
                if progress.get(rec.topic, rec.partition).is_none() {
                    progress.set(rec.topic, rec.partition, rec.offset);
                }
                continue;
            }
            progress.set(rec.topic, rec.partition, rec.offset);
            print(format, &rec, &mut buf, out)?;
            progress.set(rec.topic, rec.partition, rec.offset + 1);
            remaining -= 1;
        }
        if remaining > 0 && failed.is_none() {
            continue;
        }
        for (t, p) in records.partitions() {
            let next = progress
                .get(&t, p)
                .or_else(|| before.get(&(t.clone(), p)).copied());
            if let Some(offset) = next {
                resume.insert((t, p), offset);
            }
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
    }
    Ok(())
}

/// True once the member owns partitions and has read each to its end.
fn at_end(member: &mut impl Member) -> CliResult<bool> {
    let assigned = member.assignment();
    if assigned.is_empty() {
        return Ok(false);
    }
    for (t, p) in assigned {
        let Some(end) = member.end(&t, p)? else {
            return Ok(false);
        };
        if member.position(&t, p)? < end {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Commits the position of every partition assigned to the member (`resume` first moves
/// back those a stop left in the middle of a poll; a partition never read is committed
/// at its reset position), and fsyncs the commit.
fn commit_assigned(member: &mut impl Member, resume: &BTreeMap<(String, i32), i64>) -> CliResult {
    let assigned = member.assignment();
    for (t, p) in &assigned {
        match resume.get(&(t.clone(), *p)) {
            Some(&offset) => member.seek(t, *p, offset)?,
            None => {
                member.position(t, *p)?;
            }
        }
    }
    if !assigned.is_empty() {
        member.commit_sync()?;
    }
    Ok(())
}
