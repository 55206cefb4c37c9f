//! `tidelog perf forward`: how fast store-and-forward empties a local backlog. It starts
//! one `tidelog serve` child process on 127.0.0.1, creates the topic `perf-forward` with
//! `--partitions` partitions there and in a local data directory, writes `--records`
//! records to the local topic (batches of 100, round-robin over the partitions), then
//! starts a [`Forwarder`] of that topic to the node and times it from its start (which
//! includes its session's start: `InitProducerId` and the scan of the remote tails)
//! until it has forwarded every record, as `Forwarder::wait_caught_up` sees it (polled
//! every 20 ms). In transactions by default, as `tidelog forward` forwards; idempotent
//! with `--no-transactions`. The run fails if the forwarder does not catch up within
//! ten minutes or reports another count of records than was written. The node is
//! stopped (SIGKILL) at the end, also on error; its log and the local data directory
//! are in the run directory (`--data` keeps them).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use tidelog::forward::Forwarder;

use crate::cli::PerfForwardArgs;
use crate::common::{close_broker, open_broker};
use crate::perf::{Payloads, produce_records, report, topic_or_create};
use crate::perf_cluster::one_node_with_empty_topic;
use crate::progress::Progress;
use crate::{CliResult, fail};

const TOPIC: &str = "perf-forward";
const LABEL: &str = "forward";
/// Records per local append.
const BATCH: usize = 100;
/// How long the forwarder may take to forward everything.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs `tidelog perf forward`.
pub(crate) fn forward(data: Option<&Path>, a: &PerfForwardArgs) -> CliResult {
    let (dir, mut nodes) =
        one_node_with_empty_topic(data, "perf forward", LABEL, TOPIC, a.partitions)?;
    let base = dir.path().to_path_buf();

    let broker = open_broker(&base.join("local"), true)?;
    let topic = topic_or_create(&broker, TOPIC, Some(a.partitions), 1)?;
    let payloads = Payloads::new(a.record_size);
    let mut progress = Progress::new("perf forward: writing the local topic");
    let never = AtomicBool::new(false);
    produce_records(
        &topic.partitions(),
        &payloads,
        None,
        a.records,
        BATCH,
        &mut progress,
        &never,
    )?;
    drop(progress);

    let client =
        tidelog::ClientConfig::new(nodes.bootstrap()).set("client.id", "tidelog-perf-forward");
    let t0 = Instant::now();
    let forwarder = Forwarder::builder(&broker, client)
        .topic(TOPIC)
        .transactional(!a.no_transactions)
        .start()?;
    let caught_up = forwarder.wait_caught_up(CATCH_UP_TIMEOUT);
    let seconds = t0.elapsed().as_secs_f64();
    let status = forwarder.status();
    forwarder.stop()?;
    nodes.check_alive(&base, LABEL)?;
    if !caught_up {
        return Err(fail!(
            "the forwarder did not catch up within {CATCH_UP_TIMEOUT:?}: {} of {} records forwarded (last error: {})",
            status.records_forwarded,
            a.records,
            status.last_error.as_deref().unwrap_or("none")
        ));
    }
    if status.records_forwarded != a.records {
        return Err(fail!(
            "the forwarder reports {} records forwarded, not the {} written",
            status.records_forwarded,
            a.records
        ));
    }
    drop(nodes);
    close_broker(broker)?;
    let extra = [
        ("partitions", a.partitions.to_string()),
        ("transactional", (!a.no_transactions).to_string()),
        ("sessions", status.sessions.to_string()),
        ("session_errors", status.errors.to_string()),
    ];
    report("forward", a.records, a.record_size, seconds, &extra, a.json)
}
