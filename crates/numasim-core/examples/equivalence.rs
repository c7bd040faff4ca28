//! A fixed matrix of runs — every domain builder, every policy family, several machine sizes,
//! both modelling-assumption profiles — each printed as one line with a digest of its whole
//! serialised result (every process's metrics, the summary, the event count). For checking that
//! an optimisation leaves results bit-identical: save the output of a build before the change,
//! then `diff` it with the output after (docs/PERFORMANCE.md, "Checking a change").
//!
//! ```text
//! cargo run --release -p numasim-core --example equivalence -- python/numasim/data > before.txt
//! ```
//!
//! The argument is the Python package's data directory (machines in `machines/`, bench machines
//! in `bench/`). The digest is std's `DefaultHasher` (SipHash with fixed keys) of the result's
//! JSON: stable between two builds of one toolchain, which is all a before/after check needs.

use std::hash::{Hash, Hasher};
use std::path::Path;

use numasim_core::assumptions::Assumptions;
use numasim_core::config::EngineConfig;
use numasim_core::domains::BuildOptions;
use numasim_core::workload::WorkloadSpec;

/// (machine file under the data directory, builder, policies, workload specs, seeds).
type Case = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [u64],
);

const CPU_MIX: &[&str] = &[
    "n=25,kind=cpu,exec=200,arrival=random",
    "n=300,kind=cpu,exec=200,arrival=random",
    "n=200,kind=cpu,exec=300,arrival=same",
    "n=150,kind=mixed,exec=50-300,arrival=random",
];

const CASES: &[Case] = &[
    (
        "machines/mehta-m1.toml",
        "multilevel",
        &[
            "linux26",
            "origin-aware",
            "origin-aware:v1=off,v2=off,min-load=2,nearest=move",
        ],
        CPU_MIX,
        &[1, 2],
    ),
    (
        "machines/mehta-m1.toml",
        "two-level",
        &["linux26"],
        CPU_MIX,
        &[3],
    ),
    (
        "machines/mehta-m1.toml",
        "flat",
        &["linux26"],
        CPU_MIX,
        &[4],
    ),
    (
        "machines/mehta-m1.toml",
        "node-only",
        &["linux26"],
        CPU_MIX,
        &[5],
    ),
    (
        "machines/mehta-m2.toml",
        "multilevel",
        &["linux26", "origin-aware"],
        &["n=200,kind=cpu,exec=200,arrival=random"],
        &[6],
    ),
    (
        "machines/mehta-m3.toml",
        "multilevel",
        &["linux26", "origin-aware"],
        &["n=200,kind=cpu,exec=300,arrival=random"],
        &[7],
    ),
    (
        "machines/amc1.toml",
        "two-level",
        &["capability-aware:place=domain", "linux26"],
        &[
            "n=200,kind=cpu,exec=200,arrival=random",
            "n=200,kind=mixed,exec=50-300,arrival=random",
        ],
        &[8],
    ),
    (
        "machines/amc2.toml",
        "two-level",
        &["capability-aware:place=domain"],
        &["n=256,kind=mixed,exec=50-400,arrival=same"],
        &[9],
    ),
    (
        "machines/amc3.toml",
        "two-level",
        &["capability-aware:place=domain"],
        &["n=200,kind=cpu,exec=400,arrival=almost"],
        &[10],
    ),
    (
        "machines/numa-4x8.toml",
        "two-level",
        &["thread-aware", "memory-aware", "linux26"],
        &["app=canneal:16+x264:8+streamcluster:8"],
        &[11],
    ),
    (
        "machines/numa-4x8.toml",
        "linux",
        &["linux", "linux:numa_balancing=off"],
        &[
            "app=canneal:16+x264:8",
            "n=100,kind=cpu,exec=200,arrival=random",
        ],
        &[12],
    ),
    (
        "machines/koita-64.toml",
        "two-level",
        &[
            "fr-dist", "fh-dist", "fp-dist", "hb-dist", "hs-dist", "fr-con", "fh-con", "fp-con",
            "hb-con", "hs-con", "equi", "dyn", "lim",
        ],
        &["n=60,app=koita:4,load=1.0"],
        &[13],
    ),
    (
        "machines/sgi-altix-3000.toml",
        "multilevel",
        &["linux26"],
        &["n=200,kind=io,exec=250-750,burst=100,wait=1000,arrival=random"],
        &[14],
    ),
    (
        "machines/hp-superdome-4.toml",
        "two-level",
        &["linux26"],
        &["n=200,kind=cpu,exec=10-100,arrival=uniform:2000"],
        &[15],
    ),
    (
        "bench/numa-256.toml",
        "multilevel",
        &["linux26", "origin-aware"],
        &["n=2560,kind=cpu,exec=200,arrival=uniform:2000"],
        &[16],
    ),
    (
        "bench/numa-1024.toml",
        "multilevel",
        &["linux26"],
        &["n=5000,kind=cpu,exec=200,arrival=uniform:1000"],
        &[17],
    ),
    (
        "bench/numa-1024.toml",
        "linux",
        &["linux"],
        &["n=2000,kind=cpu,exec=100,arrival=uniform:500"],
        &[18],
    ),
];

const PROFILES: &[&str] = &["kernel26", "paper"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [data] = args.as_slice() else {
        eprintln!("usage: equivalence DATA_DIR (python/numasim/data)");
        std::process::exit(2);
    };
    let fail = |e: numasim_core::InputError| -> ! {
        eprintln!("{e}");
        std::process::exit(2)
    };
    for &(file, builder, policies, specs, seeds) in CASES {
        let m = numasim_core::machine::file::read(&Path::new(data).join(file))
            .unwrap_or_else(|e| fail(e));
        let b: numasim_core::Builder = builder.parse().unwrap_or_else(|e| fail(e));
        let d = b.build(&m, &BuildOptions::default());
        for &profile in PROFILES {
            let config = EngineConfig {
                assumptions: Assumptions::parse("profile", profile).unwrap_or_else(|e| fail(e)),
                ..EngineConfig::default()
            };
            for &spec in specs {
                for &seed in seeds {
                    let w = WorkloadSpec::parse("spec", spec)
                        .and_then(|s| s.generate("spec", seed, m.node_cpu_lists()))
                        .unwrap_or_else(|e| fail(e));
                    for &policy in policies {
                        let r = numasim_core::run_policy(&m, &d, &w, policy, &config)
                            .unwrap_or_else(|e| fail(e));
                        let json = serde_json::to_string(&r).expect("serialisable");
                        let mut h = std::collections::hash_map::DefaultHasher::new();
                        json.hash(&mut h);
                        println!(
                            "{file} {builder} {profile} {spec} seed={seed} {policy}: events={} \
                             tat={} digest={:016x}",
                            r.events,
                            r.summary.mean_tat_ms,
                            h.finish()
                        );
                    }
                }
            }
        }
    }
}
