//! smbq patch (third_party/README.md): the assembler's buffered chunks, taken smallest offset
//! first, as from upstream's `BinaryHeap`, with an in-order fast path.
//!
//! A bulk stream's frames arrive in order: each new chunk starts where the last one ended.
//! Upstream pushes every chunk into a heap and pops it again, a sift per datagram that was
//! about 5 % of a bulk receiver's CPU. Here a chunk that starts at or after the end of the last
//! one queued in order goes to the back of a `VecDeque` (`run`), whose chunks are then sorted
//! and disjoint; any other (a retransmission filling a gap, an overlap, a duplicate) goes to
//! the heap, as upstream. `pop` takes the smaller of the two heads, so the order is the
//! heap's, and a peer that sends out of order pays the heap's O(log n), never a shift of
//! the queue.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// What the queue needs of a chunk: its span of the stream.
pub(super) trait Span {
    fn start(&self) -> u64;
    fn end(&self) -> u64;
}

/// Chunks in the order of `T: Ord` taken greatest first, as a `BinaryHeap` pops them, where
/// `T`'s order puts a smaller start first.
#[derive(Debug)]
pub(super) struct ChunkQueue<T> {
    /// Sorted by start and disjoint: each starts at or after the end of the one before.
    run: VecDeque<T>,
    /// Everything else.
    heap: BinaryHeap<T>,
}

impl<T: Ord> Default for ChunkQueue<T> {
    fn default() -> Self {
        Self {
            run: VecDeque::new(),
            heap: BinaryHeap::new(),
        }
    }
}

impl<T: Ord + Span> ChunkQueue<T> {
    pub(super) fn push(&mut self, chunk: T) {
        match self.run.back() {
            Some(last) if chunk.start() < last.end() => self.heap.push(chunk),
            _ => self.run.push_back(chunk),
        }
    }

    /// Puts back a chunk `pop` returned, or what is left of it after its front was read.
    pub(super) fn unpop(&mut self, chunk: T) {
        match self.run.front() {
            Some(first) if chunk.end() > first.start() => self.heap.push(chunk),
            _ => self.run.push_front(chunk),
        }
    }

    /// Whether the next chunk comes from the run rather than the heap.
    fn run_first(&self) -> bool {
        match (self.run.front(), self.heap.peek()) {
            (Some(r), Some(h)) => r.cmp(h) != Ordering::Less,
            (r, _) => r.is_some(),
        }
    }

    /// The chunk `pop` would return.
    #[cfg(test)]
    pub(super) fn peek(&self) -> Option<&T> {
        match self.run_first() {
            true => self.run.front(),
            false => self.heap.peek(),
        }
    }

    /// Takes the greatest chunk by `T`'s order.
    pub(super) fn pop(&mut self) -> Option<T> {
        match self.run_first() {
            true => self.run.pop_front(),
            false => self.heap.pop(),
        }
    }

    /// Empties the queue into a vector sorted as `BinaryHeap::into_sorted_vec` sorts (least
    /// first), keeping the queue's allocations.
    pub(super) fn take_sorted(&mut self) -> Vec<T> {
        let mut all = Vec::with_capacity(self.len());
        all.extend(self.run.drain(..));
        all.extend(self.heap.drain());
        all.sort();
        all
    }
}

impl<T> ChunkQueue<T> {
    pub(super) fn len(&self) -> usize {
        self.run.len() + self.heap.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.run.is_empty() && self.heap.is_empty()
    }

    pub(super) fn clear(&mut self) {
        self.run.clear();
        self.heap.clear();
    }

