//! smbq patch (third_party/README.md): the packets of one space that are sent and not yet
//! acknowledged or lost, in a queue ordered by packet number.
//!
//! Upstream keeps them in a `BTreeMap<u64, SentPacket>`. Packet numbers only grow, so every
//! insert is at the back and most removals (acknowledgements, losses) are at or near the front:
//! a queue does both without a tree's node splits and merges, which took about a tenth of a bulk
//! sender's CPU. An entry removed from the middle leaves a hole until the front reaches it, and
//! holes are compacted away once they outnumber the packets held, and the allocation shrinks
//! once it is far above what is held, so memory stays proportional to the packets held, as
//! with the map (`PacketSpace::sent` forgets old non-ACK-eliciting
//! packets from the middle to bound them).

use std::collections::VecDeque;
use std::ops::{Bound, Index, RangeBounds};

use super::spaces::SentPacket;

#[derive(Debug, Default)]
pub(super) struct SentPackets {
    /// Packet number and, until removed, the packet; packet numbers strictly increase.
    entries: VecDeque<(u64, Option<SentPacket>)>,
    /// Entries that still hold a packet.
    live: usize,
}

impl SentPackets {
    /// Where `number` is, or would be inserted.
    fn position(&self, number: u64) -> Result<usize, usize> {
        self.entries.binary_search_by_key(&number, |e| e.0)
    }

    /// The first entry at or after the start of `range`.
    fn start_of(&self, range: &impl RangeBounds<u64>) -> usize {
        match range.start_bound() {
            Bound::Included(&n) => self.entries.partition_point(|e| e.0 < n),
            Bound::Excluded(&n) => self.entries.partition_point(|e| e.0 <= n),
            Bound::Unbounded => 0,
        }
    }

    pub(super) fn insert(&mut self, number: u64, packet: SentPacket) {
        match self.entries.back() {
            Some(&(last, _)) if last >= number => match self.position(number) {
                Ok(i) => {
                    if self.entries[i].1.is_none() {
                        self.live += 1;
                    }
                    self.entries[i].1 = Some(packet);
                }
                Err(i) => {
                    self.entries.insert(i, (number, Some(packet)));
                    self.live += 1;
                }
            },
            _ => {
                self.entries.push_back((number, Some(packet)));
                self.live += 1;
            }
        }
    }

    pub(super) fn get(&self, number: &u64) -> Option<&SentPacket> {
        let i = self.position(*number).ok()?;
        self.entries[i].1.as_ref()
    }

    pub(super) fn remove(&mut self, number: &u64) -> Option<SentPacket> {
        let i = self.position(*number).ok()?;
        let packet = self.entries[i].1.take()?;
        self.live -= 1;
        while matches!(self.entries.front(), Some((_, None))) {
            self.entries.pop_front();
        }
        while matches!(self.entries.back(), Some((_, None))) {
            self.entries.pop_back();
        }
        if self.entries.len() > 2 * self.live + 64 {
            self.entries.retain(|e| e.1.is_some());
        }
        // A burst's peak allocation is given back once the queue is far below it.
        if self.entries.capacity() > 4 * self.entries.len() + 1024 {
            self.entries.shrink_to(2 * self.entries.len() + 64);
        }
        Some(packet)
    }

