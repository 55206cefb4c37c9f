//! [`LogSlice`]: the zero-copy view of whole batches a read of a log returns, holding
//! its segment's map (and, once asked, its file descriptor) so it outlives rolls,
//! retention and close.

use super::mmap::AppendMap;
use super::segment::Segment;
use crate::record::Batch;
use std::fs;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A zero-copy view of whole batches read from a log.
///
/// It keeps its segment's map alive, so it stays valid when the segment is rolled,
/// deleted by retention, or the log is closed.
pub struct LogSlice {
    seg: Option<Arc<Segment>>,
    map: Option<Arc<AppendMap>>,
    /// The segment file's descriptor, taken from the data directory's cache on the
    /// first [`LogSlice::file`] and kept as long as the slice lives (a `sendfile` in
    /// flight), however the cache moves on.
    fd: OnceLock<Option<Arc<fs::File>>>,
    start: usize,
    end: usize,
    base_offset: i64,
    next_offset: i64,
}

impl std::fmt::Debug for LogSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSlice")
            .field("base_offset", &self.base_offset)
            .field("next_offset", &self.next_offset)
            .field("bytes", &self.len())
            .finish()
    }
}

impl LogSlice {
    /// An empty slice at `offset` (positioned at the end of `seg`, if any).
    pub(crate) fn empty(seg: Option<&Arc<Segment>>, offset: i64) -> LogSlice {
        let at = seg.map_or(0, |s| s.size());
        LogSlice {
            seg: seg.cloned(),
            map: None,
            fd: OnceLock::new(),
            start: at,
            end: at,
            base_offset: offset,
            next_offset: offset,
        }
    }

    /// The bytes `start..end` of `seg`'s map `map`: whole batches from `base_offset`,
    /// the next offset after them `next_offset`.
    pub(super) fn new(
        seg: &Arc<Segment>,
        map: Option<Arc<AppendMap>>,
        (start, end): (usize, usize),
        (base_offset, next_offset): (i64, i64),
    ) -> LogSlice {
        LogSlice {
            seg: Some(Arc::clone(seg)),
            map,
            fd: OnceLock::new(),
            start,
            end,
            base_offset,
            next_offset,
        }
    }

    /// The segment file the bytes live in (for `sendfile`), `None` for an empty slice
    /// of an empty log, and when the file cannot be opened (it was removed or replaced
    /// since the read, or the process is out of descriptors): the bytes are still
    /// there through the slice's map. The descriptor comes from the data directory's
    /// bounded cache and is kept open by the slice until it is dropped.
    pub fn file(&self) -> Option<&fs::File> {
        self.fd
            .get_or_init(|| {
                let seg = self.seg.as_ref()?;
                seg.fd().ok()
            })
            .as_deref()
    }
    /// Path of the segment file.
    pub fn path(&self) -> Option<&Path> {
        self.seg.as_ref().map(|s| s.log_path.as_path())
    }
    /// Byte position of the first byte inside [`LogSlice::file`].
    pub fn file_position(&self) -> u64 {
        self.start as u64
    }
    /// Base offset of the first batch (the requested offset when empty).
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    /// Offset to read next: one past the last record of the slice (the requested offset
    /// when empty).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    /// Iterates the batches in the slice.
    pub fn batches(&self) -> impl Iterator<Item = Batch<'_>> {
        // The bytes were validated on append or recovery; headers only.
        let bytes: &[u8] = self;
        let mut pos = 0;
        std::iter::from_fn(move || {
            let b = Batch::parse_header_at(&bytes[pos..], "", 0).ok()?;
            pos += b.len();
            Some(b)
        })
    }
}

impl std::ops::Deref for LogSlice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.map {
            Some(m) => m.get(self.start, self.end).unwrap_or(&[]),
            None => &[],
        }
    }
}

impl AsRef<[u8]> for LogSlice {
    fn as_ref(&self) -> &[u8] {
        self
    }
}
