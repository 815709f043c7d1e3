//! A slab of in-flight operations keyed by a generation-tagged `u64`.
//!
//! The key is what the engine puts in an SQE's `user_data`. Its low 32 bits are
//! the slot index, the next 23 bits a generation counter bumped each time a slot
//! is reused, so a stale completion can never be attributed to a newer
//! operation. Bits 55-63 are always clear: bit 63 marks the engine's own
//! pointer-free SQEs (see `ring::INTERNAL_USER_DATA`), bits 55-62 number the
//! SQEs of one operation that submits a linked chain (see `ring::STEP_SHIFT`).

const GENERATION_MASK: u32 = 0x7F_FFFF;

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Slab<T> {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Slab {
            slots: Vec::with_capacity(capacity),
            free: Vec::new(),
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stores `value` and returns its key.
    ///
    /// Panics if more than 2^32 values are live at once (memory would run out first).
    pub(crate) fn insert(&mut self, value: T) -> u64 {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.slots.len()).expect("slab index fits in u32");
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                index
            }
        };
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.value.is_none());
        slot.value = Some(value);
        self.len += 1;
        (u64::from(slot.generation) << 32) | u64::from(index)
    }

    fn slot_of(&self, key: u64) -> Option<usize> {
        let index = (key & 0xFFFF_FFFF) as usize;
        let generation = (key >> 32) as u32;
        match self.slots.get(index) {
            Some(slot) if slot.generation == generation && slot.value.is_some() => Some(index),
            _ => None,
        }
    }

    pub(crate) fn contains(&self, key: u64) -> bool {
        self.slot_of(key).is_some()
    }

    pub(crate) fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        let index = self.slot_of(key)?;
        self.slots[index].value.as_mut()
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<T> {
        let index = self.slot_of(key)?;
        let slot = &mut self.slots[index];
        let value = slot.value.take();
        slot.generation = slot.generation.wrapping_add(1) & GENERATION_MASK;
        self.free.push(index as u32);
        self.len -= 1;
        value
    }

    /// Keys and values of all live entries.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.slots.iter().enumerate().filter_map(|(index, slot)| {
            slot.value
                .as_ref()
                .map(|value| ((u64::from(slot.generation) << 32) | index as u64, value))
        })
    }

    /// Removes every live value and hands it to `f`.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(T)) {
        for slot in &mut self.slots {
            if let Some(value) = slot.value.take() {
                f(value);
            }
        }
        self.slots.clear();
        self.free.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_key_is_not_found_after_its_slot_is_reused() {
        let mut slab = Slab::with_capacity(1);
        let first = slab.insert("a");
        assert_eq!(slab.remove(first), Some("a"));
        let second = slab.insert("b");
        assert_ne!(first, second);
        assert!(slab.get_mut(first).is_none());
        assert_eq!(slab.get_mut(second), Some(&mut "b"));
        assert_eq!(slab.len(), 1);
    }

    #[test]
    fn keys_never_have_the_reserved_top_nine_bits() {
        let mut slab = Slab::with_capacity(1);
        for _ in 0..1000 {
            let key = slab.insert(());
            assert_eq!(key >> 55, 0);
            slab.remove(key);
        }
        // Also once the generation wraps.
        slab.slots[0].generation = GENERATION_MASK;
        let key = slab.insert(());
        assert_eq!(key >> 55, 0);
        slab.remove(key);
        assert_eq!(slab.slots[0].generation, 0);
    }
}
