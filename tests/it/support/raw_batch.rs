//! Record batches no well-behaved producer writes, sent with a Produce request of our own: a
//! batch whose CRC does not match its bytes, and a batch that claims a codec its bytes are not.
//! librdkafka's mock cluster stores a produced batch as it came (it checks neither), and so
//! the consumer meets it as a broker with a corrupted log would hand it out.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// What is wrong with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A valid batch with one bit of its CRC flipped.
    Crc,
    /// Attributes saying gzip over bytes that are not gzip (the CRC matches them).
    NotGzip,
}

/// Produces one batch of `values` to `partition` of `topic` on the broker at `broker`
/// (`host:port`, the partition's leader), spoilt by `fault`; the batch's base offset.
pub fn produce_spoilt(
    broker: &str,
    topic: &str,
    partition: i32,
    values: &[Vec<u8>],
    fault: Fault,
) -> i64 {
    let batch = record_batch(values, fault);
    let mut body = Vec::new();
    put_i16(&mut body, -1); // transactional_id: null
    put_i16(&mut body, -1); // acks: all
    put_i32(&mut body, 10_000); // timeout_ms
    put_i32(&mut body, 1); // one topic
    put_str(&mut body, topic);
    put_i32(&mut body, 1); // one partition
    put_i32(&mut body, partition);
    put_i32(&mut body, batch.len() as i32);
    body.extend_from_slice(&batch);

    let mut request = Vec::new();
    put_i16(&mut request, 0); // Produce
    put_i16(&mut request, 3); // the first version with record batches v2
    put_i32(&mut request, 1); // correlation id
    put_str(&mut request, "spoilt-batch-test");
    request.extend_from_slice(&body);
    let mut framed = Vec::new();
    put_i32(&mut framed, request.len() as i32);
    framed.extend_from_slice(&request);

    let mut stream = TcpStream::connect(broker).expect("connect to the broker");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&framed).expect("send the produce request");
    let mut size = [0; 4];
    stream.read_exact(&mut size).expect("the produce response");
    let mut response = vec![0; i32::from_be_bytes(size) as usize];
    stream
        .read_exact(&mut response)
        .expect("the produce response");
    // correlation id, topics [name, partitions [index, error_code, base_offset, ...]]
    let mut at = 4 + 4;
    let name_len = i16::from_be_bytes([response[at], response[at + 1]]) as usize;
    at += 2 + name_len + 4 + 4;
    let error = i16::from_be_bytes([response[at], response[at + 1]]);
    assert_eq!(
        error, 0,
        "the broker refused the batch (error code {error})"
    );
    at += 2;
    i64::from_be_bytes(response[at..at + 8].try_into().unwrap())
}

/// A record batch (magic 2) of `values`, spoilt by `fault`.
fn record_batch(values: &[Vec<u8>], fault: Fault) -> Vec<u8> {
    let now = chrono::Utc::now().timestamp_millis();
    let mut records = Vec::new();
    for (delta, value) in values.iter().enumerate() {
        let mut record = Vec::new();
        record.push(0); // attributes
        put_varint(&mut record, 0); // timestamp delta
        put_varint(&mut record, delta as i64); // offset delta
        put_varint(&mut record, -1); // no key
        put_varint(&mut record, value.len() as i64);
        record.extend_from_slice(value);
        put_varint(&mut record, 0); // no headers
        put_varint(&mut records, record.len() as i64);
        records.extend_from_slice(&record);
    }
    let (attributes, records) = match fault {
        Fault::Crc => (0i16, records),
        Fault::NotGzip => (1i16, b"these bytes are not gzip".to_vec()),
    };
    // From the attributes to the end: what the CRC covers.
    let mut covered = Vec::new();
    put_i16(&mut covered, attributes);
    put_i32(&mut covered, values.len() as i32 - 1); // last offset delta
    put_i64(&mut covered, now); // base timestamp
    put_i64(&mut covered, now); // max timestamp
    put_i64(&mut covered, -1); // producer id
    put_i16(&mut covered, -1); // producer epoch
    put_i32(&mut covered, -1); // base sequence
    put_i32(&mut covered, values.len() as i32);
    covered.extend_from_slice(&records);
    let mut crc = crc32c(&covered);
    if fault == Fault::Crc {
        crc ^= 1;
    }
    let mut batch = Vec::new();
    put_i64(&mut batch, 0); // base offset: the broker's to set
    put_i32(&mut batch, (4 + 1 + 4 + covered.len()) as i32);
    put_i32(&mut batch, 0); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc.to_be_bytes());
    batch.extend_from_slice(&covered);
    batch
}

/// CRC-32C (Castagnoli), which record batches carry.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn put_i16(out: &mut Vec<u8>, value: i16) {
    out.extend_from_slice(&value.to_be_bytes());
}

fn put_i32(out: &mut Vec<u8>, value: i32) {
    out.extend_from_slice(&value.to_be_bytes());
}

fn put_i64(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(&value.to_be_bytes());
}

fn put_str(out: &mut Vec<u8>, value: &str) {
    put_i16(out, value.len() as i16);
    out.extend_from_slice(value.as_bytes());
}

/// A zigzag varint, as records encode their fields.
fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

#[test]
fn crc32c_matches_the_published_check_value() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
}
