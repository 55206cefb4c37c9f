//! kcat's output format (`-f`): tokens `%s %k %t %p %o %T %h %S %K %%` and escapes
//! `\n \t \r \\`, parsed once and rendered per record into a reused buffer.

use crate::{CliResult, fail};
use tidelog::ConsumerRecord;

/// One piece of a parsed format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(Vec<u8>),
    Value,
    Key,
    Topic,
    Partition,
    Offset,
    Timestamp,
    Headers,
    ValueSize,
    KeySize,
}

/// A parsed `-f` format.
#[derive(Debug, Clone)]
pub(crate) struct Format {
    pieces: Vec<Piece>,
}

impl Format {
    /// Parses a kcat format string; an unknown token or escape is an error naming it
    /// and its position.
    pub(crate) fn parse(fmt: &str) -> CliResult<Format> {
        let bad = |at: usize, what: String| {
            fail!(
                "malformed -f format {fmt:?}: {what} at character {} (tokens: %s %k %t %p %o %T %h %S %K %%; escapes: \\n \\t \\r \\\\)",
                at + 1
            )
        };
        let mut pieces = Vec::new();
        let mut lit = Vec::new();
        let chars: Vec<(usize, char)> = fmt.char_indices().collect();
        let mut i = 0;
        while i < chars.len() {
            let (_, c) = chars[i];
            match c {
                '%' | '\\' => {
                    let Some(&(_, next)) = chars.get(i + 1) else {
                        return Err(bad(i, format!("a lone {c:?} at the end")));
                    };
                    let piece = if c == '%' {
                        match next {
                            's' => Piece::Value,
                            'k' => Piece::Key,
                            't' => Piece::Topic,
                            'p' => Piece::Partition,
                            'o' => Piece::Offset,
                            'T' => Piece::Timestamp,
                            'h' => Piece::Headers,
                            'S' => Piece::ValueSize,
                            'K' => Piece::KeySize,
                            '%' => {
                                lit.push(b'%');
                                i += 2;
                                continue;
                            }
                            other => return Err(bad(i, format!("unknown token %{other}"))),
                        }
                    } else {
                        let byte = match next {
                            'n' => b'\n',
                            't' => b'\t',
                            'r' => b'\r',
                            '\\' => b'\\',
                            '0' => 0,
                            other => return Err(bad(i, format!("unknown escape \\{other}"))),
                        };
                        lit.push(byte);
                        i += 2;
                        continue;
                    };
                    if !lit.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut lit)));
                    }
                    pieces.push(piece);
                    i += 2;
                }
                c => {
                    let mut buf = [0u8; 4];
                    lit.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    i += 1;
                }
            }
        }
        if !lit.is_empty() {
            pieces.push(Piece::Literal(lit));
        }
        Ok(Format { pieces })
    }

    /// The default: the value, or key SEP value with -K, then a newline.
    pub(crate) fn default_for(key_delimiter: Option<&str>) -> Format {
        let mut pieces = Vec::new();
        if let Some(sep) = key_delimiter {
            pieces.push(Piece::Key);
            pieces.push(Piece::Literal(sep.as_bytes().to_vec()));
        }
        pieces.push(Piece::Value);
        pieces.push(Piece::Literal(b"\n".to_vec()));
        Format { pieces }
    }

    /// Appends the rendering of `r` to `out`. Null keys and values render as nothing
    /// (sizes as -1), as kcat does.
    pub(crate) fn render(&self, r: &ConsumerRecord<'_>, out: &mut Vec<u8>) {
        use std::io::Write;
        for p in &self.pieces {
            // Writing into a Vec cannot fail.
            let _ = match p {
                Piece::Literal(b) => out.write_all(b),
                Piece::Value => out.write_all(r.value.unwrap_or_default()),
                Piece::Key => out.write_all(r.key.unwrap_or_default()),
                Piece::Topic => out.write_all(r.topic.as_bytes()),
                Piece::Partition => write!(out, "{}", r.partition),
                Piece::Offset => write!(out, "{}", r.offset),
                Piece::Timestamp => write!(out, "{}", r.timestamp),
                Piece::ValueSize => write!(out, "{}", r.value.map_or(-1, |v| v.len() as i64)),
                Piece::KeySize => write!(out, "{}", r.key.map_or(-1, |v| v.len() as i64)),
                Piece::Headers => {
                    for (i, (k, v)) in r.headers.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(k.as_bytes());
                        out.push(b'=');
                        out.extend_from_slice(v.unwrap_or_default());
                    }
                    Ok(())
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidelog::{Batch, BatchBuilder};

    fn render(fmt: &str) -> String {
        let mut b = BatchBuilder::new();
        b.push(1234, Some(b"k1"), Some(b"v1"), &[("a", b"1"), ("b", b"2")]);
        let bytes = b.finish();
        let batch = Batch::parse(&bytes).unwrap();
        let rec = batch.records().next().unwrap().unwrap();
        let r = ConsumerRecord {
            topic: "t",
            partition: 3,
            offset: 42,
            timestamp: rec.timestamp,
            key: rec.key,
            value: rec.value,
            headers: rec.headers,
        };
        let mut out = Vec::new();
        Format::parse(fmt).unwrap().render(&r, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn tokens_and_escapes() {
        assert_eq!(
            render("%t/%p@%o %T %k=%s [%h] %K %S 100%%\\t\\n"),
            "t/3@42 1234 k1=v1 [a=1,b=2] 2 2 100%\t\n"
        );
        assert_eq!(render("é%s"), "év1");
    }

    #[test]
    fn malformed() {
        for (fmt, what) in [
            ("%x", "unknown token %x at character 1"),
            ("ab%", "a lone '%' at the end at character 3"),
            ("\\q", "unknown escape \\q"),
            ("%s\\", "a lone '\\\\' at the end"),
        ] {
            match Format::parse(fmt) {
                Err(crate::Fail::Msg(m)) => assert!(m.contains(what), "{m}"),
                other => panic!("{fmt}: {other:?}"),
            }
        }
        assert_eq!(
            Format::default_for(Some("\t")).pieces,
            vec![
                Piece::Key,
                Piece::Literal(b"\t".to_vec()),
                Piece::Value,
                Piece::Literal(b"\n".to_vec())
            ]
        );
    }
}
