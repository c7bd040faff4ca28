//! Policy settings (`name[:key=value,...]`): never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = numasim_core::policy::validate("--policy", text);
    let _ = numasim_core::policy::base_name(text);
});
