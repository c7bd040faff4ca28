//! Golden tests: the `linux` builder against captures of a real Linux 6.1 kernel booted under
//! QEMU with a given SLIT (tests/data/*.json, copied from shared/fixtures/kernel-domains).
//! Every CPU, every level: name, span, groups (span and balance mask, in order), flags,
//! imbalance_pct, min/max interval and busy_factor must match exactly.

use numasim_core::domains::{sd, BuildOptions, Builder};
use numasim_core::testutils;
use serde_json::Value;

fn ids(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("int") as usize)
        .collect()
}

fn check_capture(file: &str) {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let capture: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let slit: Vec<Vec<u32>> = capture["slit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| ids(r).into_iter().map(|v| v as u32).collect())
        .collect();
    // `cpus_per_node` is one count for every node, or a list of counts (0 = memory-only node).
    let counts: Vec<usize> = match &capture["cpus_per_node"] {
        Value::Array(_) => ids(&capture["cpus_per_node"]),
        v => vec![v.as_u64().unwrap() as usize; slit.len()],
    };
    let machine = testutils::machine_with_counts(&slit, &counts);
    let domains = Builder::Linux.build(&machine, &BuildOptions::default());
    let cpus = capture["cpus"].as_object().unwrap();
    assert_eq!(cpus.len(), machine.cpus(), "{file}: CPU count");
    for (cpu, levels) in cpus {
        let cpu: usize = cpu.parse().unwrap();
        let want = levels.as_array().unwrap();
        let got = &domains.cpus[cpu];
        assert_eq!(got.len(), want.len(), "{file}: cpu {cpu}: number of levels");
        for (l, (g, w)) in got.iter().zip(want).enumerate() {
            let at = format!("{file}: cpu {cpu} level {l}");
            assert_eq!(
                w["level"].as_u64().unwrap() as usize,
                l,
                "{at}: level index"
            );
            assert_eq!(g.name, w["name"].as_str().unwrap(), "{at}: name");
            assert_eq!(g.span.to_vec(), ids(&w["span"]), "{at}: span");
            let wg = w["groups"].as_array().unwrap();
            assert_eq!(g.groups.len(), wg.len(), "{at}: number of groups");
            for (k, (gg, wgrp)) in g.groups.iter().zip(wg).enumerate() {
                let span = ids(&wgrp["span"]);
                // The capture omits the balance mask where it equals the span.
                let mask = wgrp.get("balance_mask").map_or_else(|| span.clone(), ids);
                assert_eq!(gg.span.to_vec(), span, "{at}: group {k} span");
                assert_eq!(
                    gg.balance_mask.to_vec(),
                    mask,
                    "{at}: group {k} balance mask"
                );
            }
            let mut flags: Vec<&str> = w["flags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            flags.sort_unstable();
            let mut got_flags = sd::names(g.params.flags);
            got_flags.sort_unstable();
            assert_eq!(got_flags, flags, "{at}: flags");
            assert_eq!(
                u64::from(g.params.imbalance_pct),
                w["imbalance_pct"].as_u64().unwrap(),
                "{at}: imbalance_pct"
            );
            assert_eq!(
                g.params.min_interval_ms,
                w["min_interval_ms"].as_u64().unwrap(),
                "{at}: min_interval"
            );
            assert_eq!(
                g.params.max_interval_ms,
                w["max_interval_ms"].as_u64().unwrap(),
                "{at}: max_interval"
            );
            assert_eq!(
                u64::from(g.params.busy_factor),
                w["busy_factor"].as_u64().unwrap(),
                "{at}: busy_factor"
            );
        }
    }
}

#[test]
fn linux_builder_reproduces_the_m3_capture() {
    check_capture("m3.json");
}

#[test]
fn linux_builder_reproduces_the_ring8_capture() {
    check_capture("ring8.json");
}

#[test]
fn every_capture_in_the_data_directory_is_reproduced() {
    // Further captures dropped into tests/data are checked without code changes.
    let dir = format!("{}/tests/data", env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".json") {
            check_capture(&name);
            n += 1;
        }
    }
    assert!(n >= 2, "expected the kernel captures in tests/data");
}
