//! A slab whose ids are `(generation << 32) | index`: a freed slot's next occupant gets a new
//! generation, so old ids miss. Generations start at 1, so no id is ever 0.

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
        }
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
        let slot = self.slots.get_mut(index as usize)?;
        slot.generation = if slot.generation >= self.gen_max {
            1
        } else {
            slot.generation + 1
        };
        let id = (u64::from(slot.generation) << 32) | u64::from(index);
        slot.value = Some(make(id));
        self.len += 1;
        Some(id)
    }

    /// Inserts under a given id (an open restored with the FileId its client knows); false
    /// when the id's slot is taken, out of range, or its generation is not one this slab
    /// hands out.
    pub fn insert_at(&mut self, id: u64, value: T) -> bool {
        let (generation, index) = Self::split(id);
        let Ok(index32) = u32::try_from(index) else {
            return false;
        };
        if generation == 0 || generation > self.gen_max || index32 >= self.max_slots {
            return false;
        }
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

    pub fn get(&self, id: u64) -> Option<&T> {
        let (generation, index) = Self::split(id);
        let slot = self.slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_ref()
    }

    pub fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let (generation, index) = Self::split(id);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_mut()
    }

    pub fn remove(&mut self, id: u64) -> Option<T> {
        let (generation, index) = Self::split(id);
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
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.value
                .as_ref()
                .map(|v| ((u64::from(s.generation) << 32) | i as u64, v))
        })
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
        assert!(!s.insert_at((1 << 32) | 8, "beyond max_slots"));
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
