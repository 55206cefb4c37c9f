//! `tidelog produce TOPIC`: one record per line of standard input, as kcat -P.
//!
//! Lines are batched per partition and appended with `Partition::append_batch` when a
//! batch reaches the topic's `max.message.bytes` (capped at 1 MiB) and at the end of the
//! input. Keyed records go to `murmur2(key) % partitions` (Kafka's default partitioner),
//! unkeyed records to one partition per batch, round-robin (Kafka's sticky behaviour).
//! Everything that can be checked before reading input (topic, partition, headers) is
//! checked first, so a bad command writes nothing. `-z CODEC` compresses each batch
//! (sizes are counted before compression), unless the topic's `compression.type` names
//! a codec of its own.

use crate::cli::ProduceArgs;
use crate::common::{close_broker, open_broker, parse_kv};
use crate::{CliResult, fail};
use std::io::BufRead;
use std::path::Path;
use tidelog::{BatchBuilder, Partition};

/// Largest batch the producer builds (Kafka's `batch.size` is far smaller; a console
/// producer reading a file benefits from large batches).
const MAX_BATCH: usize = 1 << 20;

/// One partition's open batch.
struct Pending {
    partition: Partition,
    builder: BatchBuilder,
    limit: usize,
}

impl Pending {
    fn flush(&mut self) -> CliResult {
        if !self.builder.is_empty() {
            let batch = self.builder.finish();
            self.partition.append_batch(&batch)?;
        }
        Ok(())
    }
}

/// Runs `tidelog produce`.
pub(crate) fn run(data: &Path, args: &ProduceArgs) -> CliResult {
    let mut headers = Vec::new();
    for h in &args.headers {
        headers.push(parse_kv(h, "--header")?);
    }
    if args.key_delimiter.as_deref() == Some("") {
        return Err(fail!("-K needs a non-empty separator"));
    }
    let broker = open_broker(data, false)?;
    let topic = broker.topic(&args.topic)?;
    if topic.is_internal() {
        return Err(fail!(
            "topic {:?} is internal to tidelog; produce to it is refused",
            args.topic
        ));
    }
    if let Some(p) = args.partition {
        topic.partition(p)?;
    }
    let mut pending: Vec<Pending> = Vec::new();
    for p in topic.partitions().iter() {
        let max = p.config().max_message_bytes as usize;
        pending.push(Pending {
            partition: p.clone(),
            builder: BatchBuilder::with_capacity(64 * 1024)
                .compression(p.config().compression_type.resolve(args.compression)),
            // Room for the timestamp delta, which the size estimate below leaves out.
            limit: max.min(MAX_BATCH).saturating_sub(16),
        });
    }
    let header_refs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_bytes()))
        .collect();
    let sep = args.key_delimiter.as_deref().map(str::as_bytes);
    let n = pending.len() as i32;
    let mut sticky = 0i32;
    let mut produced = 0u64;
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = input
            .read_until(b'\n', &mut line)
            .map_err(|e| fail!("cannot read standard input: {e}"))?;
        if read == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let (key, value) = match sep {
            Some(sep) => match find(&line, sep) {
                Some(i) => (Some(&line[..i]), &line[i + sep.len()..]),
                None => (None, &line[..]),
            },
            None => (None, &line[..]),
        };
        let mut p = match (args.partition, key) {
            (Some(p), _) => p,
            (None, Some(k)) => tidelog::producer::partition_for_key(k, n),
            (None, None) => sticky,
        };
        let overflows = |pend: &Pending| {
            let delta = pend.builder.len() as i32;
            let size = BatchBuilder::record_size(0, delta, key, Some(value), &header_refs);
            !pend.builder.is_empty() && pend.builder.size_bytes() + size > pend.limit
        };
        if args.partition.is_none() && key.is_none() && overflows(&pending[p as usize]) {
            // Sticky partitioning: a full unkeyed batch moves on to the next partition.
            pending[p as usize].flush()?;
            sticky = (sticky + 1) % n;
            p = sticky;
        }
        if overflows(&pending[p as usize]) {
            pending[p as usize].flush()?;
        }
        pending[p as usize]
            .builder
            .push(tidelog::record::now_ms(), key, Some(value), &header_refs);
        produced += 1;
    }
    for p in &mut pending {
        p.flush()?;
    }
    eprintln!(
        "produced {} to topic {}",
        crate::common::counted(produced, "record", "records"),
        args.topic
    );
    close_broker(broker)
}

/// Position of the first `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
