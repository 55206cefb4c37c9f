//! The subject of an X.509 certificate as an RFC 2253 distinguished name, the way Java's
//! `X500Principal.getName()` prints it: Kafka's default `ssl.principal.mapping.rules`
//! (`DEFAULT`) make a TLS client's principal `User:` followed by exactly this string,
//! e.g. `User:CN=client,OU=eng,O=Example,C=US`.
//!
//! - RDNs in reverse order of the certificate's encoding (most specific first), joined
//!   by `,`; the values of a multi-valued RDN joined by `+`.
//! - The RFC 2253 keywords `CN`, `C`, `L`, `ST`, `O`, `OU`, `STREET`, `DC`, `UID` for
//!   their types when the value is a string; any other attribute as its dotted OID and
//!   `#` with the hex of the value's DER encoding (so an e-mail address attribute reads
//!   `1.2.840.113549.1.9.1=#16...`).
//! - `,` `+` `"` `\` `<` `>` `;` escaped with `\`, as are a leading `#` or space and a
//!   trailing space; control characters as `\XX`.
//!
//! Only the little DER this needs is parsed here, strictly and with every length
//! checked: a certificate it cannot read is an error, never a panic or a guessed name.

use std::fmt::Write as _;

/// A DER element: its tag, its contents, and its whole encoding.
struct Tlv<'a> {
    tag: u8,
    value: &'a [u8],
    whole: &'a [u8],
}

/// Reads one element from the front of `input`, returning it and what follows.
fn tlv(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), String> {
    let (&tag, rest) = input.split_first().ok_or("truncated DER: no tag")?;
    if tag & 0x1f == 0x1f {
        return Err("multi-byte DER tags are not expected here".into());
    }
    let (&first, mut rest) = rest.split_first().ok_or("truncated DER: no length")?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return Err(format!("unsupported DER length form 0x{first:02x}"));
        }
        if rest.len() < n {
            return Err("truncated DER length".into());
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | usize::from(b);
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return Err(format!(
            "truncated DER: an element of {len} bytes has only {} left",
            rest.len()
        ));
    }
    let header = input.len() - rest.len();
    Ok((
        Tlv {
            tag,
            value: &rest[..len],
            whole: &input[..header + len],
        },
        &rest[len..],
    ))
}

/// Reads an element that must have tag `tag`.
fn expect<'a>(input: &'a [u8], tag: u8, what: &str) -> Result<(Tlv<'a>, &'a [u8]), String> {
    let (t, rest) = tlv(input)?;
    if t.tag != tag {
        return Err(format!(
            "expected {what} (tag 0x{tag:02x}), found tag 0x{:02x}",
            t.tag
        ));
    }
    Ok((t, rest))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// The RFC 2253 subject name of the DER certificate `der`.
pub(crate) fn subject_rfc2253(der: &[u8]) -> Result<String, String> {
    let (cert, _) = expect(der, SEQUENCE, "a certificate")?;
    let (tbs, _) = expect(cert.value, SEQUENCE, "the to-be-signed certificate")?;
    let mut rest = tbs.value;
    // [0] EXPLICIT version, optional.
    let (first, after) = tlv(rest)?;
    if first.tag == 0xa0 {
        rest = after;
    }
    let (_serial, r) = expect(rest, 0x02, "the serial number")?;
    let (_signature, r) = expect(r, SEQUENCE, "the signature algorithm")?;
    let (_issuer, r) = expect(r, SEQUENCE, "the issuer")?;
    let (_validity, r) = expect(r, SEQUENCE, "the validity")?;
    let (subject, _) = expect(r, SEQUENCE, "the subject")?;
    name_rfc2253(subject.value)
}

/// The RFC 2253 string of the contents of a `Name` (a SEQUENCE OF RDN).
fn name_rfc2253(mut rdns: &[u8]) -> Result<String, String> {
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (rdn, rest) = expect(rdns, SET, "a relative distinguished name")?;
        rdns = rest;
        let mut avas = Vec::new();
        let mut inner = rdn.value;
        while !inner.is_empty() {
            let (ava, rest) = expect(inner, SEQUENCE, "an attribute")?;
            inner = rest;
            let (oid, value) = expect(ava.value, OID, "an attribute type")?;
            let (value, trailing) = tlv(value)?;
            if !trailing.is_empty() {
                return Err("bytes after an attribute's value".into());
            }
            avas.push(ava_rfc2253(oid.value, &value)?);
        }
        if avas.is_empty() {
            return Err("an empty relative distinguished name".into());
        }
        parts.push(avas.join("+"));
    }
    parts.reverse();
    Ok(parts.join(","))
}

/// `TYPE=value` of one attribute.
fn ava_rfc2253(oid: &[u8], value: &Tlv<'_>) -> Result<String, String> {
    let oid = dotted_oid(oid)?;
    let keyword = match oid.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "2.5.4.9" => Some("STREET"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        _ => None,
    };
    match (keyword, string_value(value)?) {
        (Some(k), Some(s)) => Ok(format!("{k}={}", escape(&s))),
        _ => {
            let mut hex = String::with_capacity(value.whole.len() * 2);
            for b in value.whole {
                let _ = write!(hex, "{b:02x}");
            }
            Ok(format!("{}=#{hex}", keyword.map_or(oid.as_str(), |k| k)))
        }
    }
}

