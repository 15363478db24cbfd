//! The consumer protocol's `Assignment`, as DescribeGroups hands out each member's assignment
//! bytes (pure): which partitions of which topics the group's leader gave the member.
//!
//! ```text
//! Assignment => version:int16 [topic:string [partition:int32]] user_data:bytes
//! ```
//!
//! Arrays are an int32 count (-1: null), strings an int16 length, bytes an int32 length (-1:
//! null). Versions 0 to 3 share this layout (later versions only add fields after it, which
//! are not read); newer layouts are not guessed at.

use std::collections::BTreeMap;

/// Assignment bytes that are not a consumer protocol assignment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    #[error("the assignment ends early (at byte {0})")]
    Truncated(usize),
    #[error("assignment version {0} is not known")]
    Version(i16),
    #[error("the assignment has a negative length at byte {0}")]
    Negative(usize),
    #[error("a topic name in the assignment is not UTF-8")]
    TopicName,
}

/// The partitions of each topic a member is assigned, in order.
pub type Assigned = BTreeMap<String, Vec<i32>>;

/// Decodes a member's assignment; empty bytes (a member the leader has not assigned yet) are an
/// empty assignment.
pub fn decode(bytes: &[u8]) -> Result<Assigned, AssignmentError> {
    let mut assigned = Assigned::new();
    if bytes.is_empty() {
        return Ok(assigned);
    }
    let mut reader = Reader { bytes, at: 0 };
    let version = reader.i16()?;
    if !(0..=3).contains(&version) {
        return Err(AssignmentError::Version(version));
    }
    let topics = reader.count()?;
    for _ in 0..topics {
        let length = reader.i16()?;
        let length = usize::try_from(length).map_err(|_| AssignmentError::Negative(reader.at))?;
        let name = reader.take(length)?;
        let name = std::str::from_utf8(name).map_err(|_| AssignmentError::TopicName)?;
        let partitions = reader.count()?;
        let list = assigned.entry(name.to_owned()).or_default();
        for _ in 0..partitions {
            list.push(reader.i32()?);
        }
        list.sort_unstable();
        list.dedup();
    }
    Ok(assigned)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], AssignmentError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or(AssignmentError::Truncated(self.at))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn i16(&mut self) -> Result<i16, AssignmentError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, AssignmentError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An array's count; a null array counts none.
    fn count(&mut self) -> Result<usize, AssignmentError> {
        let at = self.at;
        match self.i32()? {
            -1 => Ok(0),
            n => usize::try_from(n).map_err(|_| AssignmentError::Negative(at)),
        }
    }
}

/// Encodes an assignment as a version 0 consumer protocol assignment (for tests).
pub fn encode(assigned: &Assigned) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0_i16.to_be_bytes());
    out.extend_from_slice(&(assigned.len() as i32).to_be_bytes());
    for (topic, partitions) in assigned {
        out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        out.extend_from_slice(topic.as_bytes());
        out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for partition in partitions {
            out.extend_from_slice(&partition.to_be_bytes());
        }
    }
    // user_data: null
    out.extend_from_slice(&(-1_i32).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assignment_names_the_partitions_of_each_topic() {
        let assigned = Assigned::from([
            ("tickets".to_owned(), vec![0, 3, 5]),
            ("other".to_owned(), vec![1]),
        ]);
        assert_eq!(decode(&encode(&assigned)).unwrap(), assigned);
    }

    #[test]
    fn a_librdkafka_assignment_with_user_data_and_a_later_version_decodes() {
        // Version 1, one topic "t" with partitions 2 and 0, then 3 bytes of user data.
        let bytes = [
            0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 9, 9, 9,
        ];
        assert_eq!(
            decode(&bytes).unwrap(),
            Assigned::from([("t".to_owned(), vec![0, 2])])
        );
    }

    #[test]
    fn no_bytes_is_no_assignment_and_broken_bytes_are_refused_not_guessed() {
        assert_eq!(decode(&[]).unwrap(), Assigned::new());
        assert_eq!(
            decode(&[0, 0, 0, 0, 0, 1, 0]),
            Err(AssignmentError::Truncated(6))
        );
        assert_eq!(
            decode(&[0, 9, 0, 0, 0, 0]),
            Err(AssignmentError::Version(9))
        );
        assert!(matches!(
            decode(&[0, 0, 0xff, 0xff, 0xff, 0xfe]),
            Err(AssignmentError::Negative(2))
        ));
        let huge = [0, 0, 0x7f, 0xff, 0xff, 0xff];
        assert!(matches!(decode(&huge), Err(AssignmentError::Truncated(_))));
    }
}
