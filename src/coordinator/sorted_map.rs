//! A map kept as one sorted vector: what a group holds per member and per committed
//! partition.
//!
//! A group has a handful of members and committed partitions, and a coordinator holds
//! many thousands of groups, most of them idle. A `BTreeMap` allocates a whole node (room
//! for 11 entries) for its first entry; this map holds exactly what it has, grows its
//! vector from one entry by doubling, and looks keys up by binary search. Its methods
//! are named and behave as `BTreeMap`'s (iteration in key order), so a group's code reads
//! the same with either.

use std::borrow::Borrow;

/// A map of `K` to `V` in one vector sorted by key (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortedMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap(Vec::new())
    }
}

impl<K: Ord, V> SortedMap<K, V> {
    /// An empty map (allocates nothing).
    pub(crate) const fn new() -> Self {
        SortedMap(Vec::new())
    }

    fn find<Q>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.0.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }

    /// The value of `key`.
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    /// The value of `key`, mutable.
    pub(crate) fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| &mut self.0[i].1)
    }

    /// True if `key` has a value.
    pub(crate) fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).is_ok()
    }

    /// Sets the value of `key`; the value it had.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                if self.0.len() == self.0.capacity() {
                    // 1, 2, 4, ...: a map of one entry holds one (Vec starts at four).
                    self.0.reserve_exact(self.0.len().max(1));
                }
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`; the value it had.
    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Ord + ?Sized,
    {
        self.find(key).ok().map(|i| self.0.remove(i).1)
    }

    /// Keeps only the entries `keep` is true of.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
    }

    /// How many entries.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there is no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Removes every entry (and frees the vector).
    pub(crate) fn clear(&mut self) {
        self.0 = Vec::new();
    }

    /// The entries in key order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + Clone {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The entries in key order, values mutable.
    pub(crate) fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (&K, &mut V)> {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// The keys in order.
    pub(crate) fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + Clone {
        self.0.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &V> + Clone {
        self.0.iter().map(|(_, v)| v)
    }

    /// The values in key order, mutable.
    pub(crate) fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> {
        self.0.iter_mut().map(|(_, v)| v)
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SortedMap<K, V> {
    /// The map of `entries`; of equal keys the last wins, as `BTreeMap`'s.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let mut all: Vec<(K, V)> = entries.into_iter().collect();
        // Stable: equal keys keep their order, and the last of each is kept below.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(K, V)> = Vec::with_capacity(all.len());
        for (k, v) in all {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = v,
                _ => out.push((k, v)),
            }
        }
        out.shrink_to_fit();
        SortedMap(out)
    }
}

impl<K, V> IntoIterator for SortedMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, K, V> IntoIterator for &'a SortedMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<K, V, Q> std::ops::Index<&Q> for SortedMap<K, V>
where
    K: Ord + Borrow<Q>,
    Q: Ord + ?Sized,
{
    type Output = V;

    /// The value of `key`; panics if it has none, as `BTreeMap`'s index does (callers
    /// index only keys they know are there).
    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("no entry for the key")
    }
}

#[cfg(test)]
mod tests {
    use super::SortedMap;
    use std::collections::BTreeMap;

    /// Every operation answers as `BTreeMap`'s over a mixed sequence.
    #[test]
    fn answers_as_a_btreemap() {
        let mut ours: SortedMap<String, u32> = SortedMap::new();
        let mut model: BTreeMap<String, u32> = BTreeMap::new();
        let mut x: u32 = 7;
        for step in 0..2000u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let key = format!("k{}", (x >> 8) % 50);
            match step % 5 {
                0 | 1 => assert_eq!(
                    ours.insert(key.clone(), step),
                    model.insert(key.clone(), step)
                ),
                2 => assert_eq!(ours.remove(key.as_str()), model.remove(key.as_str())),
                3 => {
                    if let (Some(a), Some(b)) = (ours.get_mut(key.as_str()), model.get_mut(&key)) {
                        *a += 1;
                        *b += 1;
                    }
                }
                _ => {
                    ours.retain(|_, v| *v % 7 != 0);
                    model.retain(|_, v| *v % 7 != 0);
                }
            }
            assert_eq!(ours.len(), model.len());
            assert_eq!(ours.contains_key(key.as_str()), model.contains_key(&key));
            assert_eq!(ours.get(key.as_str()), model.get(&key));
        }
        assert!(ours.iter().eq(model.iter()));
        assert!(ours.keys().rev().eq(model.keys().rev()));
        let rebuilt: SortedMap<String, u32> = model.clone().into_iter().rev().collect();
        assert!(rebuilt.into_iter().eq(model.into_iter()));
        ours.clear();
        assert!(ours.is_empty());
    }

    /// One entry takes room for one, not a `Vec`'s first four.
    #[test]
    fn one_entry_takes_room_for_one() {
        let mut m: SortedMap<u64, u64> = SortedMap::new();
        m.insert(1, 1);
        assert_eq!(m.0.capacity(), 1);
        m.insert(2, 2);
        m.insert(0, 0);
        assert_eq!(m.0.capacity(), 4);
        assert!(m.keys().copied().eq([0, 1, 2]));
        assert_eq!(m[&2], 2);
    }

    /// Of equal keys collected, the last wins.
    #[test]
    fn collecting_keeps_the_last_of_equal_keys() {
        let m: SortedMap<u8, &str> = [(2, "a"), (1, "b"), (2, "c")].into_iter().collect();
        assert!(m.iter().eq([(&1, &"b"), (&2, &"c")]));
    }
}
