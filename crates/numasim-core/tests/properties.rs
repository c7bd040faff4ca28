//! Property tests over random symmetric machines: the structural invariants every builder
//! must keep.

use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::testutils;
use proptest::prelude::*;

fn symmetric_table() -> impl Strategy<Value = (Vec<Vec<u32>>, Vec<usize>)> {
    (1usize..9).prop_flat_map(|n| {
        let pairs = n * (n - 1) / 2;
        (
            proptest::collection::vec(11u32..=60, pairs),
            proptest::collection::vec(1usize..4, n),
        )
            .prop_map(move |(upper, counts)| {
                let mut rows = vec![vec![10u32; n]; n];
                let pairs = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j)));
                for ((i, j), v) in pairs.zip(upper) {
                    rows[i][j] = v;
                    rows[j][i] = v;
                }
                (rows, counts)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn hierarchies_nest_cover_and_contain_their_groups((rows, counts) in symmetric_table()) {
        let m = testutils::machine_with_counts(&rows, &counts);
        for b in Builder::ALL {
            let d = b.build(&m, &BuildOptions::default());
            prop_assert_eq!(d.cpus.len(), m.cpus());
            let mut ids = std::collections::BTreeMap::new();
            let mut by_sets = std::collections::BTreeMap::new();
            for (c, of) in d.member_of.iter().enumerate() {
                for &id in of {
                    prop_assert!(d.group_spans[id as usize].contains(c));
                }
            }
            for (cpu, levels) in d.cpus.iter().enumerate() {
                if m.cpus() == 1 {
                    prop_assert!(levels.is_empty());
                    continue;
                }
                prop_assert!(!levels.is_empty(), "{} cpu {}: no level", b, cpu);
                // The top span covers every CPU (two-level above 16 nodes aside: not generated).
                prop_assert_eq!(levels.last().unwrap().span.len(), m.cpus(), "{} cpu {} top", b, cpu);
                for (k, l) in levels.iter().enumerate() {
                    prop_assert!(l.span.contains(cpu), "{} cpu {} level {}: not in own span", b, cpu, k);
                    if k + 1 < levels.len() {
                        prop_assert!(l.span.is_subset(&levels[k + 1].span), "{} cpu {} level {}: spans nest", b, cpu, k);
                        prop_assert!(l.span != levels[k + 1].span, "{} cpu {} level {}: duplicate level", b, cpu, k);
                    }
                    // One group is legal: node-only on a one-node machine never balances inside it.
                    prop_assert!(!l.groups.is_empty(), "{} cpu {} level {}: no group", b, cpu, k);
                    prop_assert!(l.groups[0].span.contains(cpu), "{} cpu {} level {}: own group first", b, cpu, k);
                    let mut union = (*l.groups[0].span).clone();
                    for g in l.groups.iter() {
                        prop_assert!(g.span.is_subset(&l.span), "{} cpu {} level {}: group outside span", b, cpu, k);
                        prop_assert!(!g.balance_mask.is_empty());
                        prop_assert!(g.balance_mask.is_subset(&g.span));
                        union.union_with(&g.span);
                        // Shared groups: one id per distinct (span, balance mask), its span
                        // recorded, every CPU of it knowing it; the weight cached right.
                        prop_assert_eq!(g.weight, g.span.len());
                        prop_assert_eq!(g.local, g.span.contains(cpu), "{} cpu {} level {}: local", b, cpu, k);
                        prop_assert_eq!(&*d.group_spans[g.id as usize], &*g.span);
                        let named = ids.entry(g.id).or_insert_with(|| (g.span.clone(), g.balance_mask.clone()));
                        prop_assert!(named.0 == g.span && named.1 == g.balance_mask, "{} id {} names two groups", b, g.id);
                        let id = *by_sets.entry((g.span.to_vec(), g.balance_mask.to_vec())).or_insert(g.id);
                        prop_assert_eq!(id, g.id, "{} one group, two ids", b);
                        for c in g.span.iter() {
                            prop_assert!(d.member_of[c].contains(&g.id));
                        }
                    }
                    prop_assert_eq!(&union, &*l.span, "{} cpu {} level {}: groups cover the span", b, cpu, k);
                    prop_assert_eq!(&union, &*l.reach, "{} cpu {} level {}: reach", b, cpu, k);
                    prop_assert_eq!(l.weight, l.span.len());
                    prop_assert!(l.params.min_interval_ms <= l.params.max_interval_ms);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// A level with a ring (`Level::ring`) lists the ring's group ids from its start on,
    /// wrapping round; every level that can have one — `RING_MIN_GROUPS` groups or more, its
    /// own first and no other its own, no id twice — has one; every ring is some level's.
    #[test]
    fn levels_on_a_ring_list_it_from_their_start(
        nodes in 20usize..70,
        cpn in 1usize..3,
        seed in 0usize..1000,
    ) {
        let rows: Vec<Vec<u32>> = (0..nodes)
            .map(|i| {
                (0..nodes)
                    .map(|j| if i == j { 10 } else { 20 + 10 * ((i * j + seed) % 4) as u32 })
                    .collect()
            })
            .collect();
        let m = testutils::machine(&rows, cpn);
        for b in Builder::ALL {
            let d = b.build(&m, &BuildOptions::default());
            let mut used = vec![false; d.rings.len()];
            for (cpu, levels) in d.cpus.iter().enumerate() {
                for (k, l) in levels.iter().enumerate() {
                    let ids: Vec<u32> = l.groups.iter().map(|g| g.id).collect();
                    match l.ring {
                        Some(at) => {
                            let ring = &d.rings[at.ring as usize];
                            prop_assert_eq!(ring.len(), ids.len());
                            for (i, &id) in ids.iter().enumerate() {
                                prop_assert_eq!(id, ring[(at.start as usize + i) % ring.len()], "{} cpu {} level {}", b, cpu, k);
                            }
                            used[at.ring as usize] = true;
                        }
                        None => {
                            let mut distinct = ids.clone();
                            distinct.sort_unstable();
                            distinct.dedup();
                            let can = ids.len() >= numasim_core::domains::RING_MIN_GROUPS
                                && l.groups[0].local
                                && l.groups[1..].iter().all(|g| !g.local)
                                && distinct.len() == ids.len();
                            prop_assert!(!can, "{} cpu {} level {}: no ring", b, cpu, k);
                        }
                    }
                }
            }
            prop_assert!(used.iter().all(|&u| u), "{}: a ring no level lists", b);
        }
    }
}
