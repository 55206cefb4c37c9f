//! `tidelog`: the command line tool (feature `cli`).
//!
//! One binary for what a Kafka user finds in kafka-topics, the console producer and
//! consumer, kafka-consumer-groups, kafka-dump-log and the perf-test tools, working on a
//! data directory (`--data DIR`, default `./tidelog-data`, accepted before or after any
//! subcommand; `perf` without `--data` works in a temporary directory it removes).
//! `topics` and `groups` with `--bootstrap HOST:PORT` act on a running node or cluster
//! over the Kafka protocol instead (`tidelog::admin`, feature `server`), and so does
//! `consume --group G --bootstrap HOST:PORT` (a member of the group on that cluster).
//!
//! Exit codes: 0 on success, 1 for an error (one line `error: ...` on stderr), 2 for a
//! usage error (clap's). The tool never panics on bad input; a panic hook turns a bug
//! into exit code 1 with an `error: internal error` line instead of Rust's 101.
//!
//! Layout: `cli` holds the argument definitions, one module per subcommand does the
//! work, `out` wraps stdout so a closed pipe (`| head`) ends the program quietly.

mod cli;
mod common;
#[cfg(feature = "server")]
mod configs;
mod consume;
#[cfg(feature = "server")]
mod drain;
mod dump;
mod dump_checkpoint;
#[cfg(feature = "server")]
mod features;
mod format;
#[cfg(feature = "server")]
mod forward;
mod groups;
#[cfg(feature = "server")]
mod log_dirs;
#[cfg(feature = "server")]
mod metrics_http;
mod out;
#[cfg(feature = "server")]
mod partitions;
mod perf;
#[cfg(feature = "server")]
mod perf_cluster;
#[cfg(feature = "server")]
mod perf_fetch;
#[cfg(feature = "server")]
mod perf_forward;
#[cfg(feature = "server")]
mod perf_groups;
mod perf_machine;
mod produce;
mod progress;
#[cfg(feature = "server")]
mod quorum;
#[cfg(feature = "server")]
mod reassign_dirs;
#[cfg(feature = "server")]
mod reassign_throttle;
#[cfg(feature = "server")]
mod security;
#[cfg(feature = "server")]
mod serve;
#[cfg(feature = "server")]
mod share_groups;
#[cfg(feature = "server")]
mod storage_format;
mod topics;

use clap::Parser;
use cli::{Cli, Command, PerfCmd};
use std::path::Path;
use std::process::ExitCode;

/// Why a subcommand stopped early.
#[derive(Debug)]
pub(crate) enum Fail {
    /// An error to report as `error: <message>`, exit code 1.
    Msg(String),
    /// Stdout was closed by the reader (e.g. `| head`): stop quietly, exit code 0.
    BrokenPipe,
}

impl From<tidelog::Error> for Fail {
    fn from(e: tidelog::Error) -> Self {
        Fail::Msg(e.to_string())
    }
}

/// Result of a subcommand.
pub(crate) type CliResult<T = ()> = Result<T, Fail>;

/// Builds a [`Fail::Msg`] from format arguments.
macro_rules! fail {
    ($($arg:tt)*) => { $crate::Fail::Msg(format!($($arg)*)) };
}
pub(crate) use fail;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        // A panic is a bug in tidelog, never the user's fault; still, report it the way
        // every other error is reported and keep exit code 101 for nobody.
        eprintln!("error: internal error (please report it): {info}");
        std::process::exit(1);
    }));
    let cli = Cli::parse();
    progress::init(cli.quiet);
    // `perf` decides itself what no --data means (a temporary directory).
    let given = cli.data.as_deref();
    let data = given.unwrap_or(Path::new(cli::DEFAULT_DATA));
    let result = match cli.command {
        Command::Topics(args) => topics::run(given, &args),
        Command::Produce(args) => produce::run(data, &args),
        Command::Consume(args) => consume::run(given, &args),
        Command::Groups(args) => groups::run(given, &args),
        Command::Dump(args) => dump::run(&args),
        Command::Perf(PerfCmd::Produce(args)) => perf::produce(given, &args),
        Command::Perf(PerfCmd::Consume(args)) => perf::consume(given, &args),
        Command::Perf(PerfCmd::Pubsub(args)) => perf::pubsub(given, &args),
        Command::Perf(PerfCmd::Open(args)) => perf::open(given, &args),
        Command::Perf(PerfCmd::Recover(args)) => perf::recover(given, &args),
        Command::Perf(PerfCmd::RecoverWriter(args)) => perf::recover_writer(given, &args),
        Command::Perf(PerfCmd::Lookup(args)) => perf::lookup(given, &args),
        #[cfg(feature = "server")]
        Command::Perf(PerfCmd::Cluster(args)) => perf_cluster::cluster(given, &args),
        #[cfg(feature = "server")]
        Command::Perf(PerfCmd::Groups(args)) => perf_groups::groups(given, &args),
        #[cfg(feature = "server")]
        Command::Perf(PerfCmd::Fetch(args)) => perf_fetch::fetch_sessions(given, &args),
        #[cfg(feature = "server")]
        Command::Perf(PerfCmd::Forward(args)) => perf_forward::forward(given, &args),
        #[cfg(feature = "server")]
        Command::Serve(args) => serve::run(data, &args),
        #[cfg(feature = "server")]
        Command::Forward(args) => forward::run(data, &args),
        #[cfg(feature = "server")]
        Command::Users(args) => security::users(given, &args),
        #[cfg(feature = "server")]
        Command::Acls(args) => security::acls(given, &args),
        #[cfg(feature = "server")]
        Command::LeaderElection(args) => partitions::leader_election(given, &args),
        #[cfg(feature = "server")]
        Command::LogDirs(args) => partitions::log_dirs(given, &args),
        #[cfg(feature = "server")]
        Command::Reassign(args) => partitions::reassign(given, &args),
        #[cfg(feature = "server")]
        Command::ShareGroups(args) => share_groups::run(given, &args),
        #[cfg(feature = "server")]
        Command::Quorum(args) => quorum::run(given, &args),
        #[cfg(feature = "server")]
        Command::Cluster(args) => quorum::cluster(given, &args),
        #[cfg(feature = "server")]
        Command::Configs(args) => configs::run(given, &args),
        #[cfg(feature = "server")]
        Command::Features(args) => features::run(given, &args),
        #[cfg(feature = "server")]
        Command::Format(args) => storage_format::run(data, &args),
    };
    match result {
        Ok(()) | Err(Fail::BrokenPipe) => ExitCode::SUCCESS,
        Err(Fail::Msg(msg)) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
