//! The shape nearly every producer sends, read without serde: one flat object holding only the
//! five fields, each a string without escapes or `null`, keys in any order, JSON whitespace
//! anywhere between tokens.
//!
//! The scan answers only where serde_json's answer is certain and the same: on anything else
//! (an escape, a field it does not know, a field twice, a number, bad UTF-8, trailing bytes) it
//! gives up and the caller parses the record with serde_json, which then finds the reason.
//! So the scan can make parsing faster but never different; the tests compare the two.

use std::borrow::Cow;

use super::{Field, Span, Wire};

/// What the scan read: where each of the five fields' values lies in the record, if present.
pub(super) struct Scanned<'a> {
    bytes: &'a [u8],
    /// In [`Key`]'s order.
    values: [Option<Value>; 5],
}

/// A value the scan read: `null`, or a string (UTF-8, without escapes) at a span of the bytes.
#[derive(Debug, Clone, Copy)]
enum Value {
    Null,
    Text(Span),
}

/// A string field the scan read: its text, and where it lies in the record.
pub(super) struct Text<'a> {
    pub text: &'a str,
    pub span: Span,
}

impl<'a> Scanned<'a> {
    fn text(&self, span: Span) -> &'a str {
        let bytes = &self.bytes[span.start as usize..(span.start + span.len) as usize];
        // SAFETY: the scan made each span of a string it found to be UTF-8 (see `string`).
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// The five fields in [`Key`]'s order, if every one is a string: the common case.
    pub(super) fn texts(&self) -> Option<[Text<'a>; 5]> {
        let text = |value: Option<Value>| match value? {
            Value::Text(span) => Some(Text {
                text: self.text(span),
                span,
            }),
            Value::Null => None,
        };
        let [a, b, c, d, e] = self.values;
        Some([text(a)?, text(b)?, text(c)?, text(d)?, text(e)?])
    }

    /// The fields as serde would have read them, borrowed from the record.
    pub(super) fn wire(&self) -> Wire<'a> {
        let field = |value: Option<Value>| {
            value.map(|value| match value {
                Value::Null => Field::Null,
                Value::Text(span) => Field::Text(Cow::Borrowed(self.text(span))),
            })
        };
        let [event_id, ticket_id, from_status, to_status, changed_at] = self.values;
        Wire {
            event_id: field(event_id),
            ticket_id: field(ticket_id),
            from_status: field(from_status),
            to_status: field(to_status),
            changed_at: field(changed_at),
        }
    }
}

/// The record's fields, if its bytes have the common shape.
pub(super) fn scan(bytes: &[u8]) -> Option<Scanned<'_>> {
    // Spans are 32-bit; a record that long is serde's.
    u32::try_from(bytes.len()).ok()?;
    let mut values = [None; 5];
    let mut at = expect(bytes, skip_whitespace(bytes, 0), b'{')?;
    at = skip_whitespace(bytes, at);
    if bytes.get(at) == Some(&b'}') {
        return end(bytes, at + 1).then_some(Scanned { bytes, values });
    }
    loop {
        let (key, after_key) = key(bytes, expect(bytes, at, b'"')?)?;
        at = expect(bytes, skip_whitespace(bytes, after_key), b':')?;
        at = skip_whitespace(bytes, at);
        let value = match bytes.get(at)? {
            b'"' => {
                let (span, after) = string(bytes, at + 1)?;
                at = after;
                Value::Text(span)
            }
            b'n' if bytes[at..].starts_with(b"null") => {
                at += 4;
                Value::Null
            }
            _ => return None,
        };
        let slot = &mut values[key as usize];
        if slot.is_some() {
            return None;
        }
        *slot = Some(value);
        at = skip_whitespace(bytes, at);
        match bytes.get(at)? {
            b',' => at = skip_whitespace(bytes, at + 1),
            b'}' => return end(bytes, at + 1).then_some(Scanned { bytes, values }),
            _ => return None,
        }
    }
}

/// One of the five fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    EventId = 0,
    TicketId = 1,
    FromStatus = 2,
    ToStatus = 3,
    ChangedAt = 4,
}

/// The field named by the key whose opening quote is just before `at`, and the position after
/// its closing quote. A key is compared as bytes, with its closing quote: only the five names
/// written as plain ASCII are taken (an escape in a key is serde's business).
fn key(bytes: &[u8], at: usize) -> Option<(Key, usize)> {
    let rest = bytes.get(at..)?;
    let (key, len) = match rest.first()? {
        b'e' if is(rest, b"event_id\"") => (Key::EventId, 9),
        b't' if is(rest, b"ticket_id\"") => (Key::TicketId, 10),
        b't' if is(rest, b"to_status\"") => (Key::ToStatus, 10),
        b'f' if is(rest, b"from_status\"") => (Key::FromStatus, 12),
        b'c' if is(rest, b"changed_at\"") => (Key::ChangedAt, 11),
        _ => return None,
    };
    Some((key, at + len))
}

