//! Workload JSON files, then validation against a 4-CPU machine: never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(w) = numasim_core::workload::Workload::from_json("w.json", text) {
        let _ = w.validate("w.json", 4);
    }
});
