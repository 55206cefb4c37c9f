//! `tidelog format --data DIR --cluster-id ID --node-id N`: formats a cluster node's
//! data directory before its first start, as Kafka's `kafka-storage format` (KIP-853),
//! with exactly one of `--standalone`, `--initial-controllers` or
//! `--no-initial-controllers`.

use std::path::Path;

use clap::{ArgGroup, Args};
use tidelog::NodeFormat;

use crate::CliResult;
use crate::out::Out;

/// `tidelog format ...`.
#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("quorum_start")
        .required(true)
        .args(["standalone", "initial_controllers", "no_initial_controllers"])
))]
pub(crate) struct FormatArgs {
    /// The cluster's id, a UUID in 22 characters of URL-safe base64 (as kafka-storage
    /// random-uuid prints); the same on every node of the cluster.
    #[arg(long, short = 't', value_name = "ID")]
    pub cluster_id: String,
    /// This node's id (the --node-id it is served with).
    #[arg(long, value_name = "N")]
    pub node_id: i32,
    /// The quorum starts with this node as its only voter; add more online (tidelog
    /// quorum add-voter).
    #[arg(long, short = 's')]
    pub standalone: bool,
    /// The voters the quorum starts with, each with its quorum address and directory id
    /// (this node's directory id is its entry's); the same list on each of them.
    #[arg(long, short = 'I', value_name = "ID@HOST:PORT:DIRECTORY_ID,...")]
    pub initial_controllers: Option<String>,
    /// The node joins a quorum that runs: it follows the metadata log and does not vote
    /// until it is added as a voter (tidelog quorum add-voter).
    #[arg(long, short = 'N')]
    pub no_initial_controllers: bool,
    /// Leave a formatted directory as it is, without an error.
    #[arg(long, short = 'g')]
    pub ignore_formatted: bool,
}

/// Runs `tidelog format`.
pub(crate) fn run(data: &Path, args: &FormatArgs) -> CliResult {
    let mode = match (&args.initial_controllers, args.standalone) {
        (Some(list), _) => NodeFormat::InitialControllers(list.clone()),
        (None, true) => NodeFormat::Standalone,
        (None, false) => NodeFormat::NoInitialControllers,
    };
    let f = tidelog::format_node(
        data,
        &args.cluster_id,
        args.node_id,
        &mode,
        args.ignore_formatted,
    )?;
    let mut out = Out::new();
    if f.already_formatted {
        out.line(format_args!(
            "{} is formatted already, as node {} of cluster {} (directory id {}); left as it is.",
            data.display(),
            f.node_id,
            f.cluster_id,
            f.directory_id
        ))?;
        return out.flush();
    }
    out.line(format_args!(
        "Formatted {} as node {} of cluster {} (directory id {}).",
        data.display(),
        f.node_id,
        f.cluster_id,
        f.directory_id
    ))?;
    if f.voters.is_empty() {
        out.line(format_args!(
            "It joins a running quorum: serve it with the quorum's voters in --quorum, then add it as a voter (tidelog quorum add-voter --node-id {}); it does not vote until then.",
            f.node_id
        ))?;
    } else {
        out.line(format_args!(
            "The quorum starts with the voters {:?}: serve it with them in --quorum.",
            f.voters
        ))?;
    }
    out.flush()
}