    /// The packets whose numbers are in `range`, in order.
    pub(super) fn range(
        &self,
        range: impl RangeBounds<u64>,
    ) -> impl Iterator<Item = (&u64, &SentPacket)> {
        let start = self.start_of(&range);
        self.entries
            .range(start..)
            .take_while(move |e| range.contains(&e.0))
            .filter_map(|(n, p)| Some((n, p.as_ref()?)))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &SentPacket> {
        self.entries.iter().filter_map(|e| e.1.as_ref())
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut SentPacket> {
        self.entries.iter_mut().filter_map(|e| e.1.as_mut())
    }

    pub(super) fn into_values(self) -> impl Iterator<Item = SentPacket> {
        self.entries.into_iter().filter_map(|e| e.1)
    }
}

impl Index<&u64> for SentPackets {
    type Output = SentPacket;
    fn index(&self, number: &u64) -> &SentPacket {
        self.get(number).expect("no sent packet with this number")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Instant;

    use super::*;

    fn packet(size: u16) -> SentPacket {
        SentPacket {
            path_generation: 0,
            time_sent: Instant::now(),
            size,
            ack_eliciting: true,
            largest_acked: None,
            retransmits: Default::default(),
            stream_frames: Default::default(),
        }
    }

    fn sizes<'a>(it: impl Iterator<Item = (&'a u64, &'a SentPacket)>) -> Vec<(u64, u16)> {
        it.map(|(n, p)| (*n, p.size)).collect()
    }

    /// Every operation agrees with upstream's BTreeMap, over a long run of sends with skipped
    /// numbers, acknowledgements in ranges and out of order, and removals from the middle.
    #[test]
    fn agrees_with_a_btreemap() {
        let mut model = BTreeMap::new();
        let mut queue = SentPackets::default();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut next = 0;
        for step in 0..20_000u64 {
            match rand(10) {
                0..=4 => {
                    next += 1 + u64::from(rand(8) == 0); // a skipped number now and then
                    let size = (step % 1500) as u16;
                    model.insert(next, size);
                    queue.insert(next, packet(size));
                }
                5..=7 => {
                    let number = next.saturating_sub(rand(64));
                    assert_eq!(
                        queue.remove(&number).map(|p| p.size),
                        model.remove(&number)
                    );
                }
                8 => {
                    let lo = next.saturating_sub(rand(200));
                    let hi = lo + rand(50);
                    let want: Vec<_> = model.range(lo..hi).map(|(n, s)| (*n, *s)).collect();
                    assert_eq!(sizes(queue.range(lo..hi)), want);
                    let want: Vec<_> = model
                        .range((Bound::Excluded(lo), Bound::Unbounded))
                        .map(|(n, s)| (*n, *s))
                        .collect();
                    assert_eq!(
                        sizes(queue.range((Bound::Excluded(lo), Bound::Unbounded))),
                        want
                    );
                }
                _ => {
                    let number = next.saturating_sub(rand(32));
                    assert_eq!(queue.get(&number).map(|p| p.size), model.get(&number).copied());
                }
            }
            assert_eq!(queue.live, model.len());
            assert!(queue.entries.len() <= 2 * queue.live + 64);
        }
        let all: Vec<_> = model.values().copied().collect();
        assert_eq!(queue.values().map(|p| p.size).collect::<Vec<_>>(), all);
        assert_eq!(queue.into_values().map(|p| p.size).collect::<Vec<_>>(), all);
    }

    /// Removing from the middle while the front stays (an old packet never acknowledged, and
    /// a tail of non-ACK-eliciting ones forgotten one by one) keeps memory bounded.
    #[test]
    fn holes_behind_an_old_packet_are_compacted() {
        let mut queue = SentPackets::default();
        queue.insert(0, packet(1));
        for n in 1..100_000 {
            queue.insert(n, packet(0));
            if n > 1_000 {
                assert!(queue.remove(&(n - 1_000)).is_some());
            }
            assert!(queue.entries.len() <= 2 * queue.live + 64);
        }
        assert_eq!(queue.live, 1_001);
        assert_eq!(queue.get(&0).map(|p| p.size), Some(1));
    }

    /// The allocation of a burst of packets in flight is given back as they are acknowledged.
    #[test]
    fn a_bursts_allocation_is_given_back() {
        let mut queue = SentPackets::default();
        for n in 0..50_000 {
            queue.insert(n, packet(1));
        }
        let peak = queue.entries.capacity();
        for n in 0..49_990 {
            assert!(queue.remove(&n).is_some());
        }
        assert_eq!(queue.live, 10);
        assert!(
            queue.entries.capacity() <= 4 * queue.entries.len() + 1024,
            "{} of {peak} kept for {} entries",
            queue.entries.capacity(),
            queue.entries.len()
        );
    }

    /// A number at or below the last one inserted still lands in order.
    #[test]
    fn out_of_order_inserts_stay_ordered() {
        let mut queue = SentPackets::default();
        for n in [5, 9, 7, 1, 9] {
            queue.insert(n, packet(n as u16));
        }
        assert_eq!(
            sizes(queue.range(..)),
            vec![(1, 1), (5, 5), (7, 7), (9, 9)]
        );
        assert_eq!(queue.live, 4);
    }
}
