//! The ticket status event (SPEC §1): parsing a Kafka record's bytes and validating them.
//!
//! Parsing never panics, whatever the bytes: a record that cannot become a [`TicketEvent`] gets a
//! [`Rejection`] with a machine-readable [`RejectReason`] (a metrics label) and a human message.

use std::borrow::Cow;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

mod scan;
mod timestamp;

/// The longest accepted `event_id`, in characters (at most 800 bytes in UTF-8: the primary keys
/// of `inbox` and `history_events` hold it with room to spare).
pub const MAX_EVENT_ID_CHARS: usize = 200;

/// The longest accepted `ticket_id`, in characters. At most 800 bytes in UTF-8, so an entry of
/// `history_events_ticket_idx` (`ticket_id`, `changed_at`) stays far below PostgreSQL's btree
/// limit of 2704 bytes whatever the characters (random text does not compress).
pub const MAX_TICKET_ID_CHARS: usize = 200;

/// The longest accepted `from_status` and `to_status`, in characters: no index holds them, the
/// bound keeps a status a status (a workflow state's name, not a document).
pub const MAX_STATUS_CHARS: usize = 64;

/// One logical ticket status transition. Only `event_id` identifies it.
///
/// Its four text fields are spans of one buffer: parsed from a record
/// ([`TicketEvent::parse_payload`]) whose fields are written without escapes (nearly all of
/// them), the record's payload itself, taken instead of copied; otherwise a buffer of the four
/// fields made once. So an event costs no allocation of its own and 80 bytes (a partition's
/// backlog holds one per record it cannot resolve).
#[derive(Clone)]
pub struct TicketEvent {
    /// Where the text fields are (see [`Spans`]).
    text: Bytes,
    spans: Spans,
    pub changed_at: DateTime<Utc>,
    /// [`id_hash`] of `event_id`, taken while the text is at hand (see there).
    id_hash: u32,
}

/// A hash of an event id. Taken once, when the event is made, while its text is in the CPU's
/// caches; a partition's batches sort and search these instead of the ids (ids held by its
/// other open batches, the events it applied lately), which would read each record's payload
/// again long after. Two ids may share a hash: every use compares the ids themselves on a
/// match, or loses nothing but an order. Eight bytes at a time (FxHash's step) and folded to 32
/// bits, so that it fits the event's padding.
pub fn id_hash(event_id: &str) -> u32 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(K);
    let bytes = event_id.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    let mut hash = (&mut chunks).fold(bytes.len() as u64, |hash, chunk| {
        step(
            hash,
            u64::from_le_bytes(chunk.try_into().expect("eight bytes")),
        )
    });
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        hash = step(hash, u64::from_le_bytes(last));
    }
    ((hash >> 32) ^ hash) as u32
}

/// The text fields' names, in the order [`Spans`] keeps them.
const FIELD_NAMES: [&str; 4] = ["event_id", "ticket_id", "from_status", "to_status"];

/// Where each text field lies in [`TicketEvent::text`], in [`FIELD_NAMES`]' order. Invariant: every span lies within the text and on UTF-8
/// character boundaries of it (each is made from a `&str` inside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Spans([Span; 4]);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

impl TicketEvent {
    /// An event of these fields, its text in a buffer of its own.
    pub fn new(
        event_id: &str,
        ticket_id: &str,
        from_status: &str,
        to_status: &str,
        changed_at: DateTime<Utc>,
    ) -> TicketEvent {
        TicketEvent::of_fields([event_id, ticket_id, from_status, to_status], changed_at)
    }

    /// An event of `fields` (in [`FIELD_NAMES`]' order), its text in a buffer of its own.
    fn of_fields(fields: [&str; 4], changed_at: DateTime<Utc>) -> TicketEvent {
        let mut text = Vec::with_capacity(fields.iter().map(|f| f.len()).sum());
        let mut spans = [Span { start: 0, len: 0 }; 4];
        for (span, field) in spans.iter_mut().zip(fields) {
            *span = Span {
                start: to_u32(text.len()),
                len: to_u32(field.len()),
            };
            text.extend_from_slice(field.as_bytes());
        }
        TicketEvent {
            id_hash: id_hash(fields[0]),
            text: Bytes::from(text),
            spans: Spans(spans),
            changed_at,
        }
    }

    /// The event whose fields are these strs, all of them within `payload`: sharing it.
    /// `None` when a field lies outside it, or the payload is too long for a span.
    fn within(
        payload: &Bytes,
        fields: [&str; 4],
        changed_at: DateTime<Utc>,
    ) -> Option<TicketEvent> {
        let range = payload.as_ptr_range();
        if u32::try_from(payload.len()).is_err() {
            return None;
        }
        let mut spans = [Span { start: 0, len: 0 }; 4];
        for (span, field) in spans.iter_mut().zip(fields) {
            let bytes = field.as_bytes().as_ptr_range();
            if bytes.start < range.start || bytes.end > range.end {
                return None;
            }
            *span = Span {
                start: to_u32(bytes.start as usize - range.start as usize),
                len: to_u32(field.len()),
            };
        }
        Some(TicketEvent {
            id_hash: id_hash(fields[0]),
            text: payload.clone(),
            spans: Spans(spans),
            changed_at,
        })
    }

