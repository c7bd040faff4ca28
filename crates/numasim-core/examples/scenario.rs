//! One benchmark scenario from the command line, without Python: for profiling (`perf record`)
//! and quick before/after checks of the engine. Prints `bench::run`'s figures as JSON, the
//! fastest of `repeat` runs.
//!
//! ```text
//! cargo run --release -p numasim-core --example scenario -- \
//!     MACHINE.toml "n=500,kind=cpu,exec=200,arrival=random" [domains] [policy] [seed] [repeat]
//! ```

use std::path::Path;

use numasim_core::bench;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [machine, spec, rest @ ..] = args.as_slice() else {
        eprintln!("usage: scenario MACHINE.toml SPEC [domains] [policy] [seed] [repeat]");
        std::process::exit(2);
    };
    let domains = rest.first().map_or("multilevel", String::as_str);
    let policy = rest.get(1).map_or("linux26", String::as_str);
    let seed = rest.get(2).map_or(1, |s| s.parse().expect("a seed"));
    let repeat: usize = rest.get(3).map_or(1, |s| s.parse().expect("a count"));
    let fail = |e: numasim_core::InputError| -> ! {
        eprintln!("{e}");
        std::process::exit(2)
    };
    let m = numasim_core::machine::file::read(Path::new(machine)).unwrap_or_else(|e| fail(e));
    let builder = domains.parse().unwrap_or_else(|e| fail(e));
    let best = (0..repeat.max(1))
        .map(|_| bench::run(&m, spec, seed, policy, builder).unwrap_or_else(|e| fail(e)))
        .min_by(|a, b| a.run_s.total_cmp(&b.run_s))
        .expect("at least one run");
    println!("{}", serde_json::to_string(&best).expect("serialisable"));
}
