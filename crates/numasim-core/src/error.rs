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

    /// The same error, placed at `location` inside the origin.
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