    fn field(&self, i: usize) -> &str {
        let Span { start, len } = self.spans.0[i];
        let bytes = &self.text[start as usize..(start + len) as usize];
        // SAFETY: the spans' invariant: each is a whole `str` of the text.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// The identity the inbox deduplicates on.
    pub fn event_id(&self) -> &str {
        self.field(0)
    }

    /// [`id_hash`] of the event id.
    pub fn id_hash(&self) -> u32 {
        self.id_hash
    }

    pub fn ticket_id(&self) -> &str {
        self.field(1)
    }

    pub fn from_status(&self) -> &str {
        self.field(2)
    }

    pub fn to_status(&self) -> &str {
        self.field(3)
    }

    /// The four text fields, in [`FIELD_NAMES`]' order.
    fn fields(&self) -> [&str; 4] {
        [0, 1, 2, 3].map(|i| self.field(i))
    }

    /// The same event with field `i` (of [`FIELD_NAMES`]) replaced by `text`.
    fn with_field(&self, i: usize, text: &str) -> TicketEvent {
        let mut fields = self.fields();
        fields[i] = text;
        TicketEvent::of_fields(fields, self.changed_at)
    }

    /// The same event under another id (a benchmark's or a test's copy).
    pub fn with_event_id(&self, event_id: &str) -> TicketEvent {
        self.with_field(0, event_id)
    }

    /// The same event for another ticket (a test's conflicting copy).
    pub fn with_ticket_id(&self, ticket_id: &str) -> TicketEvent {
        self.with_field(1, ticket_id)
    }

    /// The same event with another `from_status` (a test's conflicting copy).
    pub fn with_from_status(&self, from_status: &str) -> TicketEvent {
        self.with_field(2, from_status)
    }

    /// The same event with another `to_status` (a test's conflicting copy).
    pub fn with_to_status(&self, to_status: &str) -> TicketEvent {
        self.with_field(3, to_status)
    }

    /// Whether the text fields share `payload`'s bytes.
    #[cfg(test)]
    fn shares(&self, payload: &Bytes) -> bool {
        self.text.as_ptr() == payload.as_ptr() && self.text.len() == payload.len()
    }
}

/// A length or an offset that fits a span: events are bounded far below 4 GiB.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).expect("an event's text is far shorter than 4 GiB")
}

impl PartialEq for TicketEvent {
    fn eq(&self, other: &TicketEvent) -> bool {
        self.fields() == other.fields() && self.changed_at == other.changed_at
    }
}

impl Eq for TicketEvent {}

impl std::fmt::Debug for TicketEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut event = f.debug_struct("TicketEvent");
        for (name, text) in FIELD_NAMES.into_iter().zip(self.fields()) {
            event.field(name, &text);
        }
        event.field("changed_at", &self.changed_at).finish()
    }
}

impl Serialize for TicketEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut event = serializer.serialize_struct("TicketEvent", 5)?;
        for (name, text) in FIELD_NAMES.into_iter().zip(self.fields()) {
            event.serialize_field(name, text)?;
        }
        event.serialize_field("changed_at", &self.changed_at)?;
        event.end()
    }
}

/// Why a record is a dead letter: its bytes are not a valid event, the database refused to
/// store it, or an operator set it aside. Each is permanent: retrying as is cannot help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum RejectReason {
    /// Larger than the configured payload limit.
    PayloadTooLarge,
    /// Not UTF-8 JSON at all, or truncated.
    NotJson,
    /// Valid JSON, but not an object.
    NotObject,
    /// The same field appears twice in the object.
    DuplicateField,
    /// A required field is absent or `null`.
    MissingField,
    /// A required field is not a string.
    WrongType,
    /// A required field is empty or only whitespace.
    EmptyField,
    /// A field holds a NUL character, which PostgreSQL `text` cannot store.
    InvalidText,
    /// `event_id` is longer than [`MAX_EVENT_ID_CHARS`].
    OversizedId,
    /// `ticket_id` is longer than [`MAX_TICKET_ID_CHARS`], or a status longer than
    /// [`MAX_STATUS_CHARS`]: more than the schema and its indexes are meant to hold.
    OversizedField,
    /// `changed_at` is not an RFC 3339 timestamp.
    BadTimestamp,
    /// A valid event that the database refused for good (a constraint, a trigger, a limit:
    /// see `inbox::sqlstate`), on its own, after the batch it came in was isolated.
    RejectedByDatabase,
    /// An operator dead-lettered the record from its partition's Unknown backlog.
    SkippedByOperator,
}

impl RejectReason {
    /// Every reason, in a stable order (for metrics and filters).
    pub const ALL: &'static [RejectReason] = <Self as strum::VariantArray>::VARIANTS;

    /// A stable snake_case name, used as a metrics label and stored in `dead_letters.reason`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The reason named by [`RejectReason::as_str`], if any.
    pub fn from_name(name: &str) -> Option<Self> {
        name.parse().ok()
    }
}

/// A record that can never become an event: the reason (bounded set) and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Rejection {
    pub reason: RejectReason,
    pub message: String,
}

impl Rejection {
    pub fn new(reason: RejectReason, message: impl Into<String>) -> Self {
        Rejection {
            reason,
            message: message.into(),
        }
    }
}

