//! Behaviour of the domain builders on the shipped presets and on hand-made tables.

use std::collections::BTreeSet;

use numasim_core::domains::{BuildOptions, Builder, Level};
use numasim_core::machine::Machine;
use numasim_core::testutils;

use numasim_core::testutils::preset;

fn build(m: &Machine, b: Builder) -> Vec<Vec<Level>> {
    b.build(m, &BuildOptions::default()).cpus
}

fn nodes_of(m: &Machine, cpus: &[usize]) -> Vec<usize> {
    let mut n: Vec<usize> = cpus.iter().map(|&c| m.cpu_node(c)).collect();
    n.dedup();
    n
}

#[test]
fn every_preset_has_its_spec_shape() {
    // (name, nodes, cpus per node, MALs, fast CPUs)
    let shapes = [
        ("mehta-m1", 16, 2, 6, 0),
        ("mehta-m2", 16, 4, 6, 0),
        ("mehta-m3", 8, 2, 3, 0),
        ("sgi-altix-3000", 16, 2, 6, 0),
        ("hp-superdome-4", 4, 4, 2, 0),
        ("hp-superdome-16", 16, 4, 3, 0),
        ("amc1", 16, 2, 2, 16),
        ("amc2", 32, 2, 3, 32),
        ("amc3", 32, 4, 6, 64),
        ("koita-64", 16, 4, 2, 0),
    ];
    for (name, nodes, cpn, mals, fast) in shapes {
        let m = preset(name);
        assert_eq!(m.nodes(), nodes, "{name} nodes");
        assert_eq!(m.cpus(), nodes * cpn, "{name} cpus");
        assert_eq!(m.mals().len(), mals, "{name} MALs {:?}", m.mals());
        let n_fast = (0..m.cpus()).filter(|&c| m.speed(c) == 2.0).count();
        assert_eq!(n_fast, fast, "{name} fast cpus");
        assert!(
            !m.description.is_empty() && !m.source.is_empty(),
            "{name} documented"
        );
        assert!(
            m.warnings().is_empty(),
            "{name} warnings {:?}",
            m.warnings()
        );
    }
    assert_eq!(preset("koita-64").mals(), vec![10, 37]);
    assert_eq!(preset("hp-superdome-16").mals(), vec![10, 17, 29]);
}

#[test]
fn multilevel_on_mehta_m1_has_one_level_per_mal_with_node_groups() {
    let m = preset("mehta-m1");
    let d = build(&m, Builder::Multilevel);
    assert_eq!(d.len(), m.cpus());
    for (cpu, levels) in d.iter().enumerate() {
        assert_eq!(levels.len(), 6, "cpu {cpu}: n MALs give n levels");
    }
    let cpu0 = &d[0];
    // Level 0: the node's CPUs, one group per CPU, starting with CPU 0.
    assert_eq!(cpu0[0].span.to_vec(), vec![0, 1]);
    let g0: Vec<_> = cpu0[0].groups.iter().map(|g| g.span.to_vec()).collect();
    assert_eq!(g0, vec![vec![0], vec![1]]);
    // Levels 1..5: one group per node within distance 20, 30, ... of node 0 (fixture README).
    let expected_nodes: [&[usize]; 5] = [
        &[0, 1, 6, 11],
        &[0, 1, 2, 6, 7, 11, 12],
        &[0, 1, 2, 3, 6, 7, 8, 11, 12, 13],
        &[0, 1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14],
        &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    ];
    for (k, nodes) in expected_nodes.iter().enumerate() {
        let level = &cpu0[k + 1];
        let mut group_nodes: Vec<usize> = level
            .groups
            .iter()
            .map(|g| {
                let n = nodes_of(&m, &g.span.to_vec());
                assert_eq!(n.len(), 1, "a group is one node");
                assert_eq!(g.span.to_vec(), m.node_cpus(n[0]), "the whole node");
                n[0]
            })
            .collect();
        assert_eq!(group_nodes[0], 0, "own node's group first");
        group_nodes.sort_unstable();
        assert_eq!(group_nodes, nodes.to_vec(), "level {}", k + 1);
        assert_eq!(nodes_of(&m, &level.span.to_vec()), nodes.to_vec());
        assert_eq!(level.params.min_interval_ms, 8);
        assert_eq!(level.params.imbalance_pct, 125);
    }
    assert_eq!(cpu0[0].params.min_interval_ms, 1);
    assert_eq!(cpu0[0].params.busy_factor, 64);
    // CPU 1 replicates node 0's hierarchy, with its own group first at level 0.
    assert_eq!(d[1][0].groups[0].span.to_vec(), vec![1]);
    assert_eq!(d[1][3].span, d[0][3].span);
}

