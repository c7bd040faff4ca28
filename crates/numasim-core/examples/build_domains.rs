//! Builds one builder's domains for a distance-table file and writes their `topology --json` JSON, timing
//! each phase: the profiling aid of docs/PERFORMANCE.md ("Domains of large machines").
//!
//! `cargo run --release -p numasim-core --example build_domains -- FILE CPUS_PER_NODE [BUILDER]`

use std::time::Instant;

use numasim_core::domains::{BuildOptions, Builder};
use numasim_core::machine::file::read_matrix;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, cpus, rest @ ..] = args.as_slice() else {
        eprintln!("usage: build_domains FILE CPUS_PER_NODE [BUILDER]");
        std::process::exit(2);
    };
    let builder: Builder = rest
        .first()
        .map_or("linux", String::as_str)
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let t = Instant::now();
    let m = read_matrix(
        path.as_ref(),
        Some(cpus.parse().expect("a CPU count")),
        "CPUS_PER_NODE",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("machine: {:.2?}", t.elapsed());
    let t = Instant::now();
    let d = builder.build(&m, &BuildOptions::default());
    eprintln!("build:   {:.2?}", t.elapsed());
    let t = Instant::now();
    let json = d.to_json_string();
    eprintln!("json:    {:.2?} ({} bytes)", t.elapsed(), json.len());
}
