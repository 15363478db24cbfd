//! `text` values for the batch's statements, without the per-value type-name lookups of
//! tokio-postgres's `&str` (its `to_sql` and `from_sql` compare each value's type name with
//! `ltree`, `lquery` and `ltxtquery`, and `from_sql` checks the bytes as UTF-8 again). A batch
//! sends five text arrays of a few hundred values each and reads an id back per new event.

use std::error::Error;

use bytes::BytesMut;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

type BoxedError = Box<dyn Error + Sync + Send>;

/// A `text` value to send: its UTF-8 bytes as they are (the binary format of `text`).
#[derive(Debug, Clone, Copy)]
pub struct Text<'a>(pub &'a str);

impl ToSql for Text<'_> {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxedError> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TEXT
    }

    to_sql_checked!();
}

/// A `text` column's bytes as they came, for comparing with text this process sent (in UTF-8:
/// tokio-postgres sets `client_encoding` to UTF8 on every connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextBytes<'a>(pub &'a [u8]);

impl<'a> FromSql<'a> for TextBytes<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<TextBytes<'a>, BoxedError> {
        Ok(TextBytes(raw))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TEXT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_sent_as_the_bytes_str_would_send() {
        for text in ["", "event-1", "é ✓ \u{0}"] {
            let (mut ours, mut theirs) = (BytesMut::new(), BytesMut::new());
            Text(text).to_sql(&Type::TEXT, &mut ours).unwrap();
            text.to_sql(&Type::TEXT, &mut theirs).unwrap();
            assert_eq!(ours, theirs);
        }
        assert!(<Text as ToSql>::accepts(&Type::TEXT));
        assert!(<&[Text] as ToSql>::accepts(&Type::TEXT_ARRAY));
        assert!(!<Text as ToSql>::accepts(&Type::BYTEA));
    }

    #[test]
    fn a_text_column_is_read_as_its_bytes() {
        let raw = "evt-1".as_bytes();
        assert_eq!(
            TextBytes::from_sql(&Type::TEXT, raw).unwrap(),
            TextBytes(raw)
        );
        assert!(<TextBytes as FromSql>::accepts(&Type::TEXT));
        assert!(!<TextBytes as FromSql>::accepts(&Type::INT4));
    }
}
