//! The ids the marker insert returns, read in place: without the per-value type-name lookups
//! of tokio-postgres's `&str` (its `from_sql` compares each value's type name with `ltree`,
//! `lquery` and `ltxtquery`, and checks the bytes as UTF-8 again) and without an allocation
//! per id. (What a batch sends is written by [`super::columns`].)

use std::error::Error;

use tokio_postgres::types::{FromSql, Type};

type BoxedError = Box<dyn Error + Sync + Send>;

/// A one-dimensional `text[]` without NULLs as it came, its elements' bytes read in place: the
/// marker insert returns the ids it inserted as one such array (one row to read, not a row per
/// id with its own allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextArrayBytes<'a> {
    /// The elements, each a big-endian `i32` length and its bytes.
    elements: &'a [u8],
    len: usize,
}

impl<'a> TextArrayBytes<'a> {
    /// The elements' bytes, in order.
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        let mut rest = self.elements;
        (0..self.len).map(move |_| {
            // Checked in `from_sql`: every element is whole.
            let (len, tail) = rest.split_at(4);
            let len = i32::from_be_bytes(len.try_into().expect("four bytes")) as usize;
            let (element, tail) = tail.split_at(len);
            rest = tail;
            element
        })
    }
}

impl<'a> FromSql<'a> for TextArrayBytes<'a> {
    /// PostgreSQL's binary array format: dimensions, a NULL flag, the element type, a size and
    /// lower bound per dimension, then each element as a length and its bytes.
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<TextArrayBytes<'a>, BoxedError> {
        let mut rest = raw;
        let dimensions = word(&mut rest)?;
        let has_nulls = word(&mut rest)?;
        let _element_type = word(&mut rest)?;
        let len = match dimensions {
            0 => 0,
            1 => {
                let len = word(&mut rest)?;
                let _lower_bound = word(&mut rest)?;
                usize::try_from(len).map_err(|_| "a negative text[] size")?
            }
            _ => return Err(format!("a text[] of {dimensions} dimensions, not one").into()),
        };
        if has_nulls != 0 {
            return Err("a text[] with NULLs".into());
        }
        let elements = rest;
        for _ in 0..len {
            let element = word(&mut rest)?;
            let element = usize::try_from(element).map_err(|_| "a NULL in a text[]")?;
            rest = rest.get(element..).ok_or("a text[] element ends early")?;
        }
        if !rest.is_empty() {
            return Err("bytes after a text[]'s last element".into());
        }
        Ok(TextArrayBytes { elements, len })
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TEXT_ARRAY
    }
}

/// The big-endian `i32` at the start of `rest`, which moves past it.
fn word(rest: &mut &[u8]) -> Result<i32, BoxedError> {
    let (head, tail) = rest
        .split_first_chunk::<4>()
        .ok_or("a text[] value ends early")?;
    *rest = tail;
    Ok(i32::from_be_bytes(*head))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use tokio_postgres::types::ToSql;

    #[test]
    fn a_text_array_is_read_as_its_elements_bytes() {
        for texts in [vec![], vec![""], vec!["evt-1", "é ✓", "evt-3"]] {
            let mut raw = BytesMut::new();
            texts
                .as_slice()
                .to_sql(&Type::TEXT_ARRAY, &mut raw)
                .unwrap();
            let array = TextArrayBytes::from_sql(&Type::TEXT_ARRAY, &raw).unwrap();
            let read: Vec<&[u8]> = array.iter().collect();
            let expected: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
            assert_eq!(read, expected);
        }
        assert!(<TextArrayBytes as FromSql>::accepts(&Type::TEXT_ARRAY));
        assert!(!<TextArrayBytes as FromSql>::accepts(&Type::TEXT));
    }

    #[test]
    fn a_text_array_that_is_not_whole_or_not_flat_or_has_nulls_is_an_error() {
        let mut raw = BytesMut::new();
        ["evt-1", "evt-2"]
            .as_slice()
            .to_sql(&Type::TEXT_ARRAY, &mut raw)
            .unwrap();
        for cut in 0..raw.len() {
            assert!(
                TextArrayBytes::from_sql(&Type::TEXT_ARRAY, &raw[..cut]).is_err(),
                "{cut}"
            );
        }
        let mut longer = raw.to_vec();
        longer.push(0);
        assert!(TextArrayBytes::from_sql(&Type::TEXT_ARRAY, &longer).is_err());
        let mut nulls = BytesMut::new();
        [Some("evt-1"), None]
            .as_slice()
            .to_sql(&Type::TEXT_ARRAY, &mut nulls)
            .unwrap();
        assert!(TextArrayBytes::from_sql(&Type::TEXT_ARRAY, &nulls).is_err());
        let mut flat_header = raw.to_vec();
        flat_header[..4].copy_from_slice(&2i32.to_be_bytes());
        assert!(TextArrayBytes::from_sql(&Type::TEXT_ARRAY, &flat_header).is_err());
    }
}
