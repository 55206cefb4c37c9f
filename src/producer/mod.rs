//! The producer: partitioning, batching and delivery of records.

mod partitioner;

pub use partitioner::{
    DefaultPartitioner, Partitioner, RoundRobinPartitioner, murmur2, partition_for_key, to_positive,
};
