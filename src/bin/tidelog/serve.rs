//! `tidelog serve`: the Kafka wire protocol server over the data directory.
//!
//! Opens the broker on `--data`, serves it with [`tidelog::Server`] on `--listen`
//! (default 127.0.0.1:9092) until SIGINT or SIGTERM, then stops accepting, lets requests
//! in flight finish, closes every connection and closes the broker cleanly.
//!
//! With `--node-id N --quorum 1@host:port,...` the process is node N of a cluster: the
//! quorum elects a controller among the voters, topics are replicated as the controller
//! places them, and SIGTERM first moves this node's leaderships away (controlled
//! shutdown).
//!
//! Logs go to stderr through `tracing`: warnings and errors only by default (refused
//! connections and oversize requests, with the peer address, at most one line per peer
//! address per 10 s); `RUST_LOG=info` adds topic creations and start/stop,
//! `RUST_LOG=debug` every connection.
//!
//! Before anything else it binds the listen address, so a port in use fails before the
//! data directory is created or locked, and raises its soft open-files limit to the hard
//! one (each connection costs a descriptor), printing how many connections fit.

use crate::cli::ServeArgs;
use crate::{CliResult, fail};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

/// Runs the server until SIGINT or SIGTERM.
pub(crate) fn run(data: &Path, args: &ServeArgs) -> CliResult {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let listen: SocketAddr = args.listen.parse().map_err(|e| {
        fail!(
            "--listen {:?} is not an IP address and port such as 127.0.0.1:9092: {e}",
            args.listen
        )
    })?;
    // A bug in one connection thread closes that connection only; the tool's hook (which
    // exits the process) would take every client down with it.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error in a server thread (please report it): {info}");
    }));
    // Bind before the data directory is touched: a port in use must not leave a created
    // or locked directory behind.
    let listener = TcpListener::bind(listen).map_err(|e| {
        fail!("cannot listen on {listen}: {e} (is another server using that address?)")
    })?;
    let files_limit = raise_open_files_limit();
    let broker = tidelog::Broker::builder(data)
        .default_partitions(args.num_partitions)
        .open()?;
    let mut builder = tidelog::Server::builder(broker)
        .listen(listen)
        .listener(listener)
        .fetch_max_wait(Duration::from_millis(args.fetch_max_wait_ms))
        .max_queued_request_bytes(args.max_queued_request_bytes)
        .max_connections(args.max_connections)
        .max_request_size(args.max_request_size)
        .auto_create_topics(!args.no_auto_create_topics);
    if let Some(advertised) = &args.advertised {
        builder = builder.advertised(advertised.clone());
    }
    if let (Some(node_id), Some(quorum)) = (args.node_id, &args.quorum) {
        builder = builder
            .node_id(node_id)
            .quorum(quorum.clone())
            .broker_session_timeout(Duration::from_millis(args.broker_session_timeout_ms))
            .default_replication_factor(args.default_replication_factor)
            .min_insync_replicas(args.min_insync_replicas)
            .replica_lag_time_max(Duration::from_millis(args.replica_lag_time_max_ms))
            .offsets_topic_replication_factor(args.offsets_topic_replication_factor);
    }
    let server = builder.start()?;
    let role = match server.node_id() {
        Some(id) => format!(" as node {id} of the cluster"),
        None => String::new(),
    };
    eprintln!(
        "tidelog serve: Kafka protocol on {} for {}{role} (SIGINT or SIGTERM to stop)",
        server.local_addr(),
        data.display()
    );
    eprintln!(
        "tidelog serve: open-files limit {files_limit}: up to {} connections",
        server.max_connections()
    );
    server.run_until_signal()?;
    eprintln!("tidelog serve: stopped");
    Ok(())
}

/// Raises the soft open-files limit to the hard one; says what the limit is (and what it
/// was, if raised) for the start-up line.
fn raise_open_files_limit() -> String {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let show = |l: Option<u64>| l.map_or_else(|| "unlimited".to_string(), |l| l.to_string());
    let Rlimit { current, maximum } = getrlimit(Resource::Nofile);
    if current == maximum {
        return show(current);
    }
    match setrlimit(
        Resource::Nofile,
        Rlimit {
            current: maximum,
            maximum,
        },
    ) {
        Ok(()) => format!("{} (raised from {})", show(maximum), show(current)),
        Err(e) => {
            tracing::warn!(
                soft = show(current),
                hard = show(maximum),
                error = %e,
                "cannot raise the open-files limit to its hard limit"
            );
            show(current)
        }
    }
}
