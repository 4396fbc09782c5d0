//! A borrowing view of a Produce request frame (v3–v12), for the produce hot path.
//!
//! Why by hand, not the crate: kafka-protocol decodes a Produce request into owned
//! `Vec`s (topics, partitions) and maps (tagged fields) — allocations on every request
//! of the path that must allocate nothing in steady state (issue 10). This view checks
//! the whole frame once (every length and count bounded by the bytes that remain; errors,
//! never panics) and then walks it again on demand; records come out as slices of the
//! frame (no copy), names as `&str` into it.
//!
//! It is stricter than the crate, never looser: whatever it refuses (v13's topic ids,
//! a varint longer than 5 bytes, any malformation) goes to the crate's decoder, which
//! decides the answer — so a frame it accepts is one the crate accepts with the same
//! content (property-tested below against the crate's decoder on random requests).
use std::ops::Range;

use bytes::Bytes;

/// The versions this view reads (header v1 for v3–8, header v2 and compact fields from v9).
pub const VIEW_VERSIONS: std::ops::RangeInclusive<i16> = 3..=12;
const PRODUCE_API_KEY: i16 = 0;
const FIRST_FLEXIBLE_VERSION: i16 = 9;

/// Why the view does not read a frame (the crate's decoder then decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotViewable(pub &'static str);

/// A checked Produce request frame (see the module comment).
#[derive(Debug, Clone)]
pub struct ProduceRequestView {
    frame: Bytes,
    version: i16,
    correlation_id: i32,
    client_id: Option<Range<usize>>,
    transactional_id: Option<Range<usize>>,
    acks: i16,
    timeout_ms: i32,
    /// Where the topic array's count starts.
    topics_at: usize,
}

impl ProduceRequestView {
    /// Reads a whole request frame (header included, no length prefix). Only Produce
    /// v3–v12 is viewable.
    pub fn parse(frame: Bytes) -> Result<ProduceRequestView, NotViewable> {
        let mut r = Reader::new(&frame, 0);
        if r.i16()? != PRODUCE_API_KEY {
            return Err(NotViewable("not a Produce request"));
        }
        let version = r.i16()?;
        if !VIEW_VERSIONS.contains(&version) {
            return Err(NotViewable("version outside the view's"));
        }
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        let correlation_id = r.i32()?;
        // Header: client id (a classic nullable string in every header version), then
        // header v2's tagged fields.
        let client_id = r.classic_string()?;
        if let Some(id) = &client_id {
            std::str::from_utf8(&frame[id.clone()]).map_err(|_| NotViewable("client id is not UTF-8"))?;
        }
        if flexible {
            r.tagged_fields()?;
        }
        let transactional_id = r.string(flexible)?;
        if let Some(id) = &transactional_id {
            std::str::from_utf8(&frame[id.clone()]).map_err(|_| NotViewable("transactional id is not UTF-8"))?;
        }
        let acks = r.i16()?;
        let timeout_ms = r.i32()?;
        let topics_at = r.pos;
        let left = r.array_len(flexible)?;
        let mut topics = TopicIter { r, left, flexible };
        while let Some(topic) = topics.next_checked()? {
            let mut partitions = topic.partitions;
            while partitions.next_checked()?.is_some() {}
        }
        let mut r = topics.r;
        if flexible {
            r.tagged_fields()?;
        }
        // Bytes after the body are ignored, as Kafka (and `decode_request`) do.
        Ok(ProduceRequestView { frame, version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics_at })
    }

    pub fn version(&self) -> i16 {
        self.version
    }

    pub fn correlation_id(&self) -> i32 {
        self.correlation_id
    }

    pub fn acks(&self) -> i16 {
        self.acks
    }

    pub fn timeout_ms(&self) -> i32 {
        self.timeout_ms
    }

    /// The header's client id ("" when null, as Kafka's quotas take it).
    pub fn client_id(&self) -> &str {
        // Checked as UTF-8 by `parse`.
        self.client_id.as_ref().and_then(|r| std::str::from_utf8(&self.frame[r.clone()]).ok()).unwrap_or("")
    }

    /// The frame's length (what a producer quota counts).
    pub fn frame_len(&self) -> usize {
        self.frame.len()
    }

    pub fn transactional_id(&self) -> Option<&str> {
        // Checked as UTF-8 by `parse`.
        self.transactional_id.as_ref().and_then(|r| std::str::from_utf8(&self.frame[r.clone()]).ok())
    }

