//! The shard's response arena: small response buffers are carved out of one larger
//! chunk instead of each being its own allocation (issue 10: no allocation per request
//! on the produce and fetch paths in steady state).
//!
//! A buffer taken here shares the chunk (`BytesMut::split_off`: reference-counted, no
//! copy); the chunk is freed once every buffer cut from it is dropped, and a new one is
//! allocated when the current one runs out — one allocation per `CHUNK_BYTES` of
//! responses. Responses live until they are written to the socket, so a chunk is not
//! pinned for long. Per thread, so per shard: no locking, no sharing between shards.
use std::cell::RefCell;

use bytes::BytesMut;

/// Size of one chunk.
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Buffers larger than this are allocated on their own (a Metadata response of many
/// topics must not pin, or waste, a chunk).
pub const MAX_ARENA_BUFFER: usize = 4 * 1024;

thread_local! {
    static ARENA: RefCell<BytesMut> = RefCell::new(BytesMut::new());
}

/// An empty buffer with room for `capacity` bytes, from the arena when it is small.
/// Writing past `capacity` still works (the buffer then grows on its own).
pub fn response_buffer(capacity: usize) -> BytesMut {
    if capacity > MAX_ARENA_BUFFER {
        return BytesMut::with_capacity(capacity);
    }
    ARENA
        .try_with(|arena| {
            let mut arena = arena.borrow_mut();
            if arena.capacity() < capacity {
                *arena = BytesMut::with_capacity(CHUNK_BYTES);
            }
            debug_assert!(arena.is_empty(), "the arena only hands out capacity");
            let rest = arena.split_off(capacity);
            std::mem::replace(&mut *arena, rest)
        })
        .unwrap_or_else(|_| BytesMut::with_capacity(capacity))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    #[test]
    fn buffers_share_a_chunk_and_do_not_overlap() {
        let mut a = response_buffer(100);
        let mut b = response_buffer(100);
        assert!(a.capacity() >= 100 && b.capacity() >= 100);
        a.put_slice(&[1; 100]);
        b.put_slice(&[2; 100]);
        assert_eq!(&a[..], &[1; 100][..]);
        assert_eq!(&b[..], &[2; 100][..]);
        // Writing past the asked capacity grows the buffer without touching its neighbour.
        let mut c = response_buffer(10);
        let d = {
            let mut d = response_buffer(10);
            d.put_slice(&[4; 10]);
            d
        };
        c.put_slice(&[3; 500]);
        assert_eq!(&c[..], &[3; 500][..]);
        assert_eq!(&d[..], &[4; 10][..]);
        let big = response_buffer(MAX_ARENA_BUFFER + 1);
        assert!(big.capacity() > MAX_ARENA_BUFFER);
    }
}
