//! Kafka's RecordBatch v2 format: the same bytes on disk and on the wire.
//!
//! [`BatchBuilder`] encodes records into one batch; [`Batch`] validates and decodes one
//! without copying (records borrow the batch's bytes); [`batches`] walks a run of them.

mod batch;
mod builder;
pub mod varint;

pub use batch::{
    Batch, BatchIter, CONTROL_BIT, HEADER_LEN, Headers, LOG_OVERHEAD, Record, Records,
    TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, batch_size, batches, set_base_offset,
    set_log_append_time, set_partition_leader_epoch,
};
pub use builder::BatchBuilder;

#[cfg(test)]
mod tests;