/// Whether `rest` starts with `name`: an array compare, which the compiler makes a few word
/// compares instead of a call to `memcmp`.
fn is<const N: usize>(rest: &[u8], name: &[u8; N]) -> bool {
    rest.first_chunk::<N>() == Some(name)
}

/// The position after `byte`, if it is the one at `at`.
fn expect(bytes: &[u8], at: usize, byte: u8) -> Option<usize> {
    (bytes.get(at) == Some(&byte)).then_some(at + 1)
}

/// The bytes of a string whose opening quote is just before `start`, whether they are all
/// ASCII, and the position after its closing quote; `None` if it holds an escape or a control
/// character (serde's business).
fn string_bytes(bytes: &[u8], start: usize) -> Option<(&[u8], bool, usize)> {
    let rest = bytes.get(start..)?;
    let mut at = 0;
    let mut ascii = true;
    // Eight bytes at a time while none of them needs a look (no quote, backslash, control
    // character or byte above ASCII), then straight to the first one that does: the closing
    // quote, most of the time.
    while let Some(word) = rest.get(at..at + 8) {
        let word = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        if let Some(first) = first_to_look_at(word) {
            at += first;
            break;
        }
        at += 8;
    }
    for (offset, &byte) in rest[at..].iter().enumerate() {
        match byte {
            b'"' => {
                let end = at + offset;
                return Some((&rest[..end], ascii, start + end + 1));
            }
            b'\\' | 0..0x20 => return None,
            0x80.. => ascii = false,
            _ => {}
        }
    }
    None
}

/// The first byte of `word` (in memory order) that is a quote, a backslash, a control
/// character (below 0x20) or not ASCII; `None` when none is. The classic bit tricks for "has a
/// zero byte" and "has a byte less than n" can mark bytes after a true one (a borrow carries
/// on), never before it, so the lowest mark is exact.
fn first_to_look_at(word: u64) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let quote = has_zero(word ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(word ^ (ONES * u64::from(b'\\')));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    let marks = quote | backslash | control | (word & HIGH);
    (marks != 0).then(|| marks.trailing_zeros() as usize / 8)
}

/// As [`string_bytes`], where the string lies, if it is UTF-8, and the position after its
/// closing quote.
fn string(bytes: &[u8], start: usize) -> Option<(Span, usize)> {
    let (text, ascii, after) = string_bytes(bytes, start)?;
    // ASCII is UTF-8; other bytes are checked.
    if !ascii {
        std::str::from_utf8(text).ok()?;
    }
    // Within `bytes`, whose length fits in 32 bits (checked by `scan`).
    let span = Span {
        start: start as u32,
        len: text.len() as u32,
    };
    Some((span, after))
}

/// The first position from `at` that is not JSON whitespace.
fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// Whether only whitespace follows `at`.
fn end(bytes: &[u8], at: usize) -> bool {
    skip_whitespace(bytes, at) == bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_words_first_byte_to_look_at_is_the_first_that_needs_a_look(
            word in prop::array::uniform8(prop_oneof![
                1 => Just(b'"'),
                1 => Just(b'\\'),
                1 => 0u8..0x20,
                12 => 0x20u8..0x80,
                1 => 0x80u8..=0xff,
            ]),
        ) {
            let byte_needs = |b: u8| b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b);
            prop_assert_eq!(
                first_to_look_at(u64::from_le_bytes(word)),
                word.iter().position(|&b| byte_needs(b))
            );
        }

        #[test]
        fn a_key_is_taken_only_as_one_of_the_five_names_and_its_quote(
            key_text in "(event_id|ticket_id|from_status|to_status|changed_at|[a-z_]{0,12})",
            after in "[\"a-z\\\\]{0,2}",
        ) {
            let text = format!("{key_text}{after}");
            let expected = match (key_text.as_str(), after.starts_with('"')) {
                ("event_id", true) => Some(Key::EventId),
                ("ticket_id", true) => Some(Key::TicketId),
                ("from_status", true) => Some(Key::FromStatus),
                ("to_status", true) => Some(Key::ToStatus),
                ("changed_at", true) => Some(Key::ChangedAt),
                _ => None,
            };
            prop_assert_eq!(
                key(text.as_bytes(), 0),
                expected.map(|k| (k, key_text.len() + 1))
            );
        }

        #[test]
        fn a_string_ends_where_its_first_quote_is(
            text in "[ -~]{0,40}",
            tail in "[ -~]{0,12}",
        ) {
            let text = text.replace('"', "");
            let bytes = format!("{text}\"{tail}");
            let found = string_bytes(bytes.as_bytes(), 0);
            if text.contains('\\') {
                prop_assert_eq!(found, None);
            } else {
                prop_assert_eq!(found, Some((text.as_bytes(), true, text.len() + 1)));
            }
        }
    }
}
