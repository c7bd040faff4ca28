//! A segment tree over the groups of a ring ([`crate::domains::RingAt`]): for every range of
//! the ring, the largest and smallest bound of its groups (`View::group_bound`) and the largest
//! "busiest-eligible" bound (the bound of a group with more tasks than CPUs, else 0), kept as
//! the bounds change (crate::load, step 6).
//!
//! ```text
//!   node i: [max bound, min bound, max eligible bound] of its leaves; leaves at size + pos
//!   positions past the ring's end: [0, u64::MAX, 0] (they never hold an answer)
//! ```
//!
//! It answers what the balancers ask of a level's other groups — the largest or smallest bound,
//! and the next group in the level's order whose bound passes a threshold — in O(log groups)
//! instead of reading every group: the top level of a 4 096-CPU machine has 256.

/// What a node holds: `[max bound, min bound, max eligible bound]`.
type Node = [u64; 3];

const EMPTY: Node = [0, u64::MAX, 0];

fn join(a: &Node, b: &Node) -> Node {
    [a[0].max(b[0]), a[1].min(b[1]), a[2].max(b[2])]
}

#[derive(Debug, Clone)]
pub(crate) struct RingTree {
    /// Leaves (a power of two, at least the ring's groups).
    size: usize,
    /// The ring's groups.
    len: usize,
    nodes: Vec<Node>,
}

impl RingTree {
    /// A ring of `len` groups, every bound 0 (no task anywhere).
    pub(crate) fn new(len: usize) -> Self {
        let size = len.next_power_of_two().max(1);
        let mut nodes = vec![EMPTY; 2 * size];
        for leaf in &mut nodes[size..size + len] {
            *leaf = [0, 0, 0];
        }
        for i in (1..size).rev() {
            nodes[i] = join(&nodes[2 * i], &nodes[2 * i + 1]);
        }
        Self { size, len, nodes }
    }

    /// The group at `pos` now has `bound`, and is busiest-eligible (more tasks than CPUs) or not.
    #[inline]
    pub(crate) fn set(&mut self, pos: usize, bound: u64, eligible: bool) {
        let mut i = self.size + pos;
        self.nodes[i] = [bound, bound, if eligible { bound } else { 0 }];
        while i > 1 {
            i /= 2;
            let joined = join(&self.nodes[2 * i], &self.nodes[2 * i + 1]);
            if self.nodes[i] == joined {
                break; // nothing above changes either
            }
            self.nodes[i] = joined;
        }
    }

    /// The join of positions `lo..hi`.
    fn range(&self, lo: usize, hi: usize) -> Node {
        let (mut l, mut r) = (lo + self.size, hi + self.size);
        let mut acc = EMPTY;
        while l < r {
            if l & 1 == 1 {
                acc = join(&acc, &self.nodes[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                acc = join(&acc, &self.nodes[r]);
            }
            l /= 2;
            r /= 2;
        }
        acc
    }

    /// The join of every position but `pos`.
    pub(crate) fn others(&self, pos: usize) -> Node {
        join(&self.range(0, pos), &self.range(pos + 1, self.len))
    }

    /// The first position of `lo..hi` whose leaf satisfies `hit`, which must hold for a node
    /// whenever it holds for one of its leaves (a test of its maximum or minimum; the leaves
    /// past the ring's end never satisfy it): from `lo`'s leaf up while the nodes to its right
    /// do not, then down the first that does.
    #[inline]
    fn first(&self, lo: usize, hi: usize, hit: &impl Fn(&Node) -> bool) -> Option<usize> {
        if lo >= hi {
            return None;
        }
        let mut i = lo + self.size;
        loop {
            while i.is_multiple_of(2) {
                i /= 2; // a left child: its parent covers it and what follows
            }
            if hit(&self.nodes[i]) {
                while i < self.size {
                    i = if hit(&self.nodes[2 * i]) {
                        2 * i
                    } else {
                        2 * i + 1
                    };
                }
                let pos = i - self.size;
                return (pos < hi).then_some(pos);
            }
            i += 1;
            if i.is_power_of_two() {
                return None; // past the last leaf
            }
        }
    }

    /// In the order of a level entering the ring at `start` (list position k is ring position
    /// `(start + k) mod len`): the first list position from `from` on (below `len`) whose leaf
    /// satisfies `hit`.
    pub(crate) fn next(
        &self,
        start: usize,
        from: usize,
        hit: &impl Fn(&Node) -> bool,
    ) -> Option<usize> {
        if from >= self.len {
            return None;
        }
        let c = start + from;
        let found = if c < self.len {
            // List positions from..len - start, then the wrapped part 0..start of the ring.
            self.first(c, self.len, hit)
                .map(|p| p - start)
                .or_else(|| self.first(0, start, hit).map(|p| p + self.len - start))
        } else {
            self.first(c - self.len, start, hit)
                .map(|p| p + self.len - start)
        };
        debug_assert!(found.is_none_or(|k| k >= from && k < self.len));
        found
    }
}

/// The largest bound among a node's leaves.
pub(crate) fn max_bound(n: &Node) -> u64 {
    n[0]
}

/// The smallest bound among a node's leaves (`u64::MAX` for none).
pub(crate) fn min_bound(n: &Node) -> u64 {
    n[1]
}

/// The largest busiest-eligible bound among a node's leaves.
pub(crate) fn max_eligible(n: &Node) -> u64 {
    n[2]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every answer is the one a scan of the level's list gives: the others' largest and
        /// smallest bound, and the next list position whose bound passes a threshold.
        #[test]
        fn answers_are_those_of_a_scan(
            len in 1usize..70,
            start_seed in 0usize..1000,
            updates in prop::collection::vec((0usize..1000, 0u64..20, any::<bool>()), 0..200),
            thr in 0u64..20,
            from_seed in 0usize..1000,
        ) {
            let start = start_seed % len;
            let mut t = RingTree::new(len);
            let mut leaves = vec![(0u64, false); len];
            for (p, b, e) in updates {
                t.set(p % len, b, e);
                leaves[p % len] = (b, e);
            }
            let list: Vec<(u64, bool)> = (0..len).map(|k| leaves[(start + k) % len]).collect();
            let others = t.others(start);
            let rest = || list.iter().skip(1);
            prop_assert_eq!(max_bound(&others), rest().map(|l| l.0).max().unwrap_or(0));
            prop_assert_eq!(min_bound(&others), rest().map(|l| l.0).min().unwrap_or(u64::MAX));
            let eligible = |l: &(u64, bool)| if l.1 { l.0 } else { 0 };
            prop_assert_eq!(max_eligible(&others), rest().map(eligible).max().unwrap_or(0));
            let from = from_seed % (len + 1);
            let scan_above = (from..len).find(|&k| eligible(&list[k]) > thr);
            prop_assert_eq!(t.next(start, from, &|n: &Node| max_eligible(n) > thr), scan_above);
            let scan_below = (from..len).find(|&k| list[k].0 < thr);
            prop_assert_eq!(t.next(start, from, &|n: &Node| min_bound(n) < thr), scan_below);
        }
    }
}