#[test]
fn two_level_follows_the_2_6_18_rule() {
    // 8 and 16 nodes: CPU level, then one NODE level spanning every node (own + 15 nearest).
    for nodes in [8, 16] {
        let m = testutils::machine(&testutils::two_level_table(nodes, 20), 2);
        let d = build(&m, Builder::TwoLevel);
        for levels in &d {
            let names: Vec<_> = levels.iter().map(|l| l.name.as_str()).collect();
            assert_eq!(names, ["CPU", "NODE"], "{nodes} nodes");
            assert_eq!(levels[1].span.len(), m.cpus());
            assert_eq!(levels[1].groups.len(), nodes);
        }
    }
    // 32 nodes in two groups of 8 at distance 20, 30 across (amc2): the NODE level spans the
    // own node and its 15 nearest; an ALLNODES level spans everything.
    let m = preset("amc2");
    let d = build(&m, Builder::TwoLevel);
    let names: Vec<_> = d[0].iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["CPU", "NODE", "ALLNODES"]);
    let node0: Vec<usize> = nodes_of(&m, &d[0][1].span.to_vec());
    // Nodes 1-7 at 20; then the first 8 of the distance-30 nodes scanning up from node 0.
    assert_eq!(node0, (0..16).collect::<Vec<_>>());
    // Node 28 (CPU 56): its group 24-31, then nodes 0-7 (scan from 28 wraps past 31 to 0).
    let node28 = nodes_of(&m, &d[56][1].span.to_vec());
    let mut want: Vec<usize> = (0..8).chain(24..32).collect();
    want.sort_unstable();
    assert_eq!(node28, want);
    assert_eq!(d[56][1].groups.len(), 16);
    assert_eq!(nodes_of(&m, &d[56][1].groups[0].span.to_vec()), vec![28]);
    assert_eq!(d[56][2].span.len(), m.cpus());
    assert_eq!(d[56][2].groups.len(), 32);
}

#[test]
fn flat_and_node_only() {
    let m = preset("hp-superdome-4");
    let flat = build(&m, Builder::Flat);
    assert_eq!(flat[5].len(), 1);
    assert_eq!(flat[5][0].groups.len(), 16);
    assert_eq!(flat[5][0].groups[0].span.to_vec(), vec![5]);
    assert_eq!(flat[5][0].groups[1].span.to_vec(), vec![6]);
    let node_only = build(&m, Builder::NodeOnly);
    assert_eq!(node_only[5].len(), 1);
    let groups: Vec<_> = node_only[5][0]
        .groups
        .iter()
        .map(|g| g.span.to_vec())
        .collect();
    assert_eq!(
        groups,
        vec![
            vec![4, 5, 6, 7],
            vec![8, 9, 10, 11],
            vec![12, 13, 14, 15],
            vec![0, 1, 2, 3]
        ]
    );
}

#[test]
fn single_cpu_levels_are_degenerate_and_removed() {
    // One CPU per node: the in-node level spans one CPU and disappears, in both eras.
    let m = testutils::machine(&testutils::two_level_table(4, 20), 1);
    for b in [Builder::TwoLevel, Builder::Multilevel, Builder::Linux] {
        let d = build(&m, b);
        assert_eq!(d[0].len(), 1, "{b}");
        assert_eq!(d[0][0].span.len(), 4, "{b}");
    }
}

