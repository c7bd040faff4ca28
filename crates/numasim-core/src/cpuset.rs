//! `CpuSet`: a fixed-size set of CPU (or node) ids, the kernel's `cpumask`.
//!
//! A thin wrapper over [`fixedbitset::FixedBitSet`] with the few mask operations the domain
//! builders need (`cpumask_or`, `cpumask_subset`, `cpumask_equal`, `for_each_cpu_wrap`), and the
//! kernel's cpulist form of any ids ([`cpulist`]).
//! Iteration is always in increasing id order, so results never depend on hashing.

use fixedbitset::FixedBitSet;

/// A set of ids below a fixed capacity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpuSet(FixedBitSet);

impl CpuSet {
    /// An empty set able to hold ids `0..capacity`.
    pub fn empty(capacity: usize) -> Self {
        Self(FixedBitSet::with_capacity(capacity))
    }

    /// The set of the given ids.
    pub fn from_ids(capacity: usize, ids: impl IntoIterator<Item = usize>) -> Self {
        let mut set = Self::empty(capacity);
        for id in ids {
            set.insert(id);
        }
        set
    }

    /// Adds `id`.
    pub fn insert(&mut self, id: usize) {
        self.0.insert(id);
    }

    /// Adds (`on`) or removes `id`.
    pub fn set(&mut self, id: usize, on: bool) {
        self.0.set(id, on);
    }

    /// Whether the two sets have no id in common (`!cpumask_intersects`).
    pub fn is_disjoint(&self, other: &Self) -> bool {
        self.0.is_disjoint(&other.0)
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: usize) -> bool {
        self.0.contains(id)
    }

    /// Adds every id of `other` (`cpumask_or`).
    pub fn union_with(&mut self, other: &Self) {
        self.0.union_with(&other.0);
    }

    /// Whether every id of `self` is in `other` (`cpumask_subset`).
    pub fn is_subset(&self, other: &Self) -> bool {
        self.0.is_subset(&other.0)
    }

    /// Number of ids in the set (`cpumask_weight`).
    pub fn len(&self) -> usize {
        self.0.count_ones(..)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_clear()
    }

    /// The smallest id, if any (`cpumask_first`).
    pub fn first(&self) -> Option<usize> {
        self.0.ones().next()
    }

    /// Ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.ones()
    }

    /// Ids starting at `start` and wrapping around (`for_each_cpu_wrap`).
    pub fn iter_wrap(&self, start: usize) -> impl Iterator<Item = usize> + '_ {
        self.0
            .ones()
            .filter(move |&id| id >= start)
            .chain(self.0.ones().filter(move |&id| id < start))
    }

    /// The kernel's cpulist form (`/sys/devices/system/node/node0/cpulist`): `"0-3,8"`, or
    /// `"-"` for the empty set.
    pub fn to_cpulist(&self) -> String {
        let list = cpulist(self.iter());
        if list.is_empty() {
            "-".to_string()
        } else {
            list
        }
    }

    /// Ids as a sorted vector.
    pub fn to_vec(&self) -> Vec<usize> {
        self.iter().collect()
    }
}

/// The kernel's cpulist form of `ids`, each run of consecutive ids as a range: `"0-3,8"`
/// (empty when there is none).
pub fn cpulist(ids: impl IntoIterator<Item = usize>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut ids = ids.into_iter().peekable();
    while let Some(start) = ids.next() {
        let mut end = start;
        while ids.peek() == Some(&(end + 1)) {
            end = ids.next().expect("peeked");
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

/// Serialised as the sorted array of its ids (the CPU lists of `topology --json`).
impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_starts_at_start_and_visits_everything_once() {
        let set = CpuSet::from_ids(8, [0, 2, 3, 6]);
        assert_eq!(set.iter_wrap(3).collect::<Vec<_>>(), vec![3, 6, 0, 2]);
        assert_eq!(set.iter_wrap(7).collect::<Vec<_>>(), vec![0, 2, 3, 6]);
    }

    #[test]
    fn cpulist_is_the_kernels_form() {
        let list = |ids: &[usize]| CpuSet::from_ids(16, ids.iter().copied()).to_cpulist();
        assert_eq!(list(&[0, 1, 2, 3, 8]), "0-3,8");
        assert_eq!(list(&[5]), "5");
        assert_eq!(list(&[1, 2, 4, 5, 7, 15]), "1-2,4-5,7,15");
        assert_eq!(list(&[]), "-");
        // The parser of sysfs cpulists reads it back.
        let text = list(&[0, 2, 3, 4, 9, 10]);
        assert_eq!(
            crate::machine::sysfs::parse_cpulist("t", &text).unwrap(),
            vec![0, 2, 3, 4, 9, 10]
        );
    }

    #[test]
    fn subset_and_union() {
        let mut a = CpuSet::from_ids(8, [1, 2]);
        let b = CpuSet::from_ids(8, [2, 5]);
        assert!(!a.is_subset(&b));
        a.union_with(&b);
        assert_eq!(a.to_vec(), vec![1, 2, 5]);
        assert!(b.is_subset(&a));
        assert_eq!(a.len(), 3);
        assert_eq!(a.first(), Some(1));
        assert!(!a.is_disjoint(&b));
        a.set(2, false);
        a.set(5, false);
        assert!(a.is_disjoint(&b));
        a.set(5, true);
        assert_eq!(a.to_vec(), vec![1, 5]);
    }
}
