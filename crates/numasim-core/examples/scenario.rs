//! One benchmark scenario from the command line, without Python: for profiling (`perf record`)
//! and quick before/after checks of the engine. Prints `bench::run`'s figures as JSON, the
//! fastest of `repeat` runs. With `NUMASIM_WATCH=1` the engine asks a paced watch that never
//! stops it as it runs (what the bindings do, minus taking the interpreter back every 20 ms):
//! the cost of asking.
//!
//! ```text
//! cargo run --release -p numasim-core --example scenario -- \
//!     MACHINE.toml "n=500,kind=cpu,exec=200,arrival=random" [domains] [policy] [seed] [repeat]
//! ```

use std::path::Path;

use std::ops::ControlFlow;

use numasim_core::bench;
use numasim_core::engine::{Paced, Progress, Watch};

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
    let watched = std::env::var("NUMASIM_WATCH").is_ok_and(|v| v == "1");
    let mut never_stop = Paced::new(|_: &Progress| ControlFlow::Continue(()));
    let best = (0..repeat.max(1))
        .map(|_| {
            let watch: Option<&mut dyn Watch> = if watched { Some(&mut never_stop) } else { None };
            bench::run(&m, spec, seed, policy, builder, watch)
                .unwrap_or_else(|e| fail(e))
                .expect("a watch that never stops")
        })
        .min_by(|a, b| a.run_s.total_cmp(&b.run_s))
        .expect("at least one run");
    println!("{}", serde_json::to_string(&best).expect("serialisable"));
}
