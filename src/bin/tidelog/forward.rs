//! `tidelog forward`: copies local topics to a remote Kafka-API cluster with a
//! [`tidelog::forward::Forwarder`] until SIGINT or SIGTERM, each record exactly once.
//!
//! The data directory opens for writing when no other process holds it: the position is
//! then committed as the group `tidelog-forward-NAME`. While an application holds the
//! directory, it opens read-only (and follows what the application appends) and commits
//! nothing. Either way the position is written as a retention hold file in each
//! partition directory, which the retention of whichever process owns the directory
//! honours, across restarts of either (`--allow-retention-loss` releases it instead,
//! `--release` releases it and exits).
//!
//! Progress (records forwarded, records behind) shows on a terminal as the other long
//! commands show theirs; a failure (the remote side away) is one `warning:` line when
//! it starts and one `forwarding again` line when it ends. `--describe` prints where a
//! forwarder stands, read from the data directory, as `groups describe` prints a group.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use tidelog::forward::{ForwardStatus, Forwarder, GROUP_PREFIX};

use crate::cli::ForwardArgs;
use crate::progress::{Progress, Unit};
use crate::{CliResult, fail};

/// Runs `tidelog forward`.
pub(crate) fn run(data: &Path, args: &ForwardArgs) -> CliResult {
    crate::serve::init_logging();
    let open = || {
        if crate::common::read_only_reason(data).is_none() {
            match crate::common::open_broker(data, false) {
                // Another process took the directory since the look (an application
                // started meanwhile): read it as one it holds.
                Err(_) if crate::common::read_only_reason(data).is_some() => {}
                opened => return opened,
            }
        }
        crate::common::open_broker_read_only(data)
    };
    if args.describe {
        // Read-only whoever holds the directory: a describe (a monitoring loop's,
        // say) never takes it from a forwarder or an application starting meanwhile.
        let broker = crate::common::open_broker_read_only(data)?;
        let status = Forwarder::positions(&broker, &args.name)?;
        broker.close()?;
        return describe(data, &status);
    }
    if args.release {
        let broker = open()?;
        let released = Forwarder::release(&broker, &args.name)?;
        broker.close()?;
        eprintln!(
            "tidelog forward: released the retention holds of forwarder {} on {released} partitions",
            args.name
        );
        return Ok(());
    }
    let Some(bootstrap) = &args.target.bootstrap else {
        return Err(fail!(
            "give --bootstrap HOST:PORT: the cluster the records are forwarded to"
        ));
    };
    let client = crate::common::client_config(bootstrap, &args.target, "tidelog-forward");
    let metrics = match &args.metrics_listen {
        Some(addr) => Some(crate::serve::bind_metrics(addr)?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| fail!("cannot install the signal handler: {e}"))?;
    }
    let broker = open()?;
    let mut builder = Forwarder::builder(&broker, client)
        .name(&args.name)
        .allow_retention_loss(args.allow_retention_loss)
        .transactional(!args.no_transactions);
    for t in &args.topics {
        builder = builder.topic(t);
    }
    for r in &args.rename {
        let Some((from, to)) = r.split_once('=') else {
            return Err(fail!("--rename {r:?}: give FROM=TO"));
        };
        builder = builder.rename(from, to);
    }
    let forwarder = builder.start()?;
    eprintln!(
        "tidelog forward: {} to {bootstrap} as {} (SIGINT or SIGTERM to stop)",
        data.display(),
        args.name
    );
    if let Some(listener) = metrics {
        let addr = listener
            .local_addr()
            .map_err(|e| fail!("cannot read the metrics listener's address: {e}"))?;
        // The forwarder is in the broker's metrics while it runs.
        crate::metrics_http::spawn(listener, broker.clone())
            .map_err(|e| fail!("cannot start the metrics thread: {e}"))?;
        eprintln!("tidelog forward: metrics on http://{addr}/metrics");
    }
    let progress = Progress::with(label(bootstrap, 0), Unit::Records, None);
    let mut failing: Option<String> = None;
    let mut behind = 0;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(100));
        let status = forwarder.status();
        progress.set(status.records_forwarded);
        if status.records_behind() != behind {
            behind = status.records_behind();
            progress.label(label(bootstrap, behind));
        }
        match (&failing, &status.last_error) {
            (None, Some(e)) => {
                crate::progress::suspend(|| eprintln!("warning: forwarding paused, retrying: {e}"));
                failing = Some(e.clone());
            }
            (Some(_), None) => {
                crate::progress::suspend(|| eprintln!("tidelog forward: forwarding again"));
                failing = None;
            }
            _ => {}
        }
    }
    drop(progress);
    let status = forwarder.status();
    forwarder.stop()?;
    eprintln!(
        "tidelog forward: stopped: {} records forwarded, {} behind",
        status.records_forwarded,
        status.records_behind()
    );
    Ok(())
}

/// The progress label: where to, and the records behind.
fn label(bootstrap: &str, behind: u64) -> String {
    format!("forwarded to {bootstrap}, {behind} behind")
}

/// `--describe`: the forwarder's line, then per partition its position, the end, the
/// records behind (kafka-consumer-groups --describe's columns), then its last error.
fn describe(data: &Path, status: &ForwardStatus) -> CliResult {
    let mut out = crate::out::Out::new();
    if status.partitions.is_empty() {
        out.line(format_args!(
            "Forwarder '{}' has no position in {} (never started there, or released)",
            status.name,
            data.display()
        ))?;
    } else {
        out.line(format_args!(
            "Forwarder '{}' (group {GROUP_PREFIX}{}): {} records ({} bytes) behind",
            status.name,
            status.name,
            status.records_behind(),
            status.bytes_behind()
        ))?;
        out.line("")?;
        out.line("TOPIC\tPARTITION\tPOSITION\tLOG-END-OFFSET\tLAG\tBYTES-BEHIND")?;
        for p in &status.partitions {
            out.line(format_args!(
                "{}\t{}\t{}\t{}\t{}\t{}",
                p.topic,
                p.partition,
                p.position,
                p.end,
                p.records_behind(),
                p.bytes_behind
            ))?;
        }
    }
    if let Some(e) = &status.last_error {
        let ago = status
            .last_error_at
            .and_then(|at| SystemTime::now().duration_since(at).ok())
            .map_or_else(String::new, |d| format!(" ({} s ago)", d.as_secs()));
        out.line("")?;
        out.line(format_args!("Last error{ago}: {e}"))?;
    }
    out.flush()
}
