//! A slab whose ids are `(generation << 32) | index`: a freed slot's next occupant gets a new
//! generation, so old ids miss. Generations start at 1, so no id is ever 0.
//!
//! Indexes may start at a base ([`GenSlab::with_base`]): a cluster node hands out open ids
//! in a range of its own, and holds another node's opens (taken over or handed over, under
//! the ids their clients know) apart from its own slots.

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

#[derive(Debug)]
pub struct GenSlab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
    /// Largest index handed out plus one; ids must fit the caller's id width.
    max_slots: u32,
    /// Generations cycle through 1..=gen_max (narrow ids such as TreeId need a small range).
    gen_max: u32,
    /// Where each new slot's generations start, random per slab: ids of an earlier process
    /// (a durable handle from before a restart) do not name what this one hands out.
    seed: u32,
    /// The index of slot 0: this slab's ids have indexes `base..base + max_slots`.
    base: u32,
    /// Entries inserted under ids outside this slab's range ([`Self::insert_at`]); they count
    /// against `max_slots` with the rest.
    foreign: std::collections::HashMap<u64, T>,
}

impl<T> GenSlab<T> {
    /// `max_slots` bounds the number of live entries (and so the memory a client can pin).
    pub fn new(max_slots: u32) -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            max_slots,
            gen_max: u32::MAX,
            seed: rand::random(),
            base: 0,
            foreign: std::collections::HashMap::new(),
        }
    }

    /// The slab with its indexes starting at `base` (clamped so that every index fits 32
    /// bits).
    pub fn with_base(mut self, base: u32) -> Self {
        self.base = base.min(u32::MAX - self.max_slots);
        self
    }

    /// The slot of global index `index`, when it is in this slab's range.
    fn local(&self, index: u32) -> Option<u32> {
        index.checked_sub(self.base).filter(|i| *i < self.max_slots)
    }

    /// A new slot's generation before its first occupant (which gets the next one).
    fn first_generation(&self, index: u32) -> u32 {
        // Spread over the range, so neighbouring slots do not share a generation.
        self.seed.wrapping_add(index.wrapping_mul(0x9E37_79B9)) % self.gen_max
    }

    /// A slab whose generations stay within `1..=gen_max`.
    pub fn with_generations(max_slots: u32, gen_max: u32) -> Self {
        Self {
            gen_max: gen_max.max(1),
            ..Self::new(max_slots)
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Inserts and returns the id, or `None` when full.
    pub fn insert(&mut self, value: T) -> Option<u64> {
        self.insert_with(|_| value)
    }

    /// Inserts the value `make` builds from its id (for values that carry their own id).
    pub fn insert_with(&mut self, make: impl FnOnce(u64) -> T) -> Option<u64> {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len()).ok()?;
                if i >= self.max_slots {
                    return None;
                }
                let generation = self.first_generation(i);
                self.slots.push(Slot {
                    generation,
                    value: None,
                });
                i
            }
        };
        if self.len >= self.max_slots as usize {
            self.free.push(index);
            return None;
        }
        let base = self.base;
        let slot = self.slots.get_mut(index as usize)?;
        slot.generation = if slot.generation >= self.gen_max {
            1
        } else {
            slot.generation + 1
        };
        let id = (u64::from(slot.generation) << 32) | u64::from(base + index);
        slot.value = Some(make(id));
        self.len += 1;
        Some(id)
    }

    /// Inserts under a given id (an open restored with the FileId its client knows); false
    /// when the id's slot is taken, out of range, or its generation is not one this slab
    /// hands out.
    pub fn insert_at(&mut self, id: u64, value: T) -> bool {
        let (generation, global) = Self::split(id);
        if generation == 0 || generation > self.gen_max || self.len >= self.max_slots as usize {
            return false;
        }
        let Some(index32) = u32::try_from(global).ok().and_then(|g| self.local(g)) else {
            // Another slab's id (another cluster node's open): kept apart.
            if self.foreign.contains_key(&id) {
                return false;
            }
            self.foreign.insert(id, value);
            self.len += 1;
            return true;
        };
        let index = index32 as usize;
        while self.slots.len() <= index {
            let i = self.slots.len() as u32;
            let generation = self.first_generation(i);
            self.slots.push(Slot {
                generation,
                value: None,
            });
            self.free.push(i);
        }
        let Some(slot) = self.slots.get_mut(index) else {
            return false;
        };
        if slot.value.is_some() {
            return false;
        }
        self.free.retain(|i| *i != index32);
        slot.generation = generation;
        slot.value = Some(value);
        self.len += 1;
        true
    }

    fn split(id: u64) -> (u32, usize) {
        ((id >> 32) as u32, (id & 0xFFFF_FFFF) as usize)
    }

    /// The slot index of `id` in this slab's range, or `None` for another slab's id.
    fn slot_of(&self, id: u64) -> Option<usize> {
        let (_, global) = Self::split(id);
        let local = self.local(u32::try_from(global).ok()?)?;
        Some(local as usize)
    }

    pub fn get(&self, id: u64) -> Option<&T> {
        let Some(index) = self.slot_of(id) else {
            return self.foreign.get(&id);
        };
        let (generation, _) = Self::split(id);
        let slot = self.slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_ref()
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let Some(index) = self.slot_of(id) else {
            return self.foreign.get_mut(&id);
        };
        let (generation, _) = Self::split(id);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_mut()
    }

    pub fn remove(&mut self, id: u64) -> Option<T> {
        let Some(index) = self.slot_of(id) else {
            let v = self.foreign.remove(&id)?;
            self.len -= 1;
            return Some(v);
        };
        let (generation, _) = Self::split(id);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let v = slot.value.take()?;
        self.len -= 1;
        self.free.push(index as u32);
        Some(v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        let base = u64::from(self.base);
        let own = self.slots.iter().enumerate().filter_map(move |(i, s)| {
            s.value
                .as_ref()
                .map(|v| ((u64::from(s.generation) << 32) | (base + i as u64), v))
        });
        own.chain(self.foreign.iter().map(|(id, v)| (*id, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_goes_back_under_its_id_and_others_keep_away() {
        let mut s = GenSlab::new(8);
        let id = (7u64 << 32) | 5;
        assert!(s.insert_at(id, "restored"));
        assert!(!s.insert_at(id, "again"), "taken");
        assert!(!s.insert_at(5, "generation 0"));
        // Beyond this slab's range: another slab's id, held apart (and counted).
        assert!(s.insert_at((1 << 32) | 8, "beyond max_slots"));
        assert_eq!(s.remove((1 << 32) | 8), Some("beyond max_slots"));
        assert_eq!(s.get(id), Some(&"restored"));
        // The slots below it are free for ordinary inserts, which never land on it.
        let others: Vec<u64> = (0..7).map(|_| s.insert("x").unwrap()).collect();
        assert!(!others.contains(&id));
        assert_eq!(others.iter().filter(|o| *o & 0xFFFF_FFFF == 5).count(), 0);
        assert_eq!(s.insert("full"), None);
        assert_eq!(s.remove(id), Some("restored"));
        let next = s.insert("next").unwrap();
        assert_eq!(next & 0xFFFF_FFFF, 5);
        assert_ne!(next, id, "a new generation");
    }

    #[test]
    fn stale_ids_miss_after_reuse() {
        let mut s = GenSlab::new(4);
        let a = s.insert("a").unwrap();
        assert_ne!(a, 0);
        assert_eq!(s.get(a), Some(&"a"));
        assert_eq!(s.remove(a), Some("a"));
        let b = s.insert("b").unwrap();
        // Same slot, new generation.
        assert_eq!(a & 0xFFFF_FFFF, b & 0xFFFF_FFFF);
        assert_ne!(a, b);
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.len(), 1);
    }

    /// Two slabs (two processes, before and after a restart) hand out different ids, so a
    /// client's handle from before the restart names nothing of the new process's.
    #[test]
    fn a_new_slab_does_not_hand_out_an_earlier_ones_ids() {
        let mut a = GenSlab::new(4);
        let mut b = GenSlab::new(4);
        let ids_a: Vec<u64> = (0..4).map(|_| a.insert(()).unwrap()).collect();
        let ids_b: Vec<u64> = (0..4).map(|_| b.insert(()).unwrap()).collect();
        // Two random 32-bit seeds agree once in 2^32 runs.
        assert!(
            ids_a.iter().all(|id| !ids_b.contains(id)),
            "{ids_a:?} {ids_b:?}"
        );
        // Narrow generations stay in range.
        let mut t = GenSlab::with_generations(4, 0xFFFF);
        for _ in 0..4 {
            let id = t.insert(()).unwrap();
            assert!((1..=0xFFFF).contains(&(id >> 32)), "{id:#x}");
        }
    }

    /// Two cluster nodes' slabs hand out ids in ranges of their own, and each holds the
    /// other's under their own ids, apart from its slots.
    #[test]
    fn another_slabs_ids_are_held_apart() {
        let mut a = GenSlab::new(4).with_base(0);
        let mut b = GenSlab::new(4).with_base(1 << 22);
        let ida = a.insert("a").unwrap();
        let idb = b.insert("b").unwrap();
        assert_eq!(ida & 0xFFFF_FFFF, 0);
        assert_eq!(idb & 0xFFFF_FFFF, 1 << 22);
        // b's open handed to a: held under its id, while a's slot 0 stays a's.
        assert!(a.insert_at(idb, "from b"));
        assert!(!a.insert_at(idb, "twice"));
        assert_eq!(a.get(idb), Some(&"from b"));
        assert_eq!(a.get(ida), Some(&"a"));
        *a.get_mut(idb).unwrap() = "moved";
        assert_eq!(a.iter().count(), 2);
        assert_eq!(a.len(), 2);
        // The foreign entry counts against the cap.
        a.insert("c").unwrap();
        a.insert("d").unwrap();
        assert_eq!(a.insert("full"), None);
        assert!(!a.insert_at((9 << 32) | (2 << 22), "full"));
        assert_eq!(a.remove(idb), Some("moved"));
        assert_eq!(a.get(idb), None);
        assert!(a.insert("room again").is_some());
    }

    #[test]
    fn capacity_is_enforced_and_garbage_ids_miss() {
        let mut s = GenSlab::new(2);
        let a = s.insert(1).unwrap();
        s.insert(2).unwrap();
        assert_eq!(s.insert(3), None);
        s.remove(a);
        assert!(s.insert(3).is_some());
        assert_eq!(s.get(u64::MAX), None);
        assert_eq!(s.get(0), None);
        assert_eq!(s.iter().count(), 2);
    }
}
