//! `tidelog serve`: the Kafka wire protocol server over the data directory.
//!
//! Placeholder for the server work (feature `server`): the server engineer or the lead
//! replaces the body of [`run`] with opening the broker and running the listener until
//! SIGINT/SIGTERM.

use crate::cli::ServeArgs;
use crate::{CliResult, fail};
use std::path::Path;

/// Runs the server until it is stopped.
pub(crate) fn run(data: &Path, args: &ServeArgs) -> CliResult {
    Err(fail!(
        "tidelog serve (listening on {} for {}) is not part of this build yet",
        args.listen,
        data.display()
    ))
}
