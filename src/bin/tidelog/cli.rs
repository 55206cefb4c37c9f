//! Argument definitions (clap derive). Option names follow Kafka's tools and kcat.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// tidelog: an embeddable, Kafka-compatible commit log — command line tool.
#[derive(Debug, Parser)]
#[command(name = "tidelog", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// Data directory of the log (one process at a time holds it).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "./tidelog-data",
        global = true
    )]
    pub data: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Print the batches of a segment file or the entries of an index (as kafka-dump-log).
    Dump(DumpArgs),
    /// Serve the data directory over the Kafka wire protocol.
    #[cfg(feature = "server")]
    Serve(ServeArgs),
}

/// `tidelog dump PATH [--records]`.
#[derive(Debug, Args)]
pub(crate) struct DumpArgs {
    /// A `.log`, `.index` or `.timeindex` file, or a partition directory (every segment
    /// file in it, in order).
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Also print every record of each batch (offset, timestamp, key, value, headers).
    #[arg(long)]
    pub records: bool,
}

/// `tidelog serve --listen ADDR` (filled in by the server work).
#[cfg(feature = "server")]
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on, e.g. 127.0.0.1:9092.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9092")]
    pub listen: String,
}
