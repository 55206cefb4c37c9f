//! tidelog: an embeddable, Kafka-compatible commit log.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod producer;

pub use error::{Error, Result};
pub use producer::{
    DefaultPartitioner, Partitioner, RoundRobinPartitioner, murmur2, partition_for_key, to_positive,
};