    /// The topics, in request order.
    pub fn topics(&self) -> TopicIter<'_> {
        let flexible = self.version >= FIRST_FLEXIBLE_VERSION;
        let mut r = Reader::new(&self.frame, self.topics_at);
        // `parse` read this count already: it cannot fail here.
        let left = r.array_len(flexible).unwrap_or(0);
        TopicIter { r, left, flexible }
    }

    /// The records of a partition, as a slice of the frame (no copy).
    pub fn records(&self, p: &PartitionView) -> Option<Bytes> {
        p.records.clone().map(|r| self.frame.slice(r))
    }
}

/// One topic of the request.
#[derive(Debug, Clone)]
pub struct TopicView<'a> {
    pub name: &'a str,
    pub partitions: PartitionIter<'a>,
}

/// One partition of a topic: its index and where its records are in the frame
/// (`ProduceRequestView::records` slices them out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    pub index: i32,
    records: Option<Range<usize>>,
}

#[derive(Debug, Clone)]
pub struct TopicIter<'a> {
    r: Reader<'a>,
    left: usize,
    flexible: bool,
}

impl<'a> TopicIter<'a> {
    /// The next topic; its partitions are walked over (and checked) so the reader stands
    /// at the topic after it.
    fn next_checked(&mut self) -> Result<Option<TopicView<'a>>, NotViewable> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let name = self.r.string(self.flexible)?.ok_or(NotViewable("null topic name"))?;
        let name = std::str::from_utf8(&self.r.buf[name]).map_err(|_| NotViewable("topic name is not UTF-8"))?;
        let left = self.r.array_len(self.flexible)?;
        let partitions = PartitionIter { r: self.r.clone(), left, flexible: self.flexible };
        let mut skip = partitions.clone();
        while skip.next_checked()?.is_some() {}
        self.r = skip.r;
        if self.flexible {
            self.r.tagged_fields()?;
        }
        Ok(Some(TopicView { name, partitions }))
    }
}

impl<'a> Iterator for TopicIter<'a> {
    type Item = TopicView<'a>;

    fn next(&mut self) -> Option<TopicView<'a>> {
        // Checked by `parse`: an error here is impossible; end the walk if it were not.
        let next = self.next_checked();
        debug_assert!(next.is_ok(), "a parsed view walks again without error");
        next.ok().flatten()
    }
}

#[derive(Debug, Clone)]
pub struct PartitionIter<'a> {
    r: Reader<'a>,
    left: usize,
    flexible: bool,
}

impl PartitionIter<'_> {
    fn next_checked(&mut self) -> Result<Option<PartitionView>, NotViewable> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let index = self.r.i32()?;
        let records = self.r.bytes(self.flexible)?;
        if self.flexible {
            self.r.tagged_fields()?;
        }
        Ok(Some(PartitionView { index, records }))
    }
}

impl Iterator for PartitionIter<'_> {
    type Item = PartitionView;

    fn next(&mut self) -> Option<PartitionView> {
        let next = self.next_checked();
        debug_assert!(next.is_ok(), "a parsed view walks again without error");
        next.ok().flatten()
    }
}

