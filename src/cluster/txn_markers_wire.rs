//! WriteTxnMarkers version 2 (KIP-890), which the protocol crate does not know: each
//! marker carries its `TransactionVersion` (an int8 after its `CoordinatorEpoch`; 2
//! when the coordinator bumped the producer epoch to end the transaction), otherwise
//! the layout of version 1. A version 2 request is read as version 1 with those bytes
//! taken out ([`v2_as_v1`], on the partition leader), and written as version 1 with
//! them put in ([`MarkersRequest`], by a coordinator); the responses of both versions
//! are the same.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, Request, VersionRange,
};

/// The WriteTxnMarkers version whose markers carry their transaction version.
pub(crate) const TRANSACTION_VERSION_SINCE: i16 = 2;

/// The version the protocol crate reads and writes, the same layout without the
/// transaction versions.
const CRATE_VERSION: i16 = 1;

/// A WriteTxnMarkers request of version 1 or 2: what a coordinator sends, each marker
/// of `request` with its transaction version (`transaction_versions`, in order; 0 for
/// a marker without one). Written at version 1, the transaction versions are left out.
#[derive(Debug, Clone, Default)]
pub(crate) struct MarkersRequest {
    /// The markers.
    pub(crate) request: WriteTxnMarkersRequest,
    /// The transaction version of each marker of `request`, in order.
    pub(crate) transaction_versions: Vec<i8>,
}

/// The answer to [`MarkersRequest`] (the same at both versions).
#[derive(Debug, Clone, Default)]
pub(crate) struct MarkersResponse(pub(crate) WriteTxnMarkersResponse);

impl Message for MarkersRequest {
    const VERSIONS: VersionRange = VersionRange {
        min: CRATE_VERSION,
        max: TRANSACTION_VERSION_SINCE,
    };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for MarkersRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> anyhow::Result<()> {
        let mut v1 = BytesMut::new();
        self.request.encode(&mut v1, CRATE_VERSION)?;
        if version < TRANSACTION_VERSION_SINCE {
            buf.put_slice(&v1);
            return Ok(());
        }
        if self.transaction_versions.len() != self.request.markers.len() {
            anyhow::bail!(
                "WriteTxnMarkers v{version}: {} transaction versions for {} markers",
                self.transaction_versions.len(),
                self.request.markers.len()
            );
        }
        let ends = marker_ends(&v1, CRATE_VERSION).map_err(anyhow::Error::msg)?;
        let mut from = 0;
        for (end, tv) in ends.into_iter().zip(&self.transaction_versions) {
            buf.put_slice(&v1[from..end]);
            buf.put_i8(*tv);
            from = end;
        }
        buf.put_slice(&v1[from..]);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        let extra = if version >= TRANSACTION_VERSION_SINCE {
            self.request.markers.len()
        } else {
            0
        };
        Ok(self.request.compute_size(CRATE_VERSION)? + extra)
    }
}

impl Decodable for MarkersRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
        let body = buf.copy_to_bytes(buf.remaining());
        // Every length is checked against the body before the protocol crate reads it
        // (`v2_as_v1` walks it too): copied out of the reader it was given, the body is
        // read by the crate without that reader's guard, and the crate reserves room for
        // as many elements as an array's length says.
        let (mut v1, transaction_versions) = if version >= TRANSACTION_VERSION_SINCE {
            v2_as_v1(&body).map_err(anyhow::Error::msg)?
        } else {
            marker_ends(&body, CRATE_VERSION).map_err(anyhow::Error::msg)?;
            (body, Vec::new())
        };
        let request = WriteTxnMarkersRequest::decode(&mut v1, CRATE_VERSION)?;
        Ok(MarkersRequest {
            request,
            transaction_versions,
        })
    }
}

impl HeaderVersion for MarkersRequest {
    fn header_version(version: i16) -> i16 {
        <WriteTxnMarkersRequest as HeaderVersion>::header_version(version)
    }
}

impl Request for MarkersRequest {
    const KEY: i16 = <WriteTxnMarkersRequest as Request>::KEY;
    type Response = MarkersResponse;
}