/// The wire shape, loose on purpose so that each problem gets its own reason.
/// Unknown fields are ignored (forward compatibility with newer producers). Text is borrowed
/// from the payload unless it holds escapes: a valid event costs one allocation per field it
/// keeps, none for `changed_at`. The common shape is read by [`scan`] without serde.
#[derive(Default, Deserialize)]
struct Wire<'a> {
    #[serde(borrow)]
    event_id: Option<Field<'a>>,
    #[serde(borrow)]
    ticket_id: Option<Field<'a>>,
    #[serde(borrow)]
    from_status: Option<Field<'a>>,
    #[serde(borrow)]
    to_status: Option<Field<'a>>,
    #[serde(borrow)]
    changed_at: Option<Field<'a>>,
}

/// One field's value, as much of it as parsing needs: its text, or what kind of JSON it is.
enum Field<'a> {
    Null,
    Text(Cow<'a, str>),
    /// Not a string: "a boolean", "a number", "an array" or "an object".
    Other(&'static str),
}

impl<'de: 'a, 'a> Deserialize<'de> for Field<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FieldVisitor(std::marker::PhantomData))
    }
}

struct FieldVisitor<'a>(std::marker::PhantomData<Field<'a>>);

impl<'de: 'a, 'a> Visitor<'de> for FieldVisitor<'a> {
    type Value = Field<'a>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Field<'a>, E> {
        Ok(Field::Null)
    }

    fn visit_none<E>(self) -> Result<Field<'a>, E> {
        Ok(Field::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Field<'a>, D::Error> {
        Field::deserialize(d)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Field<'a>, E> {
        Ok(Field::Other("a boolean"))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Field<'a>, E> {
        Ok(Field::Other("a number"))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Field<'a>, E> {
        Ok(Field::Other("a number"))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Field<'a>, E> {
        Ok(Field::Other("a number"))
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Field<'a>, E> {
        Ok(Field::Text(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Field<'a>, E> {
        Ok(Field::Text(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E>(self, text: String) -> Result<Field<'a>, E> {
        Ok(Field::Text(Cow::Owned(text)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Field<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Field::Other("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Field<'a>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Field::Other("an object"))
    }
}

impl TicketEvent {
    /// Parses and validates a record's value bytes, accepting at most `max_bytes` of them.
    /// The event's text is copied out of `bytes` (see [`TicketEvent::parse_payload`]).
    pub fn parse(bytes: &[u8], max_bytes: usize) -> Result<TicketEvent, Rejection> {
        if bytes.len() > max_bytes {
            return Err(too_large(bytes, max_bytes));
        }
        match TicketEvent::parse_payload(Bytes::copy_from_slice(bytes), max_bytes) {
            Parsed::InPlace(event) | Parsed::Apart(event, _) => Ok(event),
            Parsed::Rejected(rejection, _) => Err(rejection),
        }
    }

    /// Parses a record's payload, taking it. Nearly every payload becomes the event's text as
    /// it is ([`Parsed::InPlace`]): no copy, and no second owner of the bytes, whose shared
    /// count would cost an allocation and two atomic operations per record on the busiest
    /// thread.
    pub fn parse_payload(payload: Bytes, max_bytes: usize) -> Parsed {
        if payload.len() > max_bytes {
            return Parsed::Rejected(too_large(&payload, max_bytes), payload);
        }
        let wire = match scan::scan(&payload) {
            Some(scanned) => {
                if let Some(plain) = scanned.texts().and_then(Plain::of) {
                    return Parsed::InPlace(plain.event(payload));
                }
                scanned.wire()
            }
            None => match serde_json::from_slice(&payload) {
                Ok(wire) => wire,
                Err(error) => {
                    let rejection = classify_json_error(&payload, &error);
                    return Parsed::Rejected(rejection, payload);
                }
            },
        };
        match wire.event(&payload) {
            Ok(event) => Parsed::Apart(event, payload),
            Err(rejection) => Parsed::Rejected(rejection, payload),
        }
    }

    /// The buffer the text fields lie in: for an event [`Parsed::InPlace`], the record's
    /// payload as delivered.
    pub(crate) fn text_buffer(&self) -> &Bytes {
        &self.text
    }

    /// The canonical JSON encoding of this event (what a well-behaved producer sends).
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "event_id": self.event_id(),
            "ticket_id": self.ticket_id(),
            "from_status": self.from_status(),
            "to_status": self.to_status(),
            "changed_at": self.changed_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        })
        .to_string()
    }
}

/// What a payload of five plain strings (as the scan found them) makes of an event, found
/// without a look at their characters: each text field starts with a printable ASCII character
/// (so it is not blank) and has no more bytes than its bound has characters, and `changed_at`
/// has the common shape. Nearly every record is such; any other is left to [`Wire::event`],
/// which gives the same event or says why there is none.
struct Plain {
    spans: Spans,
    id_hash: u32,
    changed_at: DateTime<Utc>,
}

impl Plain {
    fn of(texts: [scan::Text<'_>; 5]) -> Option<Plain> {
        let [event_id, ticket_id, from_status, to_status, changed_at] = texts;
        let plain = |field: &scan::Text<'_>, max_chars: usize| {
            field.text.len() <= max_chars
                && matches!(field.text.as_bytes().first(), Some(0x21..=0x7e))
        };
        let checked = plain(&event_id, MAX_EVENT_ID_CHARS)
            && plain(&ticket_id, MAX_TICKET_ID_CHARS)
            && plain(&from_status, MAX_STATUS_CHARS)
            && plain(&to_status, MAX_STATUS_CHARS);
        if !checked {
            return None;
        }
        Some(Plain {
            spans: Spans([
                event_id.span,
                ticket_id.span,
                from_status.span,
                to_status.span,
            ]),
            id_hash: id_hash(event_id.text),
            changed_at: timestamp::utc(changed_at.text)?,
        })
    }

    /// The event, its text `payload`: the bytes the spans were found in.
    fn event(self, payload: Bytes) -> TicketEvent {
        TicketEvent {
            text: payload,
            spans: self.spans,
            changed_at: self.changed_at,
            id_hash: self.id_hash,
        }
    }
}

/// A record's payload, parsed by [`TicketEvent::parse_payload`].
#[derive(Debug)]
pub enum Parsed {
    /// The event, whose text is the payload itself.
    InPlace(TicketEvent),
    /// The event, its text a buffer of its own or a share of the payload (a field was
    /// escaped, or unusual), and the payload.
    Apart(TicketEvent, Bytes),
    /// Why the payload makes no event, and the payload.
    Rejected(Rejection, Bytes),
}

/// Why a payload is refused before it is read.
fn too_large(bytes: &[u8], max_bytes: usize) -> Rejection {
    Rejection::new(
        RejectReason::PayloadTooLarge,
        format!("payload is {} bytes, the limit is {max_bytes}", bytes.len()),
    )
}

impl Wire<'_> {
    /// The event these fields (read from `payload`) make, or why they make none.
    fn event(self, payload: &Bytes) -> Result<TicketEvent, Rejection> {
        let event_id = bounded_text(
            "event_id",
            self.event_id,
            MAX_EVENT_ID_CHARS,
            RejectReason::OversizedId,
        )?;
        let oversized = RejectReason::OversizedField;
        let ticket_id = bounded_text("ticket_id", self.ticket_id, MAX_TICKET_ID_CHARS, oversized)?;
        let from_status =
            bounded_text("from_status", self.from_status, MAX_STATUS_CHARS, oversized)?;
        let to_status = bounded_text("to_status", self.to_status, MAX_STATUS_CHARS, oversized)?;
        let changed_at_text = required_text("changed_at", self.changed_at)?;
        let changed_at = match timestamp::utc(&changed_at_text) {
            Some(at) => at,
            None => DateTime::parse_from_rfc3339(&changed_at_text)
                .map_err(|e| {
                    Rejection::new(
                        RejectReason::BadTimestamp,
                        format!(
                            "changed_at {:?} is not an RFC 3339 timestamp: {e}",
                            truncate(&changed_at_text, 64)
                        ),
                    )
                })?
                .with_timezone(&Utc),
        };

        let fields = [&*event_id, &*ticket_id, &*from_status, &*to_status];
        // Text borrowed from the record (written there without escapes) shares its bytes;
        // should any field be unescaped text of its own, the event gets a buffer of its own.
        let borrowed = [&event_id, &ticket_id, &from_status, &to_status]
            .iter()
            .all(|field| matches!(field, Cow::Borrowed(_)));
        Ok(borrowed
            .then(|| TicketEvent::within(payload, fields, changed_at))
            .flatten()
            .unwrap_or_else(|| TicketEvent::of_fields(fields, changed_at)))
    }
}

fn classify_json_error(bytes: &[u8], error: &serde_json::Error) -> Rejection {
    use serde_json::error::Category;
    match error.classify() {
        Category::Data => {
            let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
            if first != Some(&b'{') {
                Rejection::new(RejectReason::NotObject, "payload is JSON but not an object")
            } else if error.to_string().starts_with("duplicate field") {
                Rejection::new(RejectReason::DuplicateField, error.to_string())
            } else {
                Rejection::new(RejectReason::WrongType, error.to_string())
            }
        }
        Category::Syntax | Category::Eof | Category::Io => Rejection::new(
            RejectReason::NotJson,
            format!("payload is not JSON: {error}"),
        ),
    }
}

fn required_text<'a>(
    field: &'static str,
    value: Option<Field<'a>>,
) -> Result<Cow<'a, str>, Rejection> {
    match value {
        None | Some(Field::Null) => Err(Rejection::new(
            RejectReason::MissingField,
            format!("{field} is missing"),
        )),
        // `trim().is_empty()`, stopping at the first character that is not whitespace.
        Some(Field::Text(text)) if text.chars().all(char::is_whitespace) => Err(Rejection::new(
            RejectReason::EmptyField,
            format!("{field} is empty"),
        )),
        // Only an unescaped string can hold a NUL: JSON forbids control characters in a
        // string's own bytes (the scan and serde_json both refuse them), so text borrowed from
        // the record is free of them without a look.
        Some(Field::Text(Cow::Owned(text))) if text.as_bytes().contains(&0) => Err(Rejection::new(
            RejectReason::InvalidText,
            format!("{field} contains a NUL character"),
        )),
        Some(Field::Text(text)) => Ok(text),
        Some(Field::Other(kind)) => Err(Rejection::new(
            RejectReason::WrongType,
            format!("{field} must be a string, found {kind}"),
        )),
    }
}

