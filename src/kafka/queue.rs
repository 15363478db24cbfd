//! A partition's own librdkafka queue, read through librdkafka's event API directly.
//!
//! rust-rdkafka's `PartitionQueue` hands an error event over as its code alone; the offset it
//! is about and librdkafka's text are dropped. Those are what an operator and the driver need
//! to know which records could not be read and why (see [`crate::domain::fetch_error`]), so
//! the driver reads its partitions' queues here instead: records are copied out exactly as
//! rust-rdkafka's `BorrowedMessage` shows them, and polling serves control messages (commit
//! markers) the same way, moving the consumer's position past them.

use std::ffi::CStr;
use std::ptr;
use std::sync::Arc;

use bytes::Bytes;
use rdkafka::bindings as rdsys;
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::error::RDKafkaErrorCode;

use crate::domain::{FetchedRecord, RecordKey};

/// An error librdkafka put on a partition's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueError {
    pub code: RDKafkaErrorCode,
    /// The offset it is about (`None`: librdkafka gave none, or a logical one).
    pub offset: Option<i64>,
    /// librdkafka's own words.
    pub text: String,
}

/// One partition's queue, split off the consumer's main queue.
pub struct PartitionQueue<C: ConsumerContext + 'static> {
    queue: *mut rdsys::rd_kafka_queue_t,
    /// Kept alive while librdkafka may call it (until the queue is dropped).
    wake: Option<Box<Box<dyn Fn() + Send + Sync>>>,
    /// The queue must go before the consumer does.
    _consumer: Arc<BaseConsumer<C>>,
}

// SAFETY: librdkafka queues are thread-safe; the raw pointer is only used through its API.
unsafe impl<C: ConsumerContext> Send for PartitionQueue<C> {}

impl<C: ConsumerContext> PartitionQueue<C> {
    /// Splits `partition` of `topic` off the consumer's main queue: from now on its records and
    /// errors arrive here only. `None` when librdkafka does not know the partition.
    pub fn split(
        consumer: &Arc<BaseConsumer<C>>,
        topic: &str,
        partition: i32,
    ) -> Option<PartitionQueue<C>> {
        use rdkafka::consumer::Consumer;
        let topic = std::ffi::CString::new(topic).ok()?;
        let client = consumer.client().native_ptr();
        // SAFETY: a live client; the queue is destroyed in Drop.
        let queue =
            unsafe { rdsys::rd_kafka_queue_get_partition(client, topic.as_ptr(), partition) };
        if queue.is_null() {
            return None;
        }
        // SAFETY: a live queue; forwarding to nothing keeps its events here. librdkafka marks
        // the forwarding as the application's, so a later (re)assignment keeps it too.
        unsafe { rdsys::rd_kafka_queue_forward(queue, ptr::null_mut()) };
        Some(PartitionQueue {
            queue,
            wake: None,
            _consumer: consumer.clone(),
        })
    }

    /// `wake` is called whenever an event arrives in the empty queue.
    pub fn set_nonempty_callback(&mut self, wake: impl Fn() + Send + Sync + 'static) {
        unsafe extern "C" fn trampoline(_: *mut rdsys::rd_kafka_t, opaque: *mut std::ffi::c_void) {
            // SAFETY: `opaque` is the boxed closure, alive until replaced or the queue dropped.
            let wake = unsafe { &*(opaque as *const Box<dyn Fn() + Send + Sync>) };
            wake();
        }
        let wake: Box<Box<dyn Fn() + Send + Sync>> = Box::new(Box::new(wake));
        // SAFETY: the closure outlives its registration: it is kept until Drop disables it.
        unsafe {
            rdsys::rd_kafka_queue_cb_event_enable(
                self.queue,
                Some(trampoline),
                &*wake as *const Box<dyn Fn() + Send + Sync> as *mut std::ffi::c_void,
            )
        };
        self.wake = Some(wake);
    }