impl Message for MarkersResponse {
    const VERSIONS: VersionRange = MarkersRequest::VERSIONS;
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Encodable for MarkersResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> anyhow::Result<()> {
        self.0.encode(buf, CRATE_VERSION)
    }

    fn compute_size(&self, _version: i16) -> anyhow::Result<usize> {
        self.0.compute_size(CRATE_VERSION)
    }
}

impl Decodable for MarkersResponse {
    fn decode<B: ByteBuf>(buf: &mut B, _version: i16) -> anyhow::Result<Self> {
        WriteTxnMarkersResponse::decode(buf, CRATE_VERSION).map(MarkersResponse)
    }
}

impl HeaderVersion for MarkersResponse {
    fn header_version(_version: i16) -> i16 {
        <WriteTxnMarkersResponse as HeaderVersion>::header_version(CRATE_VERSION)
    }
}

/// The body of a version 2 request as version 1 (the protocol crate reads it), and
/// the transaction version of each marker, in order.
///
/// # Errors
/// A body that is not a whole WriteTxnMarkers v2 request, naming what is wrong.
pub(crate) fn v2_as_v1(body: &[u8]) -> Result<(Bytes, Vec<i8>), String> {
    let ends = marker_ends(body, TRANSACTION_VERSION_SINCE)?;
    let mut v1 = BytesMut::with_capacity(body.len());
    let mut versions = Vec::with_capacity(ends.len());
    let mut from = 0;
    for end in ends {
        v1.put_slice(&body[from..end]);
        versions.push(i8::from_be_bytes([body[end]]));
        from = end + 1;
    }
    v1.put_slice(&body[from..]);
    Ok((v1.freeze(), versions))
}

/// Where each marker's `CoordinatorEpoch` ends in a WriteTxnMarkers `body` of
/// `version` (1 or 2): where version 2 has the marker's transaction version.
fn marker_ends(body: &[u8], version: i16) -> Result<Vec<usize>, String> {
    let mut r = Reader { body, at: 0 };
    let markers = r.length("markers")?;
    let mut ends = Vec::with_capacity(markers.min(body.len()));
    for _ in 0..markers {
        r.skip(8 + 2 + 1, "a marker's producer id, epoch and result")?;
        for _ in 0..r.length("a marker's topics")? {
            let name = r.length("a topic name")?;
            r.skip(name, "a topic name")?;
            let partitions = r.length("a topic's partitions")?;
            r.skip(partitions.saturating_mul(4), "a topic's partitions")?;
            r.skip_tags()?;
        }
        r.skip(4, "a marker's coordinator epoch")?;
        ends.push(r.at);
        if version >= TRANSACTION_VERSION_SINCE {
            r.skip(1, "a marker's transaction version")?;
        }
        r.skip_tags()?;
    }
    r.skip_tags()?;
    if r.at != body.len() {
        return Err(format!(
            "WriteTxnMarkers v{version}: {} bytes after the request",
            body.len() - r.at
        ));
    }
    Ok(ends)
}

