//! A partition's own librdkafka queue, read through librdkafka's C API directly.
//!
//! rust-rdkafka's `PartitionQueue` hands an error over as its code alone; the offset it is
//! about and librdkafka's text are dropped. Those are what an operator and the driver need to
//! know which records could not be read and why (see [`crate::domain::fetch_error`]), so the
//! driver reads its partitions' queues here instead: records are copied out exactly as
//! rust-rdkafka's `BorrowedMessage` shows them, and reading serves control messages (commit
//! markers) the same way, moving the consumer's position past them.
//!
//! A round takes its messages in one call (`rd_kafka_consume_batch_queue`): the queue's lock
//! is still taken per message, but the event API's per-message work (two clock reads, an
//! event's setup, the position's update under the partition's lock) is done once a round.
//! Such a call also takes the messages after an error out of the queue, and moves the
//! consumer's position past them. They are kept here, and the next round hands them over
//! before it reads the queue again: nothing after an error is handed over in the round that
//! met it, as before. Until they are handed over, the position is not the driver's to believe
//! ([`PartitionQueue::carries`]); when the driver moves the partition's fetch position, they
//! are dropped ([`PartitionQueue::discard_carried`]), as librdkafka drops the outdated
//! messages still in the queue.

use std::collections::VecDeque;
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
    /// Messages a round took out of the queue after the error that ended it, in order: the
    /// next ones to hand over. Each is owned here until handed over or destroyed.
    carried: VecDeque<*mut rdsys::rd_kafka_message_t>,
    /// Where a round's call puts the messages it takes (kept between rounds).
    taken: Vec<*mut rdsys::rd_kafka_message_t>,
    /// See [`PartitionQueue::error_reach`].
    error_reach: Option<i64>,
    /// The queue must go before the consumer does.
    _consumer: Arc<BaseConsumer<C>>,
}

// SAFETY: librdkafka queues and messages are thread-safe; the raw pointers are only used
// through its API, by the queue's one owner.
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
            carried: VecDeque::new(),
            taken: Vec::new(),
            error_reach: None,
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

    /// How many events the queue holds (records, errors and control events alike), and the
    /// messages carried over: a size to reserve for, not a count of records.
    pub fn events_held(&self) -> usize {
        // SAFETY: the queue is alive.
        unsafe { rdsys::rd_kafka_queue_length(self.queue) + self.carried.len() }
    }

    /// Whether messages taken out of the queue after an error wait to be handed over: the
    /// consumer's position is past them, so until they are, it says nothing about offsets
    /// without records.
    pub fn carries(&self) -> bool {
        !self.carried.is_empty()
    }

    /// The furthest the consumer's position of the partition was moved for an error alone:
    /// one past the highest offset an error taken from the queue named (librdkafka's batch
    /// read moves the position past every message it returns, errors included; see
    /// the driver's `position::believable`). `None` since the queue was split or
    /// the fetch position last moved.
    pub fn error_reach(&self) -> Option<i64> {
        self.error_reach
    }

    /// Drops the messages carried over: the partition's fetch position is being moved (a seek,
    /// a restart of its fetching), and what was read after the old one is outdated, as is the
    /// reach of its errors.
    pub fn discard_carried(&mut self) {
        self.error_reach = None;
        for message in self.carried.drain(..) {
            // SAFETY: a carried message is alive and owned here.
            unsafe { rdsys::rd_kafka_message_destroy(message) };
        }
    }

    /// Up to `max` records, without waiting, appended to `records`; the error that ended the
    /// round, if one did (the records before it are in `records`; what the queue gave after
    /// it is carried over to the next round).
    ///
    /// The round's payloads are copied into one buffer that its records share: one
    /// allocation a round instead of one a record. The records are dropped on another thread
    /// than the one that copied them, where a free of memory this thread allocated is the
    /// allocator's costly kind; a round's buffer is freed once, when its last record goes.
    pub fn poll_round(
        &mut self,
        max: usize,
        records: &mut Vec<FetchedRecord>,
    ) -> Option<QueueError> {
        let mut round = Round::with_capacity(max.min(self.events_held()));
        let mut error = None;
        while round.len() < max && error.is_none() {
            let Some(message) = self.carried.pop_front() else {
                break;
            };
            // SAFETY: a carried message is alive and owned here; the round takes it.
            error = unsafe { round.take(message) };
        }
        let wanted = max - round.len();
        if error.is_none() && wanted > 0 {
            // Empty: emptied after each use.
            self.taken.reserve(wanted);
            // SAFETY: the queue is alive and the array has room for `wanted` pointers; each
            // message written there is owned by this round from now on.
            let got = unsafe {
                rdsys::rd_kafka_consume_batch_queue(self.queue, 0, self.taken.as_mut_ptr(), wanted)
            };
            // SAFETY: librdkafka wrote `got` pointers (-1, writing none, only for a queue
            // forwarded elsewhere, which a split queue is not).
            unsafe {
                self.taken
                    .set_len(usize::try_from(got).unwrap_or(0).min(wanted))
            };
            for &message in &self.taken {
                // SAFETY: a message just taken is alive.
                let m = unsafe { &*message };
                if m.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && m.offset >= 0
                {
                    self.error_reach = self.error_reach.max(Some(m.offset + 1));
                }
                if error.is_some() {
                    self.carried.push_back(message);
                } else {
                    // SAFETY: a message just taken, alive and owned by this round.
                    error = unsafe { round.take(message) };
                }
            }
            self.taken.clear();
        }
        round.copy_into(records);
        error
    }
}

