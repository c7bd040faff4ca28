//! Workload specs (`n=300,kind=cpu,...`), generated for a 2-node × 2-CPU machine when small
//! enough to generate quickly: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use numasim_core::workload::WorkloadSpec;

fuzz_target!(|text: &str| {
    if let Ok(spec) = WorkloadSpec::parse("--workload", text) {
        if spec.n <= 1000 {
            let _ = spec.generate("--workload", 1, &[vec![0, 1], vec![2, 3]]);
        }
    }
});