    /// Every chunk, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.run.iter().chain(self.heap.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk as the assembler orders them: smaller start first, then the longer first.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct C {
        start: u64,
        len: u64,
        /// Tells apart chunks equal in order, to check none is lost or made up.
        tag: u32,
    }

    impl Ord for C {
        fn cmp(&self, other: &Self) -> Ordering {
            self.start
                .cmp(&other.start)
                .reverse()
                .then(self.len.cmp(&other.len))
        }
    }

    impl PartialOrd for C {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }

    impl Span for C {
        fn start(&self) -> u64 {
            self.start
        }
        fn end(&self) -> u64 {
            self.start + self.len
        }
    }

    /// A small deterministic generator (xorshift), so failures repeat.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Pops and peeks agree with a `BinaryHeap` holding the same chunks, whatever mix of
    /// in-order, out-of-order and overlapping chunks is pushed, and whatever is put back.
    #[test]
    fn takes_chunks_in_the_order_a_heap_does() {
        for seed in 1..=8u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut q = ChunkQueue::default();
            let mut model = BinaryHeap::new();
            let mut next = 0u64;
            for tag in 0..3_000u32 {
                match rng.below(10) {
                    // In order, the bulk case.
                    0..=4 => {
                        let len = 1 + rng.below(1_500);
                        let c = C {
                            start: next,
                            len,
                            tag,
                        };
                        next += len;
                        q.push(c);
                        model.push(c);
                    }
                    // Anywhere below what was sent: a retransmission or an overlap.
                    5 | 6 => {
                        let c = C {
                            start: rng.below(next + 1),
                            len: 1 + rng.below(3_000),
                            tag,
                        };
                        q.push(c);
                        model.push(c);
                    }
                    // A read of the next chunk.
                    7 | 8 => {
                        assert_eq!(
                            q.peek().map(|c| (c.start, c.len)),
                            model.peek().map(|c| (c.start, c.len))
                        );
                        let (got, want) = (q.pop(), model.pop());
                        assert_eq!(
                            got.map(|c| (c.start, c.len)),
                            want.map(|c| (c.start, c.len))
                        );
                        // A partial read puts the rest back.
                        let (Some(mut g), Some(mut w)) = (got, want) else {
                            continue;
                        };
                        if g.len > 1 && rng.below(2) == 0 {
                            let cut = 1 + rng.below(g.len - 1);
                            g.start += cut;
                            g.len -= cut;
                            w.start += cut;
                            w.len -= cut;
                            q.unpop(g);
                            model.push(w);
                        }
                    }
                    _ => {
                        let mut all: Vec<_> = q.take_sorted().iter().map(|c| c.tag).collect();
                        let mut want: Vec<_> = model.iter().map(|c| c.tag).collect();
                        all.sort();
                        want.sort();
                        assert_eq!(all, want, "seed {seed}");
                        for c in model.iter() {
                            q.push(*c);
                        }
                    }
                }
                assert_eq!(q.len(), model.len());
                assert_eq!(q.is_empty(), model.is_empty());
                assert_eq!(q.iter().count(), model.len());
                let mut run = q.run.iter();
                if let Some(mut prev) = run.next() {
                    for c in run {
                        assert!(c.start >= prev.end(), "the run stays sorted and disjoint");
                        prev = c;
                    }
                }
            }
        }
    }

    /// Chunks that arrive in order never touch the heap, and a gap filled late costs one
    /// heap entry, not a shift of the run.
    #[test]
    fn in_order_chunks_stay_out_of_the_heap() {
        let c = |start, len| C { start, len, tag: 0 };
        let mut q = ChunkQueue::default();
        for i in 0..100 {
            q.push(c(i * 10, 10));
        }
        assert_eq!((q.run.len(), q.heap.len()), (100, 0));
        let first = q.pop().map(|c| c.start);
        assert_eq!(first, Some(0));
        // The data after a lost packet keeps coming in order; the retransmission fills the gap.
        let mut q = ChunkQueue::default();
        q.push(c(0, 10));
        q.push(c(20, 10));
        q.push(c(30, 10));
        q.push(c(10, 10));
        assert_eq!((q.run.len(), q.heap.len()), (3, 1));
        let order: Vec<u64> = std::iter::from_fn(|| q.pop().map(|c| c.start)).collect();
        assert_eq!(order, vec![0, 10, 20, 30]);
        // What is left of a chunk after a partial read goes back to the front of the run.
        q.push(c(0, 10));
        q.push(c(10, 10));
        let mut first = q.pop().unwrap_or_else(|| unreachable!());
        first.start += 4;
        first.len -= 4;
        q.unpop(first);
        assert_eq!((q.run.len(), q.heap.len()), (2, 0));
        assert_eq!(q.pop().map(|c| c.start), Some(4));
    }
}
