//! Machine files as JSON (what YAML machine files become): never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = numasim_core::machine::file::parse_json("m.yaml", text, None);
});
