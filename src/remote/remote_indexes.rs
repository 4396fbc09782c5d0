//! The `.indexes` object of a remote segment: what a reader needs besides the batches.
//! - the offset index: (a batch's base offset, its position in the `.log` object), one
//!   entry per `OFFSET_INDEX_INTERVAL` bytes, so a fetch reads a range near its offset;
//! - the time index: (largest timestamp so far, the offset of the batch that reached it);
//! - the leader epochs of the log up to the segment's end (every entry, as Kafka's
//!   leader-epoch checkpoint in LogSegmentData), for a follower starting from the remote log;
//! - the producer snapshot taken when the segment was sealed (the local `.snapshot` file);
//! - the transaction index: the aborted transactions overlapping the segment, so a
//!   read_committed fetch of remote data reports them as a local one does.
//!
//! Format: magic "SLRI", version (u16 LE), payload length (u32 LE), CRC-32C of the payload
//! (u32 LE), then the payload as JSON. Invariant 3 holds for remote objects too: a reader
//! refuses an object whose frame or checksum is wrong.
use serde::{Deserialize, Serialize};

const MAGIC: &[u8; 4] = b"SLRI";
const VERSION: u16 = 1;
const FRAME_LEN: usize = 4 + 2 + 4 + 4;
/// Largest `.indexes` object read back (a 1 GiB segment's is well under 1 MiB; the
/// producer snapshot is bounded by the producer-id table).
pub const MAX_INDEXES_BYTES: usize = 64 << 20;
/// Bytes of batches between two offset index entries.
pub const OFFSET_INDEX_INTERVAL: u64 = 256 << 10;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteIndexes {
    pub offset_index: Vec<(i64, u64)>,
    pub time_index: Vec<(i64, i64)>,
    pub leader_epochs: Vec<(i32, i64)>,
    #[serde(with = "base64_bytes")]
    pub producer_snapshot: Vec<u8>,
    /// Kafka's remote transaction index: the aborted transactions overlapping the
    /// segment. None in objects written before it existed (a read_committed read of their
    /// transactional batches is refused: which aborted is unknown).
    #[serde(default)]
    pub aborted_transactions: Option<Vec<RemoteAbortedTxn>>,
}

/// One aborted transaction: its producer, first offset and marker (last) offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteAbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
}

impl RemoteIndexes {
    /// About what the decoded object takes in memory (the index cache's measure).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.offset_index.len() * 16
            + self.time_index.len() * 16
            + self.leader_epochs.len() * 16
            + self.producer_snapshot.len()
            + self.aborted_transactions.as_ref().map_or(0, |a| a.len() * 24)
    }

    /// The aborted transactions a read of offsets [`from`, `to`] must report (marker at
    /// or after `from`, first offset at or before `to`), or None without a transaction
    /// index.
    pub fn aborted_between(&self, from: i64, to: i64) -> Option<Vec<RemoteAbortedTxn>> {
        let all = self.aborted_transactions.as_ref()?;
        Some(all.iter().filter(|a| a.last_offset >= from && a.first_offset <= to).copied().collect())
    }

    pub fn encode(&self) -> Vec<u8> {
        // Serializing plain integers, vectors and a string cannot fail.
        let payload = serde_json::to_vec(self).expect("RemoteIndexes serializes");
        let mut out = Vec::with_capacity(FRAME_LEN + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<RemoteIndexes, String> {
        if bytes.len() < FRAME_LEN || &bytes[..4] != MAGIC {
            return Err("not a remote indexes object (magic)".into());
        }
        let version = u16::from_le_bytes([bytes[4], bytes[5]]);
        if version != VERSION {
            return Err(format!("remote indexes version {version}, this broker reads {VERSION}"));
        }
        let len = u32::from_le_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]) as usize;
        let crc = u32::from_le_bytes([bytes[10], bytes[11], bytes[12], bytes[13]]);
        let payload = &bytes[FRAME_LEN..];
        if payload.len() != len {
            return Err(format!("remote indexes object holds {} payload bytes, its frame says {len}", payload.len()));
        }
        if crc32c::crc32c(payload) != crc {
            return Err("remote indexes object checksum mismatch".into());
        }
        serde_json::from_slice(payload).map_err(|e| format!("remote indexes object: {e}"))
    }

    /// The position to read from for `offset`: that of the last indexed batch at or
    /// below it (0 when none is).
    pub fn position_for(&self, offset: i64) -> u64 {
        let at = self.offset_index.partition_point(|&(o, _)| o <= offset);
        if at == 0 {
            0
        } else {
            self.offset_index[at - 1].1
        }
    }
}

