//! [`ValidBatches`]: a run of batches checked once (length, magic, CRC-32C), which the
//! log appends without checking again.

use super::Batch;
use crate::error::Result;

/// Batches laid back to back, every one of which passed [`Batch::parse_at`] (or was
/// encoded by tidelog itself): the proof a log append takes so that the bytes a request
/// carried are checked exactly once on their way to disk.
///
/// ```
/// use tidelog::BatchBuilder;
/// use tidelog::record::ValidBatches;
///
/// let mut b = BatchBuilder::new();
/// b.push(1_000, None, Some(b"v"), &[]);
/// let mut bytes = b.finish();
/// let valid = ValidBatches::parse(&bytes, "request")?;
/// assert_eq!(valid.iter().count(), 1);
/// assert_eq!(valid.as_bytes(), &bytes[..]);
/// // One flipped bit and the CRC refuses it.
/// let last = bytes.len() - 1;
/// bytes[last] ^= 1;
/// assert!(ValidBatches::parse(&bytes, "request").is_err());
/// # Ok::<(), tidelog::Error>(())
/// ```
#[derive(Debug)]
pub struct ValidBatches<'a> {
    bytes: &'a [u8],
    /// The first batch inline: an append almost always carries one, so no allocation.
    first: Option<Batch<'a>>,
    rest: Vec<Batch<'a>>,
}

impl<'a> ValidBatches<'a> {
    /// Checks every batch of `bytes` (length, magic, CRC-32C); errors name `location`
    /// and the byte position of the bad batch. Empty `bytes` give no batch (a log
    /// refuses an append of none).
    pub fn parse(bytes: &'a [u8], location: &str) -> Result<ValidBatches<'a>> {
        Self::walk(bytes, |rest, at| Batch::parse_at(rest, location, at))
    }

    /// The batches of `bytes` that tidelog has just encoded itself (a codec rewrite's
    /// output, whose CRC it computed): headers are checked, the CRC is not computed
    /// again. One batch a builder has just sealed takes [`ValidBatches::sealed`].
    pub(crate) fn encoded(bytes: &'a [u8], location: &str) -> Result<ValidBatches<'a>> {
        Self::walk(bytes, |rest, at| Batch::parse_header_at(rest, location, at))
    }

    /// The one batch a [`BatchBuilder`](super::BatchBuilder) has just sealed (its
    /// `finish_with` output): tidelog wrote its header and CRC, so only the length in
    /// its header is checked ([`Batch::sealed`]); errors name `location`.
    pub(crate) fn sealed(bytes: &'a [u8], location: &str) -> Result<ValidBatches<'a>> {
        Ok(ValidBatches {
            bytes,
            first: Some(Batch::sealed(bytes, location)?),
            rest: Vec::new(),
        })
    }

    fn walk(
        bytes: &'a [u8],
        parse: impl Fn(&'a [u8], u64) -> Result<Batch<'a>>,
    ) -> Result<ValidBatches<'a>> {
        let mut valid = ValidBatches {
            bytes,
            first: None,
            rest: Vec::new(),
        };
        let mut pos = 0usize;
        while pos < bytes.len() {
            let b = parse(&bytes[pos..], pos as u64)?;
            pos += b.len();
            if valid.first.is_none() {
                valid.first = Some(b);
            } else {
                valid.rest.push(b);
            }
        }
        Ok(valid)
    }

    /// The batches, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Batch<'a>> {
        self.first.iter().chain(self.rest.iter())
    }

    /// True if there is no batch.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The number of batches.
    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    /// All the bytes, as given.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BatchBuilder;

    fn sealed_batch() -> Vec<u8> {
        let mut b = BatchBuilder::new();
        b.push(1_000, None, Some(b"v"), &[]);
        b.push(1_001, Some(b"k"), Some(b"w"), &[]);
        b.finish()
    }

    #[test]
    fn a_sealed_batch_is_taken_as_it_is() {
        let bytes = sealed_batch();
        let valid = ValidBatches::sealed(&bytes, "t-0").expect("sealed");
        assert_eq!(valid.len(), 1);
        assert_eq!(valid.as_bytes(), &bytes[..]);
        assert_eq!(valid.iter().next().map(|b| b.record_count()), Some(2));
    }

    #[test]
    fn a_sealed_batch_whose_length_does_not_fit_its_header_is_refused() {
        // Past 2 GiB a builder's 32-bit length wraps to a negative one.
        let mut wrapped = sealed_batch();
        wrapped[8..12].copy_from_slice(&i32::MIN.to_be_bytes());
        let e = ValidBatches::sealed(&wrapped, "t-0").expect_err("wrapped length");
        assert!(e.to_string().contains("t-0"), "{e}");
        // A length short of the bytes (a second batch glued on) is refused too.
        let mut two = sealed_batch();
        two.extend_from_slice(&sealed_batch());
        let e = ValidBatches::sealed(&two, "t-0").expect_err("two batches");
        assert!(e.to_string().contains("declares"), "{e}");
    }
}
