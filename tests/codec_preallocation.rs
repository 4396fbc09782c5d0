//! The vendored codec's preallocation for arrays read from the wire is bounded by the
//! bytes left (vendor/README.md, `shardlog patch`): a request whose array count is as
//! large as the bytes after it — the most the count check lets through — never makes the
//! decoder ask the allocator for more bytes than the frame holds, however large each
//! element is in memory. Its own test binary, because it counts allocations with a
//! global allocator (per thread, so other tests cannot disturb the figure).
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use shardlog::protocol::decode_request;

struct LargestAllocation;

thread_local! {
    static LARGEST_BYTES: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged; the thread-local
// only records sizes (const-initialised, no destructor, so touching it never allocates).
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST_BYTES.try_with(|l| l.set(l.get().max(layout.size())));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST_BYTES.try_with(|l| l.set(l.get().max(new_size)));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// Decodes `frame` and returns the largest single allocation it asked for.
fn largest_allocation_while_decoding(frame: Bytes) -> usize {
    LARGEST_BYTES.with(|l| l.set(0));
    let result = decode_request(frame);
    assert!(result.is_err(), "the elements after the count are garbage: decoding must fail");
    LARGEST_BYTES.with(|l| l.get())
}

const ELEMENTS: usize = 1 << 20;

/// Produce v3 (non-flexible, `Array`): topic_data count = the bytes after it, which are
/// 0xff (a null topic name: the first element fails after the Vec was preallocated).
#[test]
fn array_count_as_large_as_the_frame_reserves_at_most_the_frame() {
    let mut b = BytesMut::new();
    b.put_i16(0); // Produce
    b.put_i16(3);
    b.put_i32(7); // correlation id
    b.put_i16(-1); // client id: null
    b.put_i16(-1); // transactional id: null
    b.put_i16(1); // acks
    b.put_i32(1000); // timeout
    b.put_i32(ELEMENTS as i32); // topic_data count
    b.put_bytes(0xff, ELEMENTS);
    let frame_len = b.len();
    let largest = largest_allocation_while_decoding(b.freeze());
    // Unpatched, this is ELEMENTS × size_of::<TopicProduceData>() (over 100 MiB).
    assert!(largest <= frame_len, "decoder asked for {largest} bytes for a frame of {frame_len}");
}

/// Produce v9 (flexible, `CompactArray`): the same with a varint count.
#[test]
fn compact_array_count_as_large_as_the_frame_reserves_at_most_the_frame() {
    let mut b = BytesMut::new();
    b.put_i16(0); // Produce
    b.put_i16(9);
    b.put_i32(7); // correlation id
    b.put_i16(-1); // client id: null (header v2 keeps the i16 string)
    b.put_u8(0); // header tagged fields
    b.put_u8(0); // transactional id: null (compact)
    b.put_i16(1); // acks
    b.put_i32(1000); // timeout
    let mut count = ELEMENTS as u32 + 1; // compact arrays encode count + 1
    while count >= 0x80 {
        b.put_u8((count as u8) | 0x80);
        count >>= 7;
    }
    b.put_u8(count as u8);
    b.put_bytes(0xff, ELEMENTS);
    let frame_len = b.len();
    let largest = largest_allocation_while_decoding(b.freeze());
    assert!(largest <= frame_len, "decoder asked for {largest} bytes for a frame of {frame_len}");
}

/// Counts are checked against each element's minimum wire size: N bytes cannot hold more
/// than N / 4 i32s, so OffsetFetch v1's partition_indexes count of N followed by N bytes
/// is refused at the count, before anything is reserved for it.
#[test]
fn i32_array_count_is_checked_against_four_bytes_per_element() {
    let mut b = BytesMut::new();
    b.put_i16(9); // OffsetFetch
    b.put_i16(1);
    b.put_i32(7); // correlation id
    b.put_i16(-1); // client id: null
    b.put_i16(1); // group id "g"
    b.put_u8(b'g');
    b.put_i32(1); // one topic
    b.put_i16(1); // name "t"
    b.put_u8(b't');
    b.put_i32(1000); // partition_indexes count
    b.put_bytes(0, 1000); // room for 250 of them
    let err = decode_request(b.freeze()).expect_err("1000 i32s do not fit 1000 bytes");
    let text = err.to_string();
    assert!(text.contains("Array length 1000 exceeds"), "refused at the count, not after decoding: {text}");
}

#[test]
fn preallocation_capacity_never_exceeds_the_bytes_left() {
    use kafka_protocol::protocol::preallocation_capacity;
    assert_eq!(preallocation_capacity::<u8>(10, 100), 10);
    assert_eq!(preallocation_capacity::<u8>(1000, 100), 100);
    assert_eq!(preallocation_capacity::<[u8; 200]>(1000, 1000), 5);
    assert_eq!(preallocation_capacity::<[u8; 200]>(1000, 100), 0);
    assert_eq!(preallocation_capacity::<()>(1000, 100), 100, "zero-sized elements cost nothing; the count is still bounded");
    for (count, left) in [(0usize, 0usize), (1 << 30, 1 << 20), (5, 1 << 20)] {
        let cap = preallocation_capacity::<[u64; 16]>(count, left);
        assert!(cap <= count && cap * std::mem::size_of::<[u64; 16]>() <= left);
    }
}