/// The records (messages without an error) a round took, held until they are copied out
/// together.
struct Round {
    held: Vec<*mut rdsys::rd_kafka_message_t>,
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

    /// Takes a message: a record is held until [`Round::copy_into`]; an error is read, the
    /// message destroyed, and the error returned.
    ///
    /// # Safety
    /// `message` must be alive and owned by the caller, who gives it up.
    unsafe fn take(&mut self, message: *mut rdsys::rd_kafka_message_t) -> Option<QueueError> {
        if unsafe { (*message).err } == rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            self.held.push(message);
            return None;
        }
        let failed = unsafe { read_failed(message) };
        unsafe { rdsys::rd_kafka_message_destroy(message) };
        Some(failed)
    }

    /// Copies the held messages out, in order, their payloads into one buffer they share; the
    /// messages go with the round.
    fn copy_into(self, records: &mut Vec<FetchedRecord>) {
        // SAFETY (every dereference below): a held message is alive until it is destroyed,
        // which happens last.
        let total = self
            .held
            .iter()
            .map(|&m| unsafe { payload_of(m) }.map_or(0, <[u8]>::len))
            .sum();
        let mut buffer = Vec::with_capacity(total);
        for &m in &self.held {
            buffer.extend_from_slice(unsafe { payload_of(m) }.unwrap_or_default());
        }
        let buffer = Bytes::from(buffer);
        records.reserve(self.held.len());
        let mut at = 0;
        for &m in &self.held {
            let payload = unsafe { payload_of(m) }.map(|p| {
                at += p.len();
                buffer.slice(at - p.len()..at)
            });
            records.push(unsafe { read_record(m, payload) });
        }
    }
}

impl Drop for Round {
    /// Destroys the held messages: once they are copied out, or if copying panicked.
    fn drop(&mut self) {
        for &message in &self.held {
            // SAFETY: each held message is alive and destroyed once, here.
            unsafe { rdsys::rd_kafka_message_destroy(message) };
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

fn error_text(err: rdsys::rd_kafka_resp_err_t) -> String {
    // SAFETY: rd_kafka_err2str returns a static string for every code.
    unsafe { CStr::from_ptr(rdsys::rd_kafka_err2str(err)) }
        .to_string_lossy()
        .into_owned()
}

impl<C: ConsumerContext> Drop for PartitionQueue<C> {
    fn drop(&mut self) {
        // SAFETY: disable the callback before the closure and the queue go away.
        self.discard_carried();
        unsafe {
            rdsys::rd_kafka_queue_cb_event_enable(self.queue, None, ptr::null_mut());
            rdsys::rd_kafka_queue_destroy(self.queue);
        }
    }
}
