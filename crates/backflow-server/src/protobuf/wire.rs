//! The protobuf wire format: fields as tag, wire type and payload, nothing about what they mean.

use crate::error::ApiError;

/// A malformed body, as a 400 naming what was wrong.
pub(super) fn bad(what: &str) -> ApiError {
    ApiError::BadRequest(format!("the protobuf request body is malformed: {what}"))
}

/// One field's payload as the wire carries it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field<'a> {
    /// Wire type 0: integers and booleans.
    Varint(u64),
    /// Wire type 1: doubles and fixed 64-bit integers.
    Fixed64(u64),
    /// Wire type 5: floats and fixed 32-bit integers (no built-in type has one; skipped).
    Fixed32,
    /// Wire type 2: strings, bytes, messages, packed lists.
    Bytes(&'a [u8]),
}

/// Reads the fields of one message in order.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over one message's bytes.
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// One varint: also the payload of a packed list.
    pub(super) fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| bad("truncated varint"))?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    /// Whether everything has been read.
    pub(super) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ApiError> {
        if self.buf.len() < n {
            return Err(bad(&format!("truncated {what}")));
        }
        let (data, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(data)
    }

    /// The next field's number and payload, or `None` at the end.
    pub(super) fn next_field(&mut self) -> Result<Option<(u64, Field<'a>)>, ApiError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let (number, wire) = (tag >> 3, tag & 7);
        let field = match wire {
            0 => Field::Varint(self.varint()?),
            1 => {
                let b = self.take(8, "fixed 64-bit field")?;
                Field::Fixed64(u64::from_le_bytes(
                    b.try_into().map_err(|_| bad("fixed64"))?,
                ))
            }
            5 => {
                self.take(4, "fixed 32-bit field")?;
                Field::Fixed32
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| bad("length overflow"))?;
                Field::Bytes(self.take(len, "length-delimited field")?)
            }
            other => return Err(bad(&format!("unsupported wire type {other}"))),
        };
        Ok(Some((number, field)))
    }
}

/// Every field of one message, in order.
pub(super) fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ApiError> {
    let mut r = Reader::new(buf);
    let mut out = Vec::new();
    while let Some(f) = r.next_field()? {
        out.push(f);
    }
    Ok(out)
}

/// A string field's text.
pub(super) fn text(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("a string field is not UTF-8"))
}