/// A cursor over the frame; every read checks the bytes that remain first.
#[derive(Debug, Clone)]
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], pos: usize) -> Reader<'a> {
        Reader { buf, pos }
    }

    fn take(&mut self, n: usize) -> Result<Range<usize>, NotViewable> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(NotViewable("field runs past the frame"))?;
        let range = self.pos..end;
        self.pos = end;
        Ok(range)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], NotViewable> {
        let r = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[r]);
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, NotViewable> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    fn i32(&mut self) -> Result<i32, NotViewable> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    /// An unsigned varint of at most 5 bytes that fits a u32 (longer ones are left to
    /// the crate).
    fn uvarint(&mut self) -> Result<u32, NotViewable> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let [b] = self.array::<1>()?;
            if i == 4 && b > 0x0f {
                return Err(NotViewable("varint overflows a u32"));
            }
            value |= u32::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(NotViewable("varint longer than 5 bytes"))
    }

    /// A classic (int16-length) nullable string.
    fn classic_string(&mut self) -> Result<Option<Range<usize>>, NotViewable> {
        match self.i16()? {
            -1 => Ok(None),
            n if n >= 0 => self.take(n as usize).map(Some),
            _ => Err(NotViewable("negative string length")),
        }
    }

    /// A nullable string: compact (varint length + 1) in flexible versions, else classic.
    fn string(&mut self, flexible: bool) -> Result<Option<Range<usize>>, NotViewable> {
        if !flexible {
            return self.classic_string();
        }
        match self.uvarint()? {
            0 => Ok(None),
            n => self.take(n as usize - 1).map(Some),
        }
    }

    /// Nullable bytes: compact in flexible versions, else int32-length.
    fn bytes(&mut self, flexible: bool) -> Result<Option<Range<usize>>, NotViewable> {
        if flexible {
            return match self.uvarint()? {
                0 => Ok(None),
                n => self.take(n as usize - 1).map(Some),
            };
        }
        match self.i32()? {
            -1 => Ok(None),
            n if n >= 0 => self.take(n as usize).map(Some),
            _ => Err(NotViewable("negative bytes length")),
        }
    }

    /// A (non-null) array's element count. Not trusted: each element is read (and
    /// bounded) in turn; a count beyond the bytes left is refused at once (an element
    /// takes at least one byte).
    fn array_len(&mut self, flexible: bool) -> Result<usize, NotViewable> {
        let n = if flexible {
            match self.uvarint()? {
                0 => return Err(NotViewable("null array")),
                n => n as usize - 1,
            }
        } else {
            usize::try_from(self.i32()?).map_err(|_| NotViewable("negative or null array"))?
        };
        if n > self.buf.len() - self.pos {
            return Err(NotViewable("array count exceeds the bytes left"));
        }
        Ok(n)
    }

    /// Tagged fields (flexible versions): skipped, the Produce request defines none.
    fn tagged_fields(&mut self) -> Result<(), NotViewable> {
        let n = self.uvarint()?;
        for _ in 0..n {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.take(size as usize)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::request::decode_request;
    use crate::protocol::request::tests::encode_req;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, ProduceRequest, RequestKind, TopicName, TransactionalId};
    use kafka_protocol::protocol::StrBytes;
    use proptest::prelude::*;

    type Content = (Option<String>, i16, i32, Vec<(String, Vec<(i32, Option<Vec<u8>>)>)>);

    fn crate_content(frame: Bytes) -> Option<(i32, Content)> {
        let d = decode_request(frame).ok()?;
        let RequestKind::Produce(p) = d.body else { return None };
        let topics = p
            .topic_data
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_data.iter().map(|pd| (pd.index, pd.records.as_ref().map(|r| r.to_vec()))).collect()))
            .collect();
        Some((d.header.correlation_id, (p.transactional_id.map(|t| t.0.to_string()), p.acks, p.timeout_ms, topics)))
    }

    fn view_content(v: &ProduceRequestView) -> (i32, Content) {
        let topics = v.topics().map(|t| (t.name.to_string(), t.partitions.map(|p| (p.index, v.records(&p).map(|r| r.to_vec()))).collect())).collect();
        (v.correlation_id(), (v.transactional_id().map(str::to_string), v.acks(), v.timeout_ms(), topics))
    }

    fn request(c: &Content) -> ProduceRequest {
        ProduceRequest::default()
            .with_transactional_id(c.0.as_deref().map(|s| TransactionalId(StrBytes::from_string(s.to_string()))))
            .with_acks(c.1)
            .with_timeout_ms(c.2)
            .with_topic_data(
                c.3.iter()
                    .map(|(name, parts)| {
                        TopicProduceData::default().with_name(TopicName(StrBytes::from_string(name.clone()))).with_partition_data(
                            parts.iter().map(|(i, r)| PartitionProduceData::default().with_index(*i).with_records(r.clone().map(Bytes::from))).collect(),
                        )
                    })
                    .collect(),
            )
    }

    fn content() -> impl Strategy<Value = Content> {
        let records = proptest::option::weighted(0.9, proptest::collection::vec(any::<u8>(), 0..300));
        let partition = (any::<i32>(), records);
        let topic = ("[a-z0-9._é-]{0,20}", proptest::collection::vec(partition, 0..4));
        (proptest::option::of("[a-z-]{0,10}"), any::<i16>(), any::<i32>(), proptest::collection::vec(topic, 0..4))
    }

    #[test]
    fn reads_what_the_crate_reads_in_every_view_version() {
        let c: Content = (Some("tx".into()), -1, 30_000, vec![("orders".into(), vec![(0, Some(vec![1, 2, 3])), (7, None)]), ("b".into(), vec![])]);
        for v in VIEW_VERSIONS {
            let frame = encode_req(ApiKey::Produce, v, 42, &request(&c));
            let view = ProduceRequestView::parse(frame.clone()).unwrap_or_else(|e| panic!("v{v}: {e:?}"));
            assert_eq!(view.version(), v);
            assert_eq!(Some(view_content(&view)), crate_content(frame), "v{v}");
        }
    }

    #[test]
    fn records_are_slices_of_the_frame() {
        let c: Content = (None, 1, 1, vec![("t".into(), vec![(0, Some(vec![9; 100]))])]);
        let frame = encode_req(ApiKey::Produce, 9, 1, &request(&c));
        let range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let view = ProduceRequestView::parse(frame).unwrap();
        let p = view.topics().next().unwrap().partitions.next().unwrap();
        let records = view.records(&p).unwrap();
        assert!(range.contains(&(records.as_ptr() as usize)), "records were copied");
    }

    #[test]
    fn other_apis_and_versions_are_left_to_the_crate() {
        let c: Content = (None, 1, 1, vec![]);
        assert!(ProduceRequestView::parse(encode_req(ApiKey::Produce, 13, 1, &request(&c))).is_err());
        let f = encode_req(ApiKey::Metadata, 12, 1, &kafka_protocol::messages::MetadataRequest::default());
        assert!(ProduceRequestView::parse(f).is_err());
        for n in 0..8 {
            assert!(ProduceRequestView::parse(Bytes::from(vec![0u8; n])).is_err());
        }
    }

    /// The fuzz corpus: its named seeds are frames as real clients send them, and every
    /// Produce one among them is read by the view; the rest are what the fuzzer kept, often
    /// malformed: whatever of them the view reads, it reads as the crate does, and what it
    /// refuses is left to the crate.
    #[test]
    fn reads_the_fuzz_corpus_frames_as_the_crate_does() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/request_decode");
        let (mut seeds_read, mut fuzzed_read) = (0, 0);
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            if bytes.len() < 6 {
                continue;
            }
            let frame = Bytes::from(bytes[4..].to_vec());
            let is_produce = frame[..2] == [0, 0];
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let real_client_seed = name.contains('_'); // what cmin keeps is named by its hash
            match ProduceRequestView::parse(frame.clone()) {
                Ok(view) => {
                    if real_client_seed {
                        seeds_read += 1;
                    } else {
                        fuzzed_read += 1;
                    }
                    assert_eq!(Some(view_content(&view)), crate_content(frame), "{}", path.display());
                }
                Err(e) => assert!(!(is_produce && real_client_seed), "{}: {e:?}", path.display()),
            }
        }
        assert!(seeds_read >= 2, "the named seeds hold Produce frames");
        assert!(fuzzed_read >= 1, "the fuzzer kept Produce frames the view reads");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..Default::default() })]

        /// On random requests of every view version: the view reads exactly what the crate's decoder reads.
        #[test]
        fn agrees_with_the_crate(c in content(), version in 3i16..=12, corr in any::<i32>()) {
            let frame = encode_req(ApiKey::Produce, version, corr, &request(&c));
            let view = ProduceRequestView::parse(frame.clone()).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(Some(view_content(&view)), crate_content(frame));
        }

        /// Damaged frames (cut, or a byte changed): the view never panics, and whatever it
        /// accepts the crate accepts with the same content.
        #[test]
        fn damaged_frames_are_never_read_differently(
            c in content(), version in 3i16..=12, cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(), byte in any::<u8>(), do_cut in any::<bool>()
        ) {
            let frame = encode_req(ApiKey::Produce, version, 5, &request(&c));
            let mut bytes = frame.to_vec();
            if do_cut {
                bytes.truncate(cut.index(bytes.len() + 1));
            } else {
                let i = flip.index(bytes.len());
                bytes[i] = byte;
            }
            let frame = Bytes::from(bytes);
            if let Ok(view) = ProduceRequestView::parse(frame.clone()) {
                prop_assert_eq!(Some(view_content(&view)), crate_content(frame));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(version in 3i16..=12, tail in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut f = vec![0, 0];
            f.extend_from_slice(&version.to_be_bytes());
            f.extend_from_slice(&tail);
            let frame = Bytes::from(f);
            if let Ok(view) = ProduceRequestView::parse(frame.clone()) {
                prop_assert_eq!(Some(view_content(&view)), crate_content(frame));
            }
        }
    }
}
