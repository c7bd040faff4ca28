//! The distance-table text parser (sysfs rows or `numactl --hardware` blocks): any text gives a
//! table or an InputError, never a panic; a table then builds a machine and every builder runs.
#![no_main]
use libfuzzer_sys::fuzz_target;
use numasim_core::machine::file::matrix_machine;

fuzz_target!(|text: &str| {
    if let Ok(m) = matrix_machine("t.slit", text, Some(1), "--cpus-per-node") {
        if m.nodes() <= 64 {
            for b in numasim_core::Builder::ALL {
                let _ = b.build(&m, &Default::default());
            }
        }
    }
});
