//! Array parameters written straight from the rows they are taken from: a batch's statements
//! take one array per column (`unnest($1::text[], ...)`), and a [`Column`] encodes its array in
//! PostgreSQL's binary format from the rows, into the message being sent: one pass sums the
//! elements' sizes, the next writes them.
//!
//! tokio-postgres's own arrays (`Vec<T>` or `&[T]` of values) need the values collected first,
//! then encode each element through a closure of its own with a bounds check and a length
//! back-patched per element, and a `timestamptz` as a calendar computation per value: about
//! a tenth of the service's instructions per record. A column reserves its whole array once and
//! writes each element's length and bytes.

use std::error::Error;
use std::fmt;

use bytes::{BufMut, BytesMut};
use chrono::{DateTime, Utc};
use tokio_postgres::types::{IsNull, ToSql, Type, WrongType};

type BoxedError = Box<dyn Error + Sync + Send>;

/// Seconds from the Unix epoch to PostgreSQL's (2000-01-01 00:00:00 UTC).
const POSTGRES_EPOCH_SECS: i64 = 946_684_800;

/// A value that is one element of an array parameter, as PostgreSQL's binary format has it.
pub trait Element {
    /// The array type this element makes.
    const ARRAY: Type;
    /// The element type's OID, written in the array's header.
    const OID: u32;
    /// The element's length in bytes, without its length prefix.
    fn encoded_len(&self) -> usize;
    /// Writes the element's bytes (without its length prefix).
    fn write(&self, out: &mut BytesMut) -> Result<(), BoxedError>;
}

impl Element for &str {
    const ARRAY: Type = Type::TEXT_ARRAY;
    const OID: u32 = 25;

    fn encoded_len(&self) -> usize {
        self.len()
    }

    fn write(&self, out: &mut BytesMut) -> Result<(), BoxedError> {
        out.put_slice(self.as_bytes());
        Ok(())
    }
}

/// An integer element: its big-endian bytes.
macro_rules! integer_element {
    ($int:ty, $array:ident, $oid:expr) => {
        impl Element for $int {
            const ARRAY: Type = Type::$array;
            const OID: u32 = $oid;

            fn encoded_len(&self) -> usize {
                std::mem::size_of::<$int>()
            }

            fn write(&self, out: &mut BytesMut) -> Result<(), BoxedError> {
                out.put_slice(&self.to_be_bytes());
                Ok(())
            }
        }
    };
}

integer_element!(i32, INT4_ARRAY, 23);
integer_element!(i64, INT8_ARRAY, 20);

impl Element for DateTime<Utc> {
    const ARRAY: Type = Type::TIMESTAMPTZ_ARRAY;
    const OID: u32 = 1184;

    fn encoded_len(&self) -> usize {
        8
    }

    /// Microseconds since PostgreSQL's epoch, truncated toward it as tokio-postgres does
    /// (chrono's `Duration::num_microseconds`): before 2000, a sub-microsecond remainder moves
    /// the value up, not down.
    fn write(&self, out: &mut BytesMut) -> Result<(), BoxedError> {
        let secs = self.timestamp() - POSTGRES_EPOCH_SECS;
        let nanos = i64::from(self.timestamp_subsec_nanos());
        let (secs, nanos) = if secs < 0 && nanos > 0 {
            (secs + 1, nanos - 1_000_000_000)
        } else {
            (secs, nanos)
        };
        let micros = secs
            .checked_mul(1_000_000)
            .and_then(|m| m.checked_add(nanos / 1000))
            .ok_or("timestamp out of PostgreSQL's range")?;
        out.put_i64(micros);
        Ok(())
    }
}

/// A one-dimensional array parameter without NULLs: `value` of each of `rows`, in order.
pub struct Column<'a, R, F> {
    rows: &'a [R],
    value: F,
    /// Bytes to reserve beyond this array: the rest of its message (see [`Column::reserving`]).
    more: usize,
}

/// What a message adds beyond its parameters' values: a length before each, the Bind
/// message's format codes, Execute and Sync, with room to spare.
const MESSAGE_OVERHEAD: usize = 128;

impl<'a, R, V, F> Column<'a, R, F>
where
    F: Fn(&'a R) -> V,
    V: Element,
{
    pub fn new(rows: &'a [R], value: F) -> Self {
        Column {
            rows,
            value,
            more: 0,
        }
    }

    /// The bytes this array takes in a message: its header, and each element's length and
    /// bytes.
    pub fn encoded_len(&self) -> usize {
        20 + self
            .rows
            .iter()
            .map(|row| 4 + (self.value)(row).encoded_len())
            .sum::<usize>()
    }

    /// Also reserves room for `more` bytes of the parameters after this one in its message
    /// (and for the message's own bytes around them). Given to
    /// a message's first parameter with the size of the rest, the message's buffer grows once
    /// instead of once per parameter, each time copying what was written before (the buffer
    /// starts small: tokio-postgres hands the last message's allocation to the socket).
    pub fn reserving(self, more: usize) -> Self {
        Column {
            more: more + MESSAGE_OVERHEAD,
            ..self
        }
    }

    /// The array's header: one dimension of `rows.len()` elements from 1, no NULLs.
    fn write_header(&self, out: &mut BytesMut) -> Result<(), BoxedError> {
        out.put_i32(1);
        out.put_i32(0);
        out.put_u32(V::OID);
        out.put_i32(i32::try_from(self.rows.len()).map_err(|_| "array too long")?);
        out.put_i32(1);
        Ok(())
    }
}

impl<R, F> fmt::Debug for Column<'_, R, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Column")
            .field("rows", &self.rows.len())
            .finish_non_exhaustive()
    }
}

