//! The TOML machine-file parser: any text gives a machine or an InputError, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = numasim_core::machine::file::parse("m.toml", text, None);
});