    /// How many events the queue holds (records, errors and control events alike): a size
    /// to reserve for, not a count of records.
    pub fn events_held(&self) -> usize {
        // SAFETY: the queue is alive.
        unsafe { rdsys::rd_kafka_queue_length(self.queue) }
    }

    /// Up to `max` records, without waiting, appended to `records`; the error that ended the
    /// round, if one did (the records before it are in `records`, nothing after it is read).
    ///
    /// The round's payloads are copied into one buffer that its records share: one
    /// allocation a round instead of one a record. The records are dropped on another thread
    /// than the one that copied them, where a free of memory this thread allocated is the
    /// allocator's costly kind; a round's buffer is freed once, when its last record goes.
    pub fn poll_round(&self, max: usize, records: &mut Vec<FetchedRecord>) -> Option<QueueError> {
        let mut round = Round::with_capacity(max.min(self.events_held()));
        let mut error = None;
        while round.len() < max {
            // SAFETY: the queue is alive; a held event is destroyed by `round`, every other
            // one right here, after it was read.
            let event = unsafe { rdsys::rd_kafka_queue_poll(self.queue, 0) };
            if event.is_null() {
                break;
            }
            match unsafe { read_event(event) } {
                Event::Record(message) => round.hold(event, message),
                other => {
                    unsafe { rdsys::rd_kafka_event_destroy(event) };
                    if let Event::Failed(failed) = other {
                        error = Some(failed);
                        break;
                    }
                }
            }
        }
        round.copy_into(records);
        error
    }
}

/// What a polled event is to a round.
enum Event {
    /// A fetched message without an error, alive with its event.
    Record(*const rdsys::rd_kafka_message_t),
    /// An error that ends the round.
    Failed(QueueError),
    /// Nothing for us (a control event, an error event without an error).
    Other,
}

/// # Safety
/// `event` must be a live event.
unsafe fn read_event(event: *mut rdsys::rd_kafka_event_t) -> Event {
    match unsafe { rdsys::rd_kafka_event_type(event) } {
        rdsys::RD_KAFKA_EVENT_FETCH => {
            let message = unsafe { rdsys::rd_kafka_event_message_next(event) };
            if message.is_null() {
                Event::Other
            } else if unsafe { (*message).err }
                == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
            {
                Event::Record(message)
            } else {
                Event::Failed(unsafe { read_failed(message) })
            }
        }
        rdsys::RD_KAFKA_EVENT_ERROR => {
            unsafe { read_error(event) }.map_or(Event::Other, Event::Failed)
        }
        _ => Event::Other,
    }
}

/// The fetch events a round polled, held until their messages are copied out together.
struct Round {
    held: Vec<(
        *mut rdsys::rd_kafka_event_t,
        *const rdsys::rd_kafka_message_t,
    )>,
}

impl Round {
    fn with_capacity(capacity: usize) -> Round {
        Round {
            held: Vec::with_capacity(capacity),
        }
    }

    fn len(&self) -> usize {
        self.held.len()
    }

    /// Keeps a live fetch event and its message (without an error) until [`Round::copy_into`].
    fn hold(
        &mut self,
        event: *mut rdsys::rd_kafka_event_t,
        message: *const rdsys::rd_kafka_message_t,
    ) {
        self.held.push((event, message));
    }

    /// Copies the held messages out, in order, their payloads into one buffer they share; their
    /// events go with the round.
    fn copy_into(self, records: &mut Vec<FetchedRecord>) {
        // SAFETY (every dereference below): a held message is alive until its event is
        // destroyed, which happens last.
        let total = self
            .held
            .iter()
            .map(|&(_, m)| unsafe { payload_of(m) }.map_or(0, <[u8]>::len))
            .sum();
        let mut buffer = Vec::with_capacity(total);
        for &(_, m) in &self.held {
            buffer.extend_from_slice(unsafe { payload_of(m) }.unwrap_or_default());
        }
        let buffer = Bytes::from(buffer);
        records.reserve(self.held.len());
        let mut at = 0;
        for &(_, m) in &self.held {
            let payload = unsafe { payload_of(m) }.map(|p| {
                at += p.len();
                buffer.slice(at - p.len()..at)
            });
            records.push(unsafe { read_record(m, payload) });
        }
    }
}