/// The text of a string-typed value; `None` for a value of another type.
fn string_value(value: &Tlv<'_>) -> Result<Option<String>, String> {
    let bad = |what: &str| format!("an attribute value is not valid {what}");
    Ok(Some(match value.tag {
        // UTF8String, PrintableString, IA5String, NumericString, VisibleString
        0x0c | 0x13 | 0x16 | 0x12 | 0x1a => std::str::from_utf8(value.value)
            .map_err(|_| bad("UTF-8"))?
            .to_string(),
        // TeletexString: Latin-1 in practice.
        0x14 => value.value.iter().map(|&b| char::from(b)).collect(),
        // BMPString: UTF-16BE.
        0x1e => {
            if !value.value.len().is_multiple_of(2) {
                return Err(bad("UTF-16"));
            }
            let units: Vec<u16> = value
                .value
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).map_err(|_| bad("UTF-16"))?
        }
        // UniversalString: UTF-32BE.
        0x1c => {
            if !value.value.len().is_multiple_of(4) {
                return Err(bad("UTF-32"));
            }
            value
                .value
                .chunks_exact(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                .collect::<Option<String>>()
                .ok_or_else(|| bad("UTF-32"))?
        }
        _ => return Ok(None),
    }))
}

/// An OID's dotted form.
fn dotted_oid(bytes: &[u8]) -> Result<String, String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut acc: u64 = 0;
    let mut pending = false;
    for &b in bytes {
        if acc > (u64::MAX >> 7) {
            return Err("an OID arc is too large".into());
        }
        acc = (acc << 7) | u64::from(b & 0x7f);
        pending = true;
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (acc / 40).min(2);
                arcs.push(first);
                arcs.push(acc - first * 40);
            } else {
                arcs.push(acc);
            }
            acc = 0;
            pending = false;
        }
    }
    if pending || arcs.is_empty() {
        return Err("a truncated OID".into());
    }
    Ok(arcs
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("."))
}

/// RFC 2253 escaping of an attribute value.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let last = s.chars().count().saturating_sub(1);
    for (i, c) in s.chars().enumerate() {
        match c {
            ',' | '+' | '"' | '\\' | '<' | '>' | ';' => {
                out.push('\\');
                out.push(c);
            }
            '#' if i == 0 => out.push_str("\\#"),
            ' ' if i == 0 || i == last => out.push_str("\\ "),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if value.len() < 0x80 {
            out.push(value.len() as u8);
        } else {
            out.push(0x82);
            out.extend_from_slice(&(value.len() as u16).to_be_bytes());
        }
        out.extend_from_slice(value);
        out
    }

    fn ava(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        let mut inner = der(OID, oid);
        inner.extend(der(tag, value));
        der(SET, &der(SEQUENCE, &inner))
    }

    /// A certificate skeleton with the given subject RDNs (already SET-encoded).
    fn cert(rdns: &[Vec<u8>]) -> Vec<u8> {
        let mut tbs = der(0xa0, &der(0x02, &[2]));
        tbs.extend(der(0x02, &[1, 2, 3]));
        tbs.extend(der(SEQUENCE, &der(OID, &[0x2a, 0x86, 0x48])));
        tbs.extend(der(SEQUENCE, &[]));
        tbs.extend(der(SEQUENCE, &[]));
        tbs.extend(der(SEQUENCE, &rdns.concat()));
        tbs.extend(der(SEQUENCE, &[]));
        der(SEQUENCE, &der(SEQUENCE, &tbs))
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const O: &[u8] = &[0x55, 0x04, 0x0a];
    const C: &[u8] = &[0x55, 0x04, 0x06];
    const EMAIL: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];

    #[test]
    fn most_specific_first_with_keywords() {
        let c = cert(&[
            ava(C, 0x13, b"US"),
            ava(O, 0x0c, b"Example, Inc."),
            ava(CN, 0x0c, b"client-1"),
        ]);
        assert_eq!(
            subject_rfc2253(&c).unwrap(),
            "CN=client-1,O=Example\\, Inc.,C=US"
        );
    }

    #[test]
    fn unknown_types_are_hex_and_multi_valued_rdns_joined_by_plus() {
        let mut multi = der(OID, CN);
        multi.extend(der(0x0c, b"a"));
        let mut second = der(OID, EMAIL);
        second.extend(der(0x16, b"a@b"));
        let rdn = der(
            SET,
            &[der(SEQUENCE, &multi), der(SEQUENCE, &second)].concat(),
        );
        assert_eq!(
            subject_rfc2253(&cert(&[rdn])).unwrap(),
            "CN=a+1.2.840.113549.1.9.1=#1603614062"
        );
    }

    #[test]
    fn escaping() {
        assert_eq!(escape(" #a+b;c "), "\\ #a\\+b\\;c\\ ");
        assert_eq!(escape("#x"), "\\#x");
        assert_eq!(escape("tab\t"), "tab\\09");
    }

    #[test]
    fn oids() {
        assert_eq!(dotted_oid(EMAIL).unwrap(), "1.2.840.113549.1.9.1");
        assert_eq!(dotted_oid(CN).unwrap(), "2.5.4.3");
        assert!(dotted_oid(&[0x86]).is_err());
        assert!(dotted_oid(&[]).is_err());
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let c = cert(&[ava(CN, 0x0c, b"client"), ava(O, 0x0c, b"org")]);
        assert!(subject_rfc2253(&c).is_ok());
        for cut in 0..c.len() {
            assert!(subject_rfc2253(&c[..cut]).is_err(), "cut at {cut}");
        }
    }
}