impl<'a, R, V, F> ToSql for Column<'a, R, F>
where
    F: Fn(&'a R) -> V + Sync,
    R: Sync,
    V: Element,
{
    /// The header, then each element's length and bytes, into the message's buffer grown
    /// once to the array's size.
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, BoxedError> {
        out.reserve(self.encoded_len() + self.more);
        self.write_header(out)?;
        for value in self.rows.iter().map(&self.value) {
            let len = i32::try_from(value.encoded_len()).map_err(|_| "value too long")?;
            out.put_i32(len);
            value.write(out)?;
        }
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == V::ARRAY
    }

    fn to_sql_checked(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxedError> {
        if !Self::accepts(ty) {
            return Err(Box::new(WrongType::new::<Self>(ty.clone())));
        }
        self.to_sql(ty, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// What tokio-postgres writes for the same values as a slice.
    fn theirs<T: ToSql>(ty: &Type, values: &[T]) -> BytesMut {
        let mut out = BytesMut::new();
        values.to_sql_checked(ty, &mut out).expect("encodes");
        out
    }

    fn ours<'a, R: Sync, V: Element>(
        ty: &Type,
        rows: &'a [R],
        value: impl Fn(&'a R) -> V + Sync,
    ) -> BytesMut {
        let mut out = BytesMut::new();
        Column::new(rows, value)
            .to_sql_checked(ty, &mut out)
            .expect("encodes");
        out
    }

    #[test]
    fn text_int_and_bigint_columns_are_byte_for_byte_tokio_postgres_arrays() {
        let rows = [("ev-1", 3, 10_i64), ("", -1, i64::MAX), ("é✓", 0, i64::MIN)];
        let texts: Vec<&str> = rows.iter().map(|r| r.0).collect();
        let ints: Vec<i32> = rows.iter().map(|r| r.1).collect();
        let bigints: Vec<i64> = rows.iter().map(|r| r.2).collect();
        assert_eq!(
            ours(&Type::TEXT_ARRAY, &rows, |r| r.0),
            theirs(&Type::TEXT_ARRAY, &texts)
        );
        assert_eq!(
            ours(&Type::INT4_ARRAY, &rows, |r| r.1),
            theirs(&Type::INT4_ARRAY, &ints)
        );
        assert_eq!(
            ours(&Type::INT8_ARRAY, &rows, |r| r.2),
            theirs(&Type::INT8_ARRAY, &bigints)
        );
    }

    #[test]
    fn a_timestamptz_column_is_byte_for_byte_a_tokio_postgres_array() {
        let times = [
            Utc.with_ymd_and_hms(2024, 2, 29, 23, 59, 59).unwrap()
                + chrono::Duration::nanoseconds(123_456_789),
            Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(1969, 7, 20, 20, 17, 40).unwrap()
                + chrono::Duration::nanoseconds(999),
            Utc.with_ymd_and_hms(1999, 12, 31, 23, 59, 59).unwrap()
                + chrono::Duration::nanoseconds(1_500),
            Utc.with_ymd_and_hms(1999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap()
                + chrono::Duration::nanoseconds(999_999_999),
        ];
        assert_eq!(
            ours(&Type::TIMESTAMPTZ_ARRAY, &times, |t| *t),
            theirs(&Type::TIMESTAMPTZ_ARRAY, &times)
        );
    }

    #[test]
    fn an_empty_column_is_what_tokio_postgres_sends_for_an_empty_slice() {
        let none: [&str; 0] = [];
        assert_eq!(
            ours(&Type::TEXT_ARRAY, &none, |s| *s),
            theirs(&Type::TEXT_ARRAY, &none)
        );
    }

    #[test]
    fn a_columns_encoded_len_is_what_it_writes_and_reserving_leaves_room_without_writing() {
        let rows = [("ev-1", 3_i64), ("", -1), ("é✓", 0)];
        let texts = Column::new(&rows, |r| r.0);
        let mut out = BytesMut::new();
        texts
            .to_sql_checked(&Type::TEXT_ARRAY, &mut out)
            .expect("encodes");
        assert_eq!(out.len(), texts.encoded_len());
        let bigints = Column::new(&rows, |r| r.1);
        assert_eq!(bigints.encoded_len(), 20 + 3 * 12);
        let mut out = BytesMut::new();
        bigints
            .reserving(1000)
            .to_sql_checked(&Type::INT8_ARRAY, &mut out)
            .expect("encodes");
        assert_eq!(out, theirs(&Type::INT8_ARRAY, &[3_i64, -1, 0]));
        assert!(out.capacity() >= out.len() + 1000, "{}", out.capacity());
    }

    #[test]
    fn a_column_refuses_a_parameter_of_another_type() {
        let rows = ["a"];
        let mut out = BytesMut::new();
        let Err(error) = Column::new(&rows, |s| *s).to_sql_checked(&Type::INT4_ARRAY, &mut out)
        else {
            panic!("text[] is not int4[]");
        };
        assert!(error.to_string().contains("_int4"), "{error}");
        assert!(out.is_empty());
    }
}