impl Drop for Round {
    /// Destroys the held events: once their messages are copied out, or if copying panicked.
    fn drop(&mut self) {
        for &(event, _) in &self.held {
            // SAFETY: each held event is alive and destroyed once, here.
            unsafe { rdsys::rd_kafka_event_destroy(event) };
        }
    }
}

/// A live message's payload, `None` when it has none (a tombstone).
///
/// # Safety
/// `message` must be a live message; the slice lives as long as it.
unsafe fn payload_of<'a>(message: *const rdsys::rd_kafka_message_t) -> Option<&'a [u8]> {
    let m = unsafe { &*message };
    // SAFETY: librdkafka's pointer and length, alive with the message.
    (!m.payload.is_null())
        .then(|| unsafe { std::slice::from_raw_parts(m.payload as *const u8, m.len) })
}

/// The error a fetched message carries.
///
/// # Safety
/// `message` must be a live message.
unsafe fn read_failed(message: *const rdsys::rd_kafka_message_t) -> QueueError {
    let m = unsafe { &*message };
    let text = unsafe { payload_of(message) }
        .map(|text| String::from_utf8_lossy(text).into_owned())
        .unwrap_or_else(|| error_text(m.err));
    QueueError {
        code: m.err.into(),
        offset: (m.offset >= 0).then_some(m.offset),
        text,
    }
}

/// A fetched message (without an error) as a record, with `payload` as its payload.
///
/// # Safety
/// `message` must be a live message.
unsafe fn read_record(
    message: *const rdsys::rd_kafka_message_t,
    payload: Option<Bytes>,
) -> FetchedRecord {
    let m = unsafe { &*message };
    let mut kind = rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    let millis = unsafe { rdsys::rd_kafka_message_timestamp(message, &mut kind) };
    let timestamp = (kind != rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE)
        .then(|| chrono::DateTime::from_timestamp_millis(millis))
        .flatten();
    // SAFETY: librdkafka's pointer and length, alive with the message.
    let key = (!m.key.is_null())
        .then(|| unsafe { std::slice::from_raw_parts(m.key as *const u8, m.key_len) });
    FetchedRecord {
        offset: m.offset,
        key: key.map(RecordKey::new),
        payload,
        timestamp,
    }
}

/// An error event's code, offset and text; `None` for an event that carries no error.
///
/// # Safety
/// `event` must be a live error event.
unsafe fn read_error(event: *mut rdsys::rd_kafka_event_t) -> Option<QueueError> {
    let err = unsafe { rdsys::rd_kafka_event_error(event) };
    if err == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return None;
    }
    let text = unsafe { rdsys::rd_kafka_event_error_string(event) };
    let text = if text.is_null() {
        error_text(err)
    } else {
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    let tp = unsafe { rdsys::rd_kafka_event_topic_partition(event) };
    let offset = if tp.is_null() {
        None
    } else {
        let offset = unsafe { (*tp).offset };
        unsafe { rdsys::rd_kafka_topic_partition_destroy(tp) };
        (offset >= 0).then_some(offset)
    };
    Some(QueueError {
        code: err.into(),
        offset,
        text,
    })
}

fn error_text(err: rdsys::rd_kafka_resp_err_t) -> String {
    // SAFETY: rd_kafka_err2str returns a static string for every code.
    unsafe { CStr::from_ptr(rdsys::rd_kafka_err2str(err)) }
        .to_string_lossy()
        .into_owned()
}

impl<C: ConsumerContext> Drop for PartitionQueue<C> {
    fn drop(&mut self) {
        // SAFETY: disable the callback before the closure and the queue go away.
        unsafe {
            rdsys::rd_kafka_queue_cb_event_enable(self.queue, None, ptr::null_mut());
            rdsys::rd_kafka_queue_destroy(self.queue);
        }
    }
}
