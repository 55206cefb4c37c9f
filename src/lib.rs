//! tidelog: an embeddable, Kafka-compatible commit log.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod record;
#[cfg(feature = "server")]
mod server;
pub mod storage;

pub use error::{Error, Result};
pub use record::{Batch, BatchBuilder, Headers, Record};
#[cfg(feature = "server")]
#[doc(hidden)]
pub use server::fuzz_decode_request;
#[cfg(feature = "server")]
pub use server::{Server, ServerBuilder, ServerHandle, sendfile_bytes_sent};
pub use storage::{
    AppendInfo, CleanupOutcome, CleanupPolicy, LogConfig, LogManager, LogSlice, PartitionLog,
    RecoveryReport,
};
