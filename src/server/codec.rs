//! Wire framing and request decoding.
//!
//! Every Kafka message is an `i32` big-endian size followed by that many bytes. A request
//! starts with `api_key: i16, api_version: i16, correlation_id: i32` in every header
//! version, so those three are read by hand before anything else: that is enough to
//! answer an ApiVersions request of a version we cannot parse, and to log which request
//! was bad.
//!
//! Request bodies are decoded with the `kafka-protocol` crate, behind a guard: its array
//! decoder reserves `Vec::with_capacity(n)` for an element count `n` read off the wire, so
//! a ten-byte request claiming two billion elements would make the process abort on a
//! failed allocation. [`decode`] first decodes with every `i32` larger than the bytes
//! left replaced by "bytes left + 1": an array of `n` elements needs at least `n` bytes,
//! so if such a value was a count or a length, that decode fails (as the real one would,
//! without the allocation); if it succeeds, every such value was a plain number (a
//! timeout, a byte limit) and the request is decoded again with the real values.
//!
//! Flexible versions count their arrays with an unsigned varint, read one byte at a time
//! through `Buf::try_get_u8` (the only other reader of single unsigned bytes is the
//! boolean decoder, whose bytes are 0 or 1). In a request body every unsigned varint is
//! a count, a length or a tag, none of which can exceed the bytes that follow it by more
//! than one (compact lengths are stored plus one), so a varint larger than that fails the
//! decode before the array's `Vec::with_capacity` sees it.

use std::io::{self, Read};
use std::ops::Range;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::protocol::buf::ByteBuf;

/// Kafka's `socket.request.max.bytes` default: 100 MiB.
pub(crate) const DEFAULT_MAX_REQUEST_SIZE: usize = 100 * 1024 * 1024;

/// Bytes every request header starts with: api key, api version, correlation id.
pub(crate) const MIN_REQUEST_LEN: usize = 8;

/// Why a frame could not be read.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// The peer closed the connection cleanly between two requests.
    Closed,
    /// The size prefix is negative, smaller than a request header, or above the limit.
    BadLength(i32),
    /// The peer closed the connection in the middle of a frame.
    Truncated {
        /// Bytes the frame announced.
        expected: usize,
        /// Bytes that arrived.
        got: usize,
    },
    /// The socket failed (reset, timeout, shut down).
    Io(io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Closed => write!(f, "connection closed"),
            FrameError::BadLength(n) => write!(f, "request size {n} is not acceptable"),
            FrameError::Truncated { expected, got } => write!(
                f,
                "connection closed after {got} of the {expected} bytes of a request"
            ),
            FrameError::Io(e) => write!(f, "read failed: {e}"),
        }
    }
}