/// A cursor over a request body.
struct Reader<'a> {
    body: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    /// An unsigned varint.
    fn varint(&mut self, what: &str) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.body.get(self.at) else {
                return Err(format!("WriteTxnMarkers ends inside {what}"));
            };
            self.at += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("WriteTxnMarkers: {what} is a varint too long"))
    }

    /// A compact length (an array's or a string's; null is refused).
    fn length(&mut self, what: &str) -> Result<usize, String> {
        match self.varint(what)? {
            0 => Err(format!("WriteTxnMarkers: {what} is null")),
            n => usize::try_from(n - 1).map_err(|_| format!("WriteTxnMarkers: {what} too long")),
        }
    }

    /// Skips `n` bytes of `what`.
    fn skip(&mut self, n: usize, what: &str) -> Result<(), String> {
        match self.at.checked_add(n) {
            Some(end) if end <= self.body.len() => {
                self.at = end;
                Ok(())
            }
            _ => Err(format!("WriteTxnMarkers ends inside {what}")),
        }
    }

    /// Skips tagged fields.
    fn skip_tags(&mut self) -> Result<(), String> {
        for _ in 0..self.varint("tagged fields")? {
            self.varint("a tag")?;
            let size = self.varint("a tagged field's size")?;
            let size =
                usize::try_from(size).map_err(|_| "WriteTxnMarkers: a tagged field too long")?;
            self.skip(size, "a tagged field")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ProducerId;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::write_txn_markers_request::{
        WritableTxnMarker, WritableTxnMarkerTopic,
    };
    use kafka_protocol::protocol::StrBytes;

    fn request() -> WriteTxnMarkersRequest {
        let marker = |pid: i64, topics: &[(&str, &[i32])]| {
            WritableTxnMarker::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(3)
                .with_transaction_result(true)
                .with_coordinator_epoch(9)
                .with_topics(
                    topics
                        .iter()
                        .map(|(t, ps)| {
                            WritableTxnMarkerTopic::default()
                                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partition_indexes(ps.to_vec())
                        })
                        .collect(),
                )
        };
        WriteTxnMarkersRequest::default().with_markers(vec![
            marker(1, &[("a", &[0, 1]), ("bb", &[2])]),
            marker(2, &[]),
        ])
    }

    /// Version 2 is version 1 with one byte per marker after its coordinator epoch:
    /// written and read back, the markers and their transaction versions are the same;
    /// version 1 leaves them out.
    #[test]
    fn version_2_carries_each_markers_transaction_version() {
        let sent = MarkersRequest {
            request: request(),
            transaction_versions: vec![2, 0],
        };
        let mut v1 = BytesMut::new();
        sent.encode(&mut v1, 1).unwrap();
        let mut v2 = BytesMut::new();
        sent.encode(&mut v2, 2).unwrap();
        assert_eq!(v2.len(), v1.len() + 2);
        assert_eq!(sent.compute_size(2).unwrap(), v2.len());
        let read = MarkersRequest::decode(&mut v2.clone().freeze(), 2).unwrap();
        assert_eq!(read.request, request());
        assert_eq!(read.transaction_versions, vec![2, 0]);
        let (as_v1, versions) = v2_as_v1(&v2).unwrap();
        assert_eq!(as_v1, v1.freeze());
        assert_eq!(versions, vec![2, 0]);
    }

    /// A truncated or overlong body is refused with what is wrong, never a panic.
    #[test]
    fn a_bad_version_2_body_is_refused() {
        let sent = MarkersRequest {
            request: request(),
            transaction_versions: vec![2, 2],
        };
        let mut v2 = BytesMut::new();
        sent.encode(&mut v2, 2).unwrap();
        for cut in [1, 5, v2.len() - 1] {
            let e = v2_as_v1(&v2[..cut]).unwrap_err();
            assert!(e.contains("ends inside"), "{e}");
        }
        let mut longer = v2.to_vec();
        longer.push(0);
        assert!(v2_as_v1(&longer).unwrap_err().contains("1 bytes after"));
        let short = MarkersRequest {
            request: request(),
            transaction_versions: vec![2],
        };
        assert!(short.encode(&mut BytesMut::new(), 2).is_err());
    }

    /// A version 1 body whose array lengths promise more than it holds is refused
    /// before the protocol crate reads it (which reserves room for what a length says:
    /// a 2^32-element marker array aborted the process). Found by the request_decoder
    /// fuzz target.
    #[test]
    fn a_version_1_body_with_a_length_beyond_it_is_refused_before_it_is_read() {
        // markers: compact length 2^32 - 1 (varint ff ff ff ff 0f), then two bytes.
        let body = [0xff, 0xff, 0xff, 0xff, 0x0f, 0xc8, 0x08];
        let e = MarkersRequest::decode(&mut Bytes::copy_from_slice(&body), 1).unwrap_err();
        assert!(e.to_string().contains("ends inside"), "{e}");
        // A good version 1 body still reads.
        let sent = MarkersRequest {
            request: request(),
            transaction_versions: vec![0, 0],
        };
        let mut v1 = BytesMut::new();
        sent.encode(&mut v1, 1).unwrap();
        let read = MarkersRequest::decode(&mut v1.freeze(), 1).unwrap();
        assert_eq!(read.request, request());
    }
}