/// A required text field the event keeps, refused with `reason` past `max_chars` characters.
fn bounded_text<'a>(
    field: &'static str,
    value: Option<Field<'a>>,
    max_chars: usize,
    reason: RejectReason,
) -> Result<Cow<'a, str>, Rejection> {
    let text = required_text(field, value)?;
    bounded(field, &text, max_chars, reason)?;
    Ok(text)
}

/// Refuses `text` when it has more than `max_chars` characters.
fn bounded(
    field: &'static str,
    text: &str,
    max_chars: usize,
    reason: RejectReason,
) -> Result<(), Rejection> {
    // A character is at least a byte: short text needs no counting.
    if text.len() <= max_chars {
        return Ok(());
    }
    // Counting stops one past the bound: a megabyte of text costs no more than the bound.
    let chars = text.chars().take(max_chars + 1).count();
    if chars > max_chars {
        return Err(Rejection::new(
            reason,
            format!(
                "{field} has {} characters, the limit is {max_chars}",
                text.chars().count()
            ),
        ));
    }
    Ok(())
}

fn truncate(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// The parser as it was before it borrowed: every field a `serde_json::Value`, made into the
    /// same fields. The borrowing one (and its scan) must give the same event or the same
    /// rejection, message included.
    fn parse_through_values(bytes: &[u8], max_bytes: usize) -> Result<TicketEvent, Rejection> {
        #[derive(Deserialize)]
        struct Values {
            event_id: Option<Value>,
            ticket_id: Option<Value>,
            from_status: Option<Value>,
            to_status: Option<Value>,
            changed_at: Option<Value>,
        }
        fn field(value: Option<Value>) -> Option<Field<'static>> {
            Some(match value? {
                Value::Null => Field::Null,
                Value::String(text) => Field::Text(Cow::Owned(text)),
                Value::Bool(_) => Field::Other("a boolean"),
                Value::Number(_) => Field::Other("a number"),
                Value::Array(_) => Field::Other("an array"),
                Value::Object(_) => Field::Other("an object"),
            })
        }
        if bytes.len() > max_bytes {
            return Err(Rejection::new(
                RejectReason::PayloadTooLarge,
                format!("payload is {} bytes, the limit is {max_bytes}", bytes.len()),
            ));
        }
        let values: Values =
            serde_json::from_slice(bytes).map_err(|e| classify_json_error(bytes, &e))?;
        Wire {
            event_id: field(values.event_id),
            ticket_id: field(values.ticket_id),
            from_status: field(values.from_status),
            to_status: field(values.to_status),
            changed_at: field(values.changed_at),
        }
        .event(&Bytes::new())
    }

    const LIMIT: usize = 64 * 1024;

    const STORY_900: &str = r#"{"event_id":"event-ticket-900","ticket_id":"ticket-42","from_status":"open","to_status":"resolved","changed_at":"2026-10-03T08:00:00Z"}"#;

    /// The event `payload` makes, parsed from a handle on the same bytes.
    fn parsed_from(payload: &Bytes) -> TicketEvent {
        match TicketEvent::parse_payload(payload.clone(), LIMIT) {
            Parsed::InPlace(event) | Parsed::Apart(event, _) => event,
            Parsed::Rejected(rejection, _) => panic!("{rejection:?}"),
        }
    }

    #[test]
    fn text_without_escapes_shares_the_payload_and_escaped_text_is_its_own() {
        let payload = Bytes::from(STORY_900.replace(r#""open""#, r#""op\u0065n""#));
        let event = parsed_from(&payload);
        assert_eq!(event.from_status(), "open");
        assert!(
            !event.shares(&payload),
            "an escaped field: a buffer of its own"
        );
        assert_eq!(event, TicketEvent::parse(&payload, LIMIT).unwrap());

        let payload = Bytes::from(STORY_900);
        let event = parsed_from(&payload);
        assert!(event.shares(&payload), "no escapes: the payload itself");
        assert_eq!(event, crate::domain::story::event_900());
        assert!(std::mem::size_of::<TicketEvent>() <= 80);
    }

    fn reason_of(bytes: &str) -> RejectReason {
        TicketEvent::parse(bytes.as_bytes(), LIMIT)
            .unwrap_err()
            .reason
    }

    #[test]
    fn the_source_documents_payload_parses() {
        let event = TicketEvent::parse(STORY_900.as_bytes(), LIMIT).unwrap();
        assert_eq!(event.event_id(), "event-ticket-900");
        assert_eq!(event.ticket_id(), "ticket-42");
        assert_eq!(event.from_status(), "open");
        assert_eq!(event.to_status(), "resolved");
        assert_eq!(event.changed_at.to_rfc3339(), "2026-10-03T08:00:00+00:00");
    }

    #[test]
    fn an_event_keeps_its_ids_hash_however_it_was_made() {
        let parsed = TicketEvent::parse(STORY_900.as_bytes(), LIMIT).unwrap();
        assert_eq!(parsed.id_hash(), id_hash("event-ticket-900"));
        let escaped = STORY_900.replace("event-ticket-900", "event-ticket-\\u0039\\u0030\\u0030");
        let unescaped = TicketEvent::parse(escaped.as_bytes(), LIMIT).unwrap();
        assert_eq!(unescaped.event_id(), "event-ticket-900");
        assert_eq!(unescaped.id_hash(), parsed.id_hash());
        let renamed = parsed.with_event_id("another");
        assert_eq!(renamed.id_hash(), id_hash("another"));
        assert_eq!(renamed.with_ticket_id("t").id_hash(), id_hash("another"));
    }

    #[test]
    fn the_id_hash_reads_every_byte_and_the_length() {
        // Ids of each length up to three words, each differing from the one before in one
        // byte, or in its length alone (trailing zero bytes fill the last word).
        let mut seen = std::collections::HashSet::new();
        for len in 0..24 {
            let base = "a".repeat(len);
            assert!(seen.insert(id_hash(&base)), "length {len}");
            for at in 0..len {
                let mut changed = base.clone().into_bytes();
                changed[at] = b'b';
                let changed = String::from_utf8(changed).unwrap();
                assert!(seen.insert(id_hash(&changed)), "{changed}");
            }
            assert_ne!(id_hash(&format!("{base}\u{0}")), id_hash(&base));
        }
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let json = STORY_900.replace('}', r#","schema":2,"extra":{"nested":[1,2]}}"#);
        assert!(TicketEvent::parse(json.as_bytes(), LIMIT).is_ok());
    }

    #[test]
    fn an_offset_timestamp_is_normalised_to_utc() {
        let json = STORY_900.replace("2026-10-03T08:00:00Z", "2026-10-03T10:00:00+02:00");
        let event = TicketEvent::parse(json.as_bytes(), LIMIT).unwrap();
        assert_eq!(event.changed_at.to_rfc3339(), "2026-10-03T08:00:00+00:00");
    }

    #[test]
    fn each_kind_of_bad_payload_gets_its_own_reason() {
        let cases = [
            ("not json at all", RejectReason::NotJson),
            (r#"{"event_id":"#, RejectReason::NotJson),
            ("[1,2,3]", RejectReason::NotObject),
            ("\"event\"", RejectReason::NotObject),
            (
                &STORY_900.replace(r#""ticket_id":"ticket-42","#, ""),
                RejectReason::MissingField,
            ),
            (
                &STORY_900.replace(r#""ticket-42""#, "null"),
                RejectReason::MissingField,
            ),
            (
                &STORY_900.replace(r#""ticket-42""#, "42"),
                RejectReason::WrongType,
            ),
            (
                &STORY_900.replace(r#""open""#, r#""""#),
                RejectReason::EmptyField,
            ),
            (
                &STORY_900.replace(r#""open""#, r#""   ""#),
                RejectReason::EmptyField,
            ),
            (
                &STORY_900.replace(r#""open""#, r#""op\u0000en""#),
                RejectReason::InvalidText,
            ),
            (
                // A raw NUL in a string is not JSON: only an escape can put one in a field.
                &STORY_900.replace(r#""open""#, "\"op\0en\""),
                RejectReason::NotJson,
            ),
            (
                &STORY_900.replace("2026-10-03T08:00:00Z", "yesterday"),
                RejectReason::BadTimestamp,
            ),
            (
                &STORY_900.replace("2026-10-03T08:00:00Z", "2026-10-03 08:00"),
                RejectReason::BadTimestamp,
            ),
            (
                &STORY_900.replace('}', r#","event_id":"again"}"#),
                RejectReason::DuplicateField,
            ),
        ];
        for (payload, expected) in cases {
            assert_eq!(reason_of(payload), expected, "payload {payload:?}");
        }
    }

    #[test]
    fn an_event_id_of_200_characters_is_accepted_and_201_rejected() {
        let at_limit = STORY_900.replace("event-ticket-900", &"é".repeat(MAX_EVENT_ID_CHARS));
        assert!(TicketEvent::parse(at_limit.as_bytes(), LIMIT).is_ok());
        let over = STORY_900.replace("event-ticket-900", &"é".repeat(MAX_EVENT_ID_CHARS + 1));
        assert_eq!(reason_of(&over), RejectReason::OversizedId);
    }

    #[test]
    fn each_text_field_is_accepted_at_its_bound_and_rejected_one_character_over() {
        let fields = [
            ("\"ticket-42\"", MAX_TICKET_ID_CHARS),
            ("\"open\"", MAX_STATUS_CHARS),
            ("\"resolved\"", MAX_STATUS_CHARS),
        ];
        for (value, bound) in fields {
            // Four bytes a character: the worst case for the database's byte limits.
            let at_bound = STORY_900.replace(value, &format!("\"{}\"", "😀".repeat(bound)));
            assert!(
                TicketEvent::parse(at_bound.as_bytes(), LIMIT).is_ok(),
                "{value} at {bound} characters"
            );
            let over = STORY_900.replace(value, &format!("\"{}\"", "😀".repeat(bound + 1)));
            let rejection = TicketEvent::parse(over.as_bytes(), LIMIT).unwrap_err();
            assert_eq!(rejection.reason, RejectReason::OversizedField, "{value}");
            assert!(
                rejection
                    .message
                    .contains(&format!("{} characters, the limit is {bound}", bound + 1)),
                "{}",
                rejection.message
            );
        }
    }

    #[test]
    fn the_ticket_id_of_the_incident_is_dead_lettered_at_parse_time() {
        // A few thousand random characters froze partition 0: PostgreSQL refused the index entry.
        let ticket: String = (0..3000u32)
            .map(|i| char::from_u32(0x4e00 + (i * 7919) % 20000).unwrap())
            .collect();
        let payload = STORY_900.replace("ticket-42", &ticket);
        assert_eq!(reason_of(&payload), RejectReason::OversizedField);
    }

    #[test]
    fn a_payload_over_the_limit_is_rejected_before_parsing() {
        let rejection = TicketEvent::parse(STORY_900.as_bytes(), 10).unwrap_err();
        assert_eq!(rejection.reason, RejectReason::PayloadTooLarge);
        assert!(
            rejection.message.contains("limit is 10"),
            "{}",
            rejection.message
        );
    }

    #[test]
    fn invalid_utf8_is_not_json() {
        assert_eq!(
            TicketEvent::parse(b"{\"event_id\":\"\xff\xfe\"}", LIMIT)
                .unwrap_err()
                .reason,
            RejectReason::NotJson
        );
    }

    #[test]
    fn reason_names_round_trip() {
        for &reason in RejectReason::ALL {
            assert_eq!(RejectReason::from_name(reason.as_str()), Some(reason));
        }
    }

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::hash_map(
                    prop_oneof![
                        Just("event_id".to_string()),
                        Just("ticket_id".to_string()),
                        Just("from_status".to_string()),
                        Just("to_status".to_string()),
                        Just("changed_at".to_string()),
                        ".*"
                    ],
                    inner,
                    0..8
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    prop_compose! {
        fn valid_event()(
            event_id in "[^\u{0}]{1,200}",
            ticket_id in "[^\u{0}]{1,200}",
            from_status in "[^\u{0}]{1,64}",
            to_status in "[^\u{0}]{1,64}",
            seconds in 0i64..4_000_000_000,
        ) -> TicketEvent {
            TicketEvent::new(&event_id, &ticket_id, &from_status, &to_status, DateTime::from_timestamp(seconds, 0).unwrap())
        }
    }

    /// A wire's fields as comparable values: absent, null, text, or another kind.
    fn fields(wire: &Wire) -> Vec<Option<String>> {
        [
            &wire.event_id,
            &wire.ticket_id,
            &wire.from_status,
            &wire.to_status,
            &wire.changed_at,
        ]
        .into_iter()
        .map(|field| match field {
            None | Some(Field::Null) => None,
            Some(Field::Text(text)) => Some(format!("text {text}")),
            Some(Field::Other(kind)) => Some(format!("other {kind}")),
        })
        .collect()
    }

    /// JSON-ish text in the neighbourhood of an event: the five keys and strangers, in any order
    /// and number, strings with and without escapes, nulls and numbers, whitespace between tokens,
    /// and now and then a stray byte, a trailing comma or trailing bytes.
    fn near_events() -> impl Strategy<Value = Vec<u8>> {
        let space = prop_oneof![
            4 => Just(""),
            1 => Just(" "),
            1 => Just("\n\t "),
            1 => Just("\r"),
            1 => Just("\u{b}"),
        ];
        let key = prop_oneof![
            Just("event_id".to_owned()),
            Just("ticket_id".to_owned()),
            Just("from_status".to_owned()),
            Just("to_status".to_owned()),
            Just("changed_at".to_owned()),
            Just("event_\\u0069d".to_owned()),
            "[a-z_]{0,12}",
        ];
        let value = prop_oneof![
            6 => "[ -~]{0,12}".prop_map(|t| format!("\"{}\"", t.replace(['"', '\\'], ""))),
            2 => Just("\"2026-10-03T08:00:00Z\"".to_owned()),
            1 => Just("\"2026-10-03T10:00:00.123+02:00\"".to_owned()),
            1 => "\\PC{0,6}".prop_map(|t| serde_json::to_string(&t).unwrap()),
            1 => Just("\"tab\there\"".to_owned()),
            1 => Just("\"esc\\\"aped\"".to_owned()),
            1 => Just("null".to_owned()),
            1 => Just("nul".to_owned()),
            1 => Just("nullx".to_owned()),
            1 => Just("42".to_owned()),
            1 => Just("[]".to_owned()),
        ];
        let member = (
            space.clone(),
            key,
            space.clone(),
            space.clone(),
            value,
            space.clone(),
        )
            .prop_map(|(a, k, b, c, v, d)| format!("{a}\"{k}\"{b}:{c}{v}{d}"));
        (
            space.clone(),
            prop::collection::vec(member, 0..8),
            prop_oneof![8 => Just(""), 1 => Just(","), 1 => Just("x"), 1 => Just("}")],
            space,
            prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
        )
            .prop_map(|(lead, members, tail, trail, stray)| {
                let mut bytes =
                    format!("{lead}{{{}{tail}}}{trail}", members.join(",")).into_bytes();
                if let Some((at, byte)) = stray {
                    let at = at.index(bytes.len() + 1);
                    bytes.insert(at, byte);
                }
                bytes
            })
    }

    #[test]
    fn the_common_shape_is_scanned_without_serde() {
        let spaced = STORY_900.replace(',', " ,\n  ").replace(':', " : ");
        let event = TicketEvent::parse(STORY_900.as_bytes(), LIMIT).unwrap();
        for text in [
            STORY_900,
            &spaced,
            &event.to_json(),
            "{}",
            "{\"event_id\":null}",
        ] {
            assert!(scan::scan(text.as_bytes()).is_some(), "{text}");
        }
        // The short way: five plain strings make the event straight from their spans.
        let payload = Bytes::from_static(STORY_900.as_bytes());
        let texts = scan::scan(&payload)
            .and_then(|scanned| scanned.texts())
            .unwrap();
        assert_eq!(
            Plain::of(texts).map(|plain| plain.event(payload.clone())),
            Some(event.clone())
        );
        // Parsed from the record, the event takes its payload as its text.
        match TicketEvent::parse_payload(payload.clone(), LIMIT) {
            Parsed::InPlace(parsed) => {
                assert_eq!(parsed, event);
                assert!(parsed.shares(&payload));
            }
            other => panic!("{other:?}"),
        }
        for blank in [" open", "", "\u{a0}open"] {
            let text = STORY_900.replace("\"open\"", &format!("\"{blank}\""));
            let payload = Bytes::from(text);
            let texts = scan::scan(&payload).and_then(|scanned| scanned.texts());
            assert!(
                texts.is_none_or(|texts| Plain::of(texts).is_none()),
                "{blank:?}"
            );
        }
        for text in [
            &STORY_900.replace("ticket-42", "ticket-\\u0034"),
            &STORY_900.replace('}', r#","schema":2}"#),
            &STORY_900.replace('}', r#","event_id":"again"}"#),
            &STORY_900.replace(r#""ticket-42""#, "42"),
            &STORY_900.replace('}', "},"),
        ] {
            assert!(scan::scan(text.as_bytes()).is_none(), "{text}");
        }
    }

    proptest! {
        #[test]
        fn the_scan_reads_what_serde_reads_or_leaves_it_to_serde(bytes in near_events()) {
            if let Some(scanned) = scan::scan(&bytes) {
                let parsed: Wire = serde_json::from_slice(&bytes).map_err(|e| {
                    TestCaseError::fail(format!("scanned, serde says {e}"))
                })?;
                prop_assert_eq!(fields(&scanned.wire()), fields(&parsed));
            }
            prop_assert_eq!(TicketEvent::parse(&bytes, LIMIT), parse_through_values(&bytes, LIMIT));
        }

        #[test]
        fn texts_near_the_short_ways_checks_parse_as_values_did(
            texts in prop::array::uniform4(prop_oneof![
                "[ -~]{0,3}",
                " [!-~]{0,3}",
                "[!-~]{62,66}",
                "[!-~]{198,202}",
                "[é\u{a0}x]{1,3}",
                "\u{3000}",
            ]),
            changed_at in prop_oneof![
                Just("2026-10-03T08:00:00Z"),
                Just("2026-10-03T08:00:00.5Z"),
                Just("2026-10-03T10:00:00+02:00"),
                Just("2026-02-30T08:00:00Z"),
                Just(" "),
            ],
        ) {
            let [event_id, ticket_id, from_status, to_status] = texts;
            let bytes = serde_json::json!({
                "event_id": event_id,
                "ticket_id": ticket_id,
                "from_status": from_status,
                "to_status": to_status,
                "changed_at": changed_at,
            })
            .to_string();
            let bytes = bytes.as_bytes();
            prop_assert_eq!(TicketEvent::parse(bytes, LIMIT), parse_through_values(bytes, LIMIT));
        }

        #[test]
        fn a_changed_byte_in_an_event_parses_as_values_did(
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            insert in any::<bool>(),
        ) {
            let mut bytes = STORY_900.as_bytes().to_vec();
            let at = at.index(bytes.len());
            if insert {
                bytes.insert(at, byte);
            } else {
                bytes[at] = byte;
            }
            prop_assert_eq!(TicketEvent::parse(&bytes, LIMIT), parse_through_values(&bytes, LIMIT));
        }

        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = TicketEvent::parse(&bytes, LIMIT);
        }

        #[test]
        fn parsing_arbitrary_json_never_panics(value in arbitrary_json()) {
            let bytes = serde_json::to_vec(&value).unwrap();
            let _ = TicketEvent::parse(&bytes, LIMIT);
        }

        #[test]
        fn borrowing_parses_arbitrary_json_as_values_did(value in arbitrary_json()) {
            let bytes = serde_json::to_vec(&value).unwrap();
            prop_assert_eq!(TicketEvent::parse(&bytes, LIMIT), parse_through_values(&bytes, LIMIT));
        }

        #[test]
        fn borrowing_parses_arbitrary_bytes_as_values_did(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            prop_assert_eq!(TicketEvent::parse(&bytes, LIMIT), parse_through_values(&bytes, LIMIT));
        }

        #[test]
        fn borrowing_parses_events_with_any_field_changed_as_values_did(
            field in prop_oneof![
                Just("event_id"), Just("ticket_id"), Just("from_status"), Just("to_status"),
                Just("changed_at"),
            ],
            replacement in arbitrary_json(),
            escaped in any::<bool>(),
        ) {
            let mut object: serde_json::Map<String, Value> = serde_json::from_str(STORY_900).unwrap();
            object.insert(field.to_owned(), replacement);
            let mut text = Value::Object(object).to_string();
            if escaped {
                // The same text with its letters escaped: parsed into owned strings.
                text = text.replace('e', "\\u0065");
            }
            let bytes = text.as_bytes();
            prop_assert_eq!(TicketEvent::parse(bytes, LIMIT), parse_through_values(bytes, LIMIT));
        }

        #[test]
        fn a_valid_event_survives_encoding_and_parsing(event in valid_event()) {
            let texts = [&event.event_id(), &event.ticket_id(), &event.from_status(), &event.to_status()];
            prop_assume!(texts.iter().all(|t| !t.trim().is_empty()));
            let parsed = TicketEvent::parse(event.to_json().as_bytes(), LIMIT);
            prop_assert_eq!(parsed, Ok(event));
        }
    }
}
