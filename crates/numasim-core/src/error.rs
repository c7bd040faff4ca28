//! Errors of the core: every failure a user can cause is an [`InputError`] that names the
//! input (file, preset, option), the place in it (line, row, column or field) and the problem,
//! in one line. The bindings turn it into `numasim.InputError`; the CLI prints it and exits 2.

use std::fmt;

/// A problem with user input: one line naming the file, the place in it and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    /// The file, preset or option the input came from.
    pub origin: String,
    /// Where in it (e.g. `line 4: row 3, column 5` or `field cpus_per_node`); may be empty.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

impl InputError {
    /// An error about `origin` as a whole.
    pub fn new(origin: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            origin: origin.into(),
            location: String::new(),
            message: message.into(),
        }
    }

    /// The same error, placed at `location` inside the origin (an empty `location` places it
    /// nowhere: the error prints as `origin: message`).
    #[must_use]
    pub fn at(mut self, location: impl Into<String>) -> Self {
        self.location = location.into();
        self
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Messages must stay on one line whatever the parsers we wrap print.
        let message = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if self.location.is_empty() {
            write!(f, "{}: {}", self.origin, message)
        } else {
            write!(f, "{}: {}: {}", self.origin, self.location, message)
        }
    }
}

/// Result alias of the core.
pub type Result<T, E = InputError> = std::result::Result<T, E>;

/// Rust type names in serde's "expected …" phrases, in the words a user reads.
const PLAIN_TYPES: [(&str, &str); 10] = [
    ("usize", "a whole number ≥ 0"),
    ("u64", "a whole number ≥ 0"),
    ("u32", "a whole number from 0 to 4294967295"),
    ("u8", "a whole number from 0 to 255"),
    ("i64", "a whole number"),
    ("i32", "a whole number"),
    ("f64", "a number"),
    ("f32", "a number"),
    ("a sequence", "a list"),
    ("a map", "a table of keys and values"),
];

/// serde's message with Rust type names replaced by plain words ("expected usize" → "expected
/// a whole number ≥ 0"), and `expected` wording for a specific key when one is known.
pub(crate) fn plain_serde_message(message: &str, expected: Option<&str>) -> String {
    // serde says "sequence"/"map" for what it found.
    let mut msg = message
        .replace("invalid type: sequence", "invalid type: a list")
        .replace("invalid type: map", "invalid type: a table");
    if let Some(want) = expected {
        if let Some(i) = msg.find(", expected ") {
            msg.truncate(i);
            msg.push_str(", expected ");
            msg.push_str(want);
            return msg;
        }
    }
    for (rust, plain) in PLAIN_TYPES {
        for (from, to) in [
            (format!("expected {rust}"), format!("expected {plain}")),
            (
                format!("invalid type: {rust}"),
                format!("invalid type: {plain}"),
            ),
        ] {
            msg = msg.replace(&from, &to);
        }
    }
    msg
}

/// A `serde_json` error with its key path, as one [`InputError`] line:
/// `origin: line L, column C, key processes[3].demand_ns: <problem>`.
pub(crate) fn serde_json_error(
    origin: &str,
    e: &serde_path_to_error::Error<serde_json::Error>,
) -> InputError {
    let inner = e.inner();
    let full = inner.to_string();
    let msg = full.split(" at line ").next().unwrap_or(&full);
    let path = e.path().to_string();
    let mut location = format!("line {}, column {}", inner.line(), inner.column());
    if path != "." {
        location.push_str(&format!(", key {path}"));
    }
    InputError::new(origin, plain_serde_message(msg, None)).at(location)
}
