//! A Kafka record as the service works with it: copied out of the client library, no I/O.

use bytes::Bytes;
use chrono::{DateTime, Utc};

/// A record of the partition, copied out of librdkafka by the driver thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: i64,
    pub key: Option<RecordKey>,
    /// Shared with the other records the driver copied out in the same round.
    pub payload: Option<Bytes>,
    /// The record's Kafka timestamp.
    pub timestamp: Option<DateTime<Utc>>,
}

/// The longest key held inside [`RecordKey`] itself: a UUID as text (36 bytes) fits.
const INLINE_KEY: usize = 38;

/// A record's key, held inline when it is short (ticket ids, UUIDs as text), else on the heap.
/// A record's bytes are copied out on the driver thread and dropped on the actix thread, and a
/// free of memory another thread allocated is the allocator's costly kind: a short key costs
/// neither the allocation nor that free.
#[derive(Clone)]
pub enum RecordKey {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl RecordKey {
    pub fn new(key: &[u8]) -> RecordKey {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE_KEY => {
                let mut bytes = [0; INLINE_KEY];
                bytes[..key.len()].copy_from_slice(key);
                RecordKey::Inline { len, bytes }
            }
            _ => RecordKey::Heap(key.into()),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        match self {
            RecordKey::Inline { len, bytes } => &bytes[..usize::from(*len)],
            RecordKey::Heap(bytes) => bytes,
        }
    }
}

/// Keys are equal when their bytes are, however they are held.
impl PartialEq for RecordKey {
    fn eq(&self, other: &RecordKey) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for RecordKey {}

impl std::ops::Deref for RecordKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RecordKey({:?})",
            String::from_utf8_lossy(self.as_bytes())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_as_given_inline_up_to_its_bound_and_on_the_heap_beyond() {
        for len in [0, 1, 11, 36, INLINE_KEY, INLINE_KEY + 1, 300] {
            let given: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let key = RecordKey::new(&given);
            assert_eq!(key.as_bytes(), &given[..], "{len}");
            assert_eq!(
                matches!(key, RecordKey::Inline { .. }),
                len <= INLINE_KEY,
                "{len}"
            );
            assert_eq!(key.clone(), key);
        }
        assert_ne!(RecordKey::new(b"a"), RecordKey::new(b"a\0"));
        let padded = RecordKey::Inline {
            len: 1,
            bytes: [b'a'; INLINE_KEY],
        };
        assert_eq!(
            padded,
            RecordKey::Heap(Box::from(&b"a"[..])),
            "bytes, not layout"
        );
    }

    #[test]
    fn the_key_does_not_make_a_record_much_larger_than_its_two_buffers() {
        assert!(std::mem::size_of::<Option<RecordKey>>() <= 40);
    }
}
