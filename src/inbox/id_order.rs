//! The order a batch inserts its event ids in: by their bytes (one lock order for every batch,
//! see `inbox::batch`), each id's occurrences in input order.
//!
//! Sorting the events by comparing their ids costs a slice lookup and a `memcmp` per comparison,
//! on ids that mostly share a long prefix (an outbox's `order-000123…`). Here each id gets a
//! key first: the eight bytes after the prefix all the batch's ids share, big-endian and padded
//! with zeros. Keys compare as integers, and only ids of equal keys are compared as bytes. The
//! order is the same: a zero pads below every byte, so a key smaller than another's belongs to
//! the smaller id.

/// An id's place in the sorted order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sorted {
    /// Its index in the ids given.
    pub index: u32,
    /// Whether it repeats the id before it in this order (a later occurrence of that id).
    pub repeat: bool,
}

/// `ids` sorted by their bytes, occurrences of one id in input order (as a stable sort), each
/// marked whether it repeats the one before.
pub fn sort_ids(ids: &[&[u8]]) -> Vec<Sorted> {
    let shared = shared_prefix(ids);
    let mut keyed: Vec<(u64, u32)> = ids
        .iter()
        .zip(0u32..)
        .map(|(id, index)| (key(&id[shared..]), index))
        .collect();
    let bytes = |index: u32| ids[index as usize];
    // Stable, so that an outbox's ordered runs are taken whole; equal ids keep input order.
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| bytes(a.1).cmp(bytes(b.1))));
    let mut previous: Option<(u64, u32)> = None;
    keyed
        .into_iter()
        .map(|(key, index)| {
            let repeat = previous.is_some_and(|(k, i)| k == key && bytes(i) == bytes(index));
            previous = Some((key, index));
            Sorted { index, repeat }
        })
        .collect()
}

/// How many leading bytes all `ids` share.
fn shared_prefix(ids: &[&[u8]]) -> usize {
    let Some((first, rest)) = ids.split_first() else {
        return 0;
    };
    let mut shared = first.len();
    for id in rest {
        if id.len() >= shared && id[..shared] == first[..shared] {
            continue;
        }
        shared = first[..shared.min(id.len())]
            .iter()
            .zip(id.iter())
            .take_while(|(a, b)| a == b)
            .count();
    }
    shared
}

/// The first eight bytes of `rest`, big-endian, padded with zeros.
fn key(rest: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = rest.len().min(8);
    word[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the order must be: a stable sort of the indices by the ids' bytes.
    fn expected(ids: &[&[u8]]) -> Vec<Sorted> {
        let mut order: Vec<u32> = (0..ids.len() as u32).collect();
        order.sort_by(|a, b| ids[*a as usize].cmp(ids[*b as usize]));
        order
            .iter()
            .enumerate()
            .map(|(place, &index)| Sorted {
                index,
                repeat: place > 0 && ids[order[place - 1] as usize] == ids[index as usize],
            })
            .collect()
    }

    fn check(ids: &[&str]) {
        let ids: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
        assert_eq!(sort_ids(&ids), expected(&ids), "{ids:?}");
    }

    #[test]
    fn ids_sort_by_their_bytes_with_repeats_marked() {
        check(&[]);
        check(&["a"]);
        check(&[
            "order-000003",
            "order-000001",
            "order-000002",
            "order-000001",
        ]);
        check(&["", "a", "", "b"]);
        // One id a prefix of another, and a zero byte where the key pads.
        check(&["evt-1", "evt-1\0", "evt-1\0\0", "evt-1", "evt-"]);
        // Equal in the key's eight bytes, different after them.
        check(&["p-12345678b", "p-12345678a", "p-12345678", "p-12345678a"]);
    }

    /// Ids from a small alphabet (zero bytes and multi-byte UTF-8 included) behind a shared
    /// prefix of any length, so that keys often tie and ids are often prefixes of each other.
    fn batch() -> impl Strategy<Value = Vec<String>> {
        (
            "[ab]{0,12}",
            prop::collection::vec("[\0ab\u{e9}]{0,12}", 0..40),
        )
            .prop_map(|(prefix, tails)| {
                tails
                    .into_iter()
                    .map(|tail| format!("{prefix}{tail}"))
                    .collect()
            })
    }

    proptest! {
        #[test]
        fn the_order_is_a_stable_sort_by_bytes(ids in batch()) {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            check(&ids);
        }

        #[test]
        fn the_shared_prefix_is_the_longest_all_ids_share(ids in batch()) {
            let ids: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
            let shared = shared_prefix(&ids);
            prop_assert!(ids.iter().all(|id| id.len() >= shared && id[..shared] == ids[0][..shared]));
            if let Some(first) = ids.first() {
                prop_assert!(
                    shared == first.len()
                        || ids.iter().any(|id| id.len() <= shared || id[shared] != first[shared])
                );
            }
        }
    }
}