impl RemoteIndexes {
    /// Where a search for the first record at or after `timestamp` starts: the indexed
    /// batch before the first time-index entry whose running largest timestamp reaches it
    /// (every batch up to that one is older), or the last indexed batch when none does (a
    /// later batch may).
    pub fn scan_start_for_timestamp(&self, timestamp: i64) -> Option<i64> {
        let reached = self.time_index.iter().position(|&(max, _)| max >= timestamp);
        let at = match reached {
            Some(0) => 0,
            Some(k) => k - 1,
            None => self.time_index.len().checked_sub(1)?,
        };
        self.time_index.get(at).map(|&(_, offset)| offset)
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let idx = RemoteIndexes {
            offset_index: vec![(0, 0), (100, 300_000), (250, 600_000)],
            time_index: vec![(1_000, 0), (2_000, 120)],
            leader_epochs: vec![(0, 0), (3, 80)],
            producer_snapshot: vec![1, 2, 3, 0, 255],
            aborted_transactions: Some(vec![RemoteAbortedTxn { producer_id: 4, first_offset: 10, last_offset: 90 }]),
        };
        let bytes = idx.encode();
        assert_eq!(RemoteIndexes::decode(&bytes), Ok(idx.clone()));
        assert_eq!((idx.position_for(0), idx.position_for(99), idx.position_for(100), idx.position_for(1_000)), (0, 0, 300_000, 600_000));
        // Time index (1000 at offset 0, 2000 at 120): 1500 is first reached by the batch
        // at 120 or one before it, after the one at 0; 2500 may be past the last entry.
        assert_eq!(
            (idx.scan_start_for_timestamp(500), idx.scan_start_for_timestamp(1_500), idx.scan_start_for_timestamp(2_500)),
            (Some(0), Some(0), Some(120))
        );
        assert_eq!(RemoteIndexes::default().scan_start_for_timestamp(1), None);
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(RemoteIndexes::decode(&flipped).unwrap_err().contains("checksum"));
        assert!(RemoteIndexes::decode(&bytes[..bytes.len() - 1]).unwrap_err().contains("payload bytes"));
        assert!(RemoteIndexes::decode(b"XXXX").unwrap_err().contains("magic"));
    }

    #[test]
    fn aborted_transactions_of_a_read_overlap_it() {
        let a = |first, last| RemoteAbortedTxn { producer_id: 7, first_offset: first, last_offset: last };
        let i = RemoteIndexes { aborted_transactions: Some(vec![a(0, 10), a(5, 40), a(50, 60)]), ..Default::default() };
        assert_eq!(i.aborted_between(20, 45), Some(vec![a(5, 40)]));
        assert_eq!(i.aborted_between(10, 50), Some(vec![a(0, 10), a(5, 40), a(50, 60)]));
        assert_eq!(i.aborted_between(61, 90), Some(vec![]));
        assert_eq!(RemoteIndexes::default().aborted_between(0, 100), None, "no transaction index");
        // An object written before the index existed decodes without one.
        let old = RemoteIndexes::decode(&RemoteIndexes { offset_index: vec![(0, 0)], ..Default::default() }.encode()).expect("decodes");
        assert_eq!(old.aborted_transactions, None);
    }
}
