//! `tidelog serve`: the Kafka wire protocol server over the data directory.
//!
//! Opens the broker on `--data`, serves it with [`tidelog::Server`] on `--listen`
//! (default 127.0.0.1:9092) until SIGINT or SIGTERM, then stops accepting, lets requests
//! in flight finish, closes every connection and closes the broker cleanly.
//!
//! Logs go to stderr through `tracing`: warnings and errors only by default (refused
//! connections and oversize requests, with the peer address); `RUST_LOG=info` adds
//! topic creations and start/stop, `RUST_LOG=debug` every connection.

use crate::cli::ServeArgs;
use crate::{CliResult, fail};
use std::net::SocketAddr;
use std::path::Path;

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
    let broker = tidelog::Broker::builder(data)
        .default_partitions(args.num_partitions)
        .open()?;
    let mut builder = tidelog::Server::builder(broker)
        .listen(listen)
        .max_connections(args.max_connections)
        .max_request_size(args.max_request_size)
        .auto_create_topics(!args.no_auto_create_topics);
    if let Some(advertised) = &args.advertised {
        builder = builder.advertised(advertised.clone());
    }
    let server = builder.start()?;
    eprintln!(
        "tidelog serve: Kafka protocol on {} for {} (SIGINT or SIGTERM to stop)",
        server.local_addr(),
        data.display()
    );
    server.run_until_signal()?;
    eprintln!("tidelog serve: stopped");
    Ok(())
}