/// Read the size prefix of the next frame and check it against `max`.
pub(crate) fn read_size(r: &mut impl Read, max: usize) -> Result<usize, FrameError> {
    let mut size = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut size[got..]) {
            Ok(0) if got == 0 => return Err(FrameError::Closed),
            Ok(0) => {
                return Err(FrameError::Truncated { expected: 4, got });
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    let len = i32::from_be_bytes(size);
    if len < MIN_REQUEST_LEN as i32 || len as usize > max {
        return Err(FrameError::BadLength(len));
    }
    Ok(len as usize)
}

/// Bytes of a frame's buffer before the first doubling.
const FIRST_CHUNK: usize = 64 * 1024;

/// Read the `len` bytes of a frame whose size prefix was read.
///
/// The buffer grows with the bytes that arrive, never from the size prefix: it starts
/// at 64 KiB and doubles when full, capped at `len`, so a client announcing 100 MiB and
/// sending a few bytes costs a few bytes, and a buffer is never larger than its frame.
pub(crate) fn read_body(r: &mut impl Read, len: usize) -> Result<Vec<u8>, FrameError> {
    let mut frame = Vec::new();
    while frame.len() < len {
        let grow = frame.capacity().max(FIRST_CHUNK).min(len - frame.len());
        frame.reserve_exact(grow);
        let room = frame.capacity().min(len) - frame.len();
        // Reads at most `room` more bytes; `read_to_end` never grows the buffer past
        // what it holds when the `take` limit is the spare capacity.
        match r.take(room as u64).read_to_end(&mut frame) {
            Ok(n) if n == room => {}
            Ok(_) => {
                return Err(FrameError::Truncated {
                    expected: len,
                    got: frame.len(),
                });
            }
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(frame)
}

/// The fixed start of every request header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestStart {
    /// Which API.
    pub api_key: i16,
    /// Which version of it.
    pub api_version: i16,
    /// Echoed in the response header.
    pub correlation_id: i32,
}

/// Read the api key, version and correlation id; `None` if the frame is too short.
pub(crate) fn request_start(frame: &[u8]) -> Option<RequestStart> {
    let b = frame.get(..MIN_REQUEST_LEN)?;
    Some(RequestStart {
        api_key: i16::from_be_bytes([b[0], b[1]]),
        api_version: i16::from_be_bytes([b[2], b[3]]),
        correlation_id: i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
    })
}

/// The client id of a request header (every header version puts it, as a classic
/// nullable string, right after the correlation id), if the frame holds one.
pub(crate) fn client_id(frame: &[u8]) -> Option<String> {
    let len = frame.get(MIN_REQUEST_LEN..MIN_REQUEST_LEN + 2)?;
    let len = usize::try_from(i16::from_be_bytes([len[0], len[1]])).ok()?;
    let bytes = frame.get(MIN_REQUEST_LEN + 2..MIN_REQUEST_LEN + 2 + len)?;
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// A request header decoded, and the body bytes that follow it.
pub(crate) fn split_header(
    frame: Bytes,
    header_version: i16,
) -> Result<(RequestHeader, Bytes), String> {
    let mut buf = frame;
    let header: RequestHeader = decode(&mut buf, header_version)?;
    Ok((header, buf))
}

/// Decode a `T` of `version` from the front of `buf` without trusting any length in it
/// (see the module docs); on success `buf` is advanced past it.
pub(crate) fn decode<T: Decodable>(buf: &mut Bytes, version: i16) -> Result<T, String> {
    let mut guarded = Guarded {
        inner: buf.clone(),
        clamp: true,
        clamped: false,
        varint_continuation: 0,
    };
    let first = T::decode(&mut guarded, version).map_err(|e| e.to_string())?;
    if !guarded.clamped {
        *buf = guarded.inner;
        return Ok(first);
    }
    // Some i32 was larger than the bytes left: a legitimate big value (a timeout, a byte
    // limit) since the clamped decode worked. Decode again with the real values.
    drop(first);
    let mut plain = Guarded {
        inner: buf.clone(),
        clamp: false,
        clamped: false,
        varint_continuation: 0,
    };
    let value = T::decode(&mut plain, version).map_err(|e| e.to_string())?;
    *buf = plain.inner;
    Ok(value)
}

/// A byte buffer that can clamp every `i32` read from it to the number of bytes left.
struct Guarded {
    /// The bytes not yet consumed.
    inner: Bytes,
    /// Whether to clamp.
    clamp: bool,
    /// Set when some value was clamped.
    clamped: bool,
    /// Continuation bytes of an unsigned varint already checked whole, still to be read.
    varint_continuation: u8,
}

impl Buf for Guarded {
    fn remaining(&self) -> usize {
        self.inner.remaining()
    }

    fn chunk(&self) -> &[u8] {
        self.inner.chunk()
    }

    fn advance(&mut self, cnt: usize) {
        self.inner.advance(cnt)
    }

    fn try_get_i32(&mut self) -> Result<i32, bytes::TryGetError> {
        let v = self.inner.try_get_i32()?;
        let left = self.inner.remaining();
        if self.clamp && v > 0 && v as usize > left {
            self.clamped = true;
            // One more than the bytes left: if this is an element count or a length,
            // decoding must fail (each element takes at least one byte), exactly as it
            // would with the real value; if it is a plain number, its value does not
            // matter to the layout. `left` < v <= i32::MAX, so this fits.
            return Ok(left as i32 + 1);
        }
        Ok(v)
    }

    fn try_get_u8(&mut self) -> Result<u8, bytes::TryGetError> {
        let b = self.inner.try_get_u8()?;
        if self.varint_continuation > 0 {
            self.varint_continuation -= 1;
            return Ok(b);
        }
        if b < 0x80 {
            // A one-byte varint (at most 127) or a boolean: too small to allocate much.
            return Ok(b);
        }
        // The first byte of a varint of two to five bytes: read it whole, as the decoder
        // will, and refuse it if it claims more than the bytes after it.
        let rest = self.inner.chunk();
        let mut value = u64::from(b & 0x7f);
        let mut len = 1usize;
        for (i, &next) in rest.iter().take(4).enumerate() {
            value |= u64::from(next & 0x7f) << (7 * (i + 1));
            len += 1;
            if next < 0x80 {
                break;
            }
        }
        let left = self.inner.remaining().saturating_sub(len - 1);
        if value > left as u64 + 1 {
            return Err(bytes::TryGetError {
                requested: usize::try_from(value).unwrap_or(usize::MAX),
                available: left,
            });
        }
        self.varint_continuation = (len - 1) as u8;
        Ok(b)
    }
}

impl ByteBuf for Guarded {
    fn peek_bytes(&mut self, r: Range<usize>) -> Bytes {
        // Only reached through `try_peek_bytes`, which checks the range first; stay total
        // anyway.
        if r.start <= r.end && r.end <= self.inner.len() {
            self.inner.slice(r)
        } else {
            Bytes::new()
        }
    }

    fn get_bytes(&mut self, size: usize) -> Bytes {
        let size = size.min(self.inner.len());
        self.inner.split_to(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::MetadataRequest;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    /// Read a size prefix and then the frame, as the connection does.
    fn read_frame(r: &mut impl Read, max: usize) -> Result<Vec<u8>, FrameError> {
        let len = read_size(r, max)?;
        read_body(r, len)
    }

    /// Hands out `left` bytes, then end of file; remembers the largest buffer offered.
    struct Trickle {
        left: usize,
        largest_buffer: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.largest_buffer = self.largest_buffer.max(buf.len());
            let n = buf.len().min(self.left).min(4096);
            buf[..n].fill(7);
            self.left -= n;
            Ok(n)
        }
    }

    #[test]
    fn a_body_buffer_grows_with_the_bytes_received() {
        // A frame that claims 50 MiB of which 100 KiB arrive: the buffer offered to the
        // socket never goes past what came plus one doubling.
        let mut r = Trickle {
            left: 100 * 1024,
            largest_buffer: 0,
        };
        let err = read_body(&mut r, 50 << 20).unwrap_err();
        assert!(
            matches!(err, FrameError::Truncated { got, .. } if got == 100 * 1024),
            "{err:?}"
        );
        assert!(r.largest_buffer <= 128 * 1024, "{}", r.largest_buffer);
        // A whole frame is read exactly, in a buffer no larger than the frame.
        let whole = vec![1u8; 300 * 1024 + 5];
        let got = read_body(&mut &whole[..], whole.len()).unwrap();
        assert_eq!(got, whole);
        assert!(got.capacity() <= whole.len(), "{}", got.capacity());
    }

    #[test]
    fn reads_a_frame() {
        let bytes = framed(b"12345678rest");
        let got = read_frame(&mut &bytes[..], 1000).unwrap();
        assert_eq!(got, b"12345678rest");
    }

    #[test]
    fn rejects_negative_small_and_oversize_lengths() {
        for len in [-1i32, 0, 7, 1001, i32::MAX] {
            let bytes = len.to_be_bytes();
            match read_frame(&mut &bytes[..], 1000) {
                Err(FrameError::BadLength(n)) => assert_eq!(n, len),
                other => panic!("length {len}: {other:?}"),
            }
        }
    }

    #[test]
    fn reports_truncation_and_clean_close() {
        assert!(matches!(
            read_frame(&mut &[][..], 1000),
            Err(FrameError::Closed)
        ));
        assert!(matches!(
            read_frame(&mut &[0u8, 0][..], 1000),
            Err(FrameError::Truncated {
                expected: 4,
                got: 2
            })
        ));
        let mut bytes = framed(b"12345678rest");
        bytes.truncate(9);
        assert!(matches!(
            read_frame(&mut &bytes[..], 1000),
            Err(FrameError::Truncated {
                expected: 12,
                got: 5
            })
        ));
    }

    #[test]
    fn a_huge_count_at_the_very_end_is_an_error_not_an_allocation() {
        use kafka_protocol::messages::ListOffsetsRequest;
        // ListOffsets v1: replica_id, then a topics count with nothing after it.
        let mut body = Bytes::from_static(&[0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff]);
        assert!(decode::<ListOffsetsRequest>(&mut body, 1).is_err());
    }

    #[test]
    fn a_huge_array_count_is_an_error_not_an_allocation() {
        // Metadata v1: topics array claiming i32::MAX entries, then nothing.
        let mut body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 1]);
        let err = decode::<MetadataRequest>(&mut body, 1).unwrap_err();
        assert!(!err.is_empty());
    }

    #[test]
    fn a_huge_compact_array_count_is_an_error_not_an_allocation() {
        use kafka_protocol::messages::IncrementalAlterConfigsRequest;
        // IncrementalAlterConfigs v1 (flexible): a resources count of about 124 million
        // in a four-byte varint, then five bytes (found by the request_decoder fuzzer).
        let mut body = Bytes::from_static(&[237, 157, 255, 59, 255, 255, 255, 255, 255]);
        let err = decode::<IncrementalAlterConfigsRequest>(&mut body, 1).unwrap_err();
        assert!(!err.is_empty());
    }

    #[test]
    fn multi_byte_varints_of_legitimate_size_survive_the_guard() {
        use kafka_protocol::messages::MetadataRequest;
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::protocol::{Encodable, StrBytes};
        // Metadata v9 (flexible) with 200 topics: the count takes a two-byte varint, and
        // a 300-byte topic name a two-byte length.
        let mut req = MetadataRequest::default();
        let mut topics: Vec<MetadataRequestTopic> = (0..200)
            .map(|i| {
                MetadataRequestTopic::default()
                    .with_name(Some(StrBytes::from_string(format!("t{i}")).into()))
            })
            .collect();
        topics[7].name = Some(StrBytes::from_string("x".repeat(300)).into());
        req.topics = Some(topics);
        let mut out = bytes::BytesMut::new();
        req.encode(&mut out, 9).unwrap();
        let mut body = out.freeze();
        let back = decode::<MetadataRequest>(&mut body, 9).unwrap();
        assert_eq!(back, req);
        assert!(body.is_empty());
    }

    #[test]
    fn big_legitimate_values_survive_the_guard() {
        use kafka_protocol::messages::FetchRequest;
        // Fetch v4: replica_id, max_wait_ms, min_bytes, max_bytes (big), isolation, topics.
        let mut b = Vec::new();
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&500i32.to_be_bytes());
        b.extend_from_slice(&1i32.to_be_bytes());
        b.extend_from_slice(&52_428_800i32.to_be_bytes());
        b.push(0);
        b.extend_from_slice(&0i32.to_be_bytes());
        let mut body = Bytes::from(b);
        let req = decode::<FetchRequest>(&mut body, 4).unwrap();
        assert_eq!(req.max_bytes, 52_428_800);
        assert_eq!(req.max_wait_ms, 500);
        assert!(req.topics.is_empty());
        assert!(body.is_empty());
    }
}
