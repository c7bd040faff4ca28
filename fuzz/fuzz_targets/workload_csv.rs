//! Workload CSV files, then validation against a 4-CPU machine: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(w) = numasim_core::workload::Workload::from_csv("w.csv", text) {
        let _ = w.validate("w.csv", 4);
    }
});
