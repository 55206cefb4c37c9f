//! tidelog: an embeddable, Kafka-compatible commit log.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod record;
pub mod storage;

pub use error::{Error, Result};
pub use record::{Batch, BatchBuilder, Headers, Record};
pub use storage::{
    AppendInfo, CleanupOutcome, CleanupPolicy, LogConfig, LogManager, LogSlice, PartitionLog,
    RecoveryReport,
};
