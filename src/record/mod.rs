//! Kafka's RecordBatch v2 format: the same bytes on disk and on the wire.
//!
//! [`BatchBuilder`] encodes records into one batch; [`Batch`] validates and decodes one
//! without copying (records borrow the batch's bytes); [`batches`] walks a run of them.
//! [`Compression`] holds the codecs of compressed batches: [`Batch::decode_records`]
//! decompresses one into a buffer the caller owns. [`EndTxnMarker`] builds and parses
//! the control batches that end transactions.

mod batch;
mod builder;
mod clock;
mod compression;
mod control;
mod valid;
pub(crate) mod varint;

pub(crate) use batch::BatchHead;
#[cfg(all(test, feature = "server"))]
pub(crate) use batch::CRC_CHECKS;
pub use batch::{
    Batch, BatchIter, CONTROL_BIT, HEADER_LEN, Headers, LOG_OVERHEAD, Record, Records,
    TIMESTAMP_TYPE_BIT, TRANSACTIONAL_BIT, batch_size, batches, set_base_offset,
    set_log_append_time, set_partition_leader_epoch, set_producer,
};
pub use builder::BatchBuilder;
pub(crate) use builder::recompress_batches;
pub use clock::now_ms;
pub use compression::{Compression, DECOMPRESSION_RATIO, decompression_limit};
pub use control::{
    CONTROL_KEY_LEN, ControlRecord, ControlRecordType, END_TXN_MARKER_BATCH_LEN,
    END_TXN_MARKER_VALUE_LEN, EndTxnMarker,
};
pub use valid::ValidBatches;

/// CRC-32C (Castagnoli) of `bytes`: the checksum a RecordBatch v2 carries over its bytes
/// from the attributes field on.
///
/// ```
/// assert_eq!(tidelog::record::crc32c(b"123456789"), 0xe306_9283);
/// ```
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    // CRC-32/ISCSI is CRC-32C; the result fits in 32 bits.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

#[cfg(test)]
pub(crate) use control::test_batch;
#[cfg(test)]
mod tests;