#[test]
fn linux_ignores_memory_only_nodes() {
    // Node 1 has no CPU and is the only node at distance 15: no level for it.
    let rows = vec![vec![10, 15, 20], vec![15, 10, 25], vec![20, 25, 10]];
    let m = testutils::machine_with_counts(&rows, &[2, 0, 2]);
    let d = build(&m, Builder::Linux);
    let names: Vec<_> = d[0].iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["MC", "NUMA"]);
    assert_eq!(d[0][1].span.to_vec(), vec![0, 1, 2, 3]);
    let ml = build(&m, Builder::Multilevel);
    assert_eq!(
        ml[0].len(),
        2,
        "the distance-15 level adds no CPU and is removed"
    );
}

#[test]
fn era26_newly_idle_balancing_only_inside_a_node() {
    use numasim_core::domains::sd;
    let m = preset("mehta-m1");
    for b in [Builder::TwoLevel, Builder::Multilevel] {
        let d = build(&m, b);
        assert_ne!(
            d[0][0].params.flags & sd::BALANCE_NEWIDLE,
            0,
            "{b}: in-node level"
        );
        assert_ne!(
            d[0][0].params.flags & sd::WAKE_AFFINE,
            0,
            "{b}: in-node wake-affine"
        );
        for level in &d[0][1..] {
            assert_eq!(
                level.params.flags & sd::BALANCE_NEWIDLE,
                0,
                "{b}: {}",
                level.name
            );
            assert_ne!(
                level.params.flags & sd::WAKE_BALANCE,
                0,
                "{b}: {}",
                level.name
            );
        }
    }
}

#[test]
fn json_text_is_the_json_value_written_out() {
    // `to_json_string` writes the hierarchy directly; it must be exactly the `to_json` tree.
    for preset in ["mehta-m1", "amc3", "hp-superdome-16"] {
        let m = testutils::preset(preset);
        for b in Builder::ALL {
            let d = b.build(&m, &BuildOptions::default());
            assert_eq!(d.to_json_string(), d.to_json().to_string(), "{preset} {b}");
        }
    }
}

/// A level as `numasim topology` compares them: name, span and the *set* of groups.
type Shape = (String, Vec<usize>, BTreeSet<(Vec<usize>, Vec<usize>)>);

fn shape(l: &Level) -> Shape {
    let groups = l
        .groups
        .iter()
        .map(|g| (g.span.to_vec(), g.balance_mask.to_vec()))
        .collect();
    (l.name.clone(), l.span.to_vec(), groups)
}

#[test]
fn distinct_hierarchies_group_exactly_the_cpus_with_equal_levels() {
    // (preset, builder, expected classes)
    let cases = [
        ("mehta-m1", Builder::Flat, 1), // one level, a group per CPU in every order
        ("mehta-m1", Builder::Multilevel, 16), // the two CPUs of a node share theirs
        ("mehta-m1", Builder::Linux, 16),
        ("hp-superdome-16", Builder::TwoLevel, 16),
        ("amc3", Builder::Linux, 32),
    ];
    for (name, b, expected) in cases {
        let m = preset(name);
        let d = b.build(&m, &BuildOptions::default());
        let classes = d.distinct_hierarchies();
        assert_eq!(classes.len(), expected, "{name} {b}");
        // Every CPU appears once; classes are ordered by their first CPU, members sorted.
        let mut all: Vec<usize> = classes.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..m.cpus()).collect::<Vec<_>>(), "{name} {b}");
        assert!(classes.windows(2).all(|w| w[0][0] < w[1][0]));
        let shapes = |c: usize| d.cpus[c].iter().map(shape).collect::<Vec<_>>();
        for class in &classes {
            assert!(class.windows(2).all(|w| w[0] < w[1]));
            for &c in class {
                assert_eq!(shapes(c), shapes(class[0]), "{name} {b}: CPU {c}");
            }
        }
        // Two classes never hold equal hierarchies.
        for (i, a) in classes.iter().enumerate() {
            for other in &classes[i + 1..] {
                assert_ne!(shapes(a[0]), shapes(other[0]), "{name} {b}");
            }
        }
    }
}
