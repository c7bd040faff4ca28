//! Input files read whole, with a size limit: a file of numasim's (a machine file, a distance
//! table) is text of a bounded size, so a link to `/dev/zero`, a binary or a huge file is refused
//! at once instead of being read until memory runs out.
//!
//! 1. The file is read in chunks of [`CHUNK_BYTES`]; each chunk is checked for a NUL byte,
//!    which no text file holds (so `/dev/zero` stops after the first chunk).
//! 2. Reading stops once the file exceeds its limit (one byte past it is enough to know).
//! 3. The bytes must be UTF-8; the first bad byte is named.

use std::io::Read;
use std::path::Path;

use crate::error::{InputError, Result};

/// The largest machine file or distance table numasim reads: 128 MiB. A distance table of
/// [`crate::machine::MAX_NODES`] nodes with three-digit values and spaces is 4 096² × 4 bytes
/// = 64 MiB; twice that leaves room for comments and wider spacing.
pub const MAX_MACHINE_FILE_BYTES: u64 = 128 << 20;

/// The size of one read.
const CHUNK_BYTES: usize = 1 << 20;

/// The text of `path`, at most `max_bytes` long. `what` names the file in messages ("the
/// distance file"); `origin` is the name errors start with.
pub fn read_text(origin: &str, path: &Path, what: &str, max_bytes: u64) -> Result<String> {
    let file = std::fs::File::open(path)
        .map_err(|e| InputError::new(origin, format!("cannot read {what}: {}", plain_io(&e))))?;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; CHUNK_BYTES];
    let mut reader = file.take(max_bytes + 1);
    loop {
        let got = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(InputError::new(
                    origin,
                    format!("cannot read {what}: {}", plain_io(&e)),
                ))
            }
        };
        if let Some(at) = chunk[..got].iter().position(|&b| b == 0) {
            return Err(InputError::new(
                origin,
                format!(
                    "not a text file: byte {} is a NUL byte ({what} is text)",
                    bytes.len() + at
                ),
            ));
        }
        bytes.extend_from_slice(&chunk[..got]);
        if bytes.len() as u64 > max_bytes {
            return Err(InputError::new(
                origin,
                format!(
                    "{what} is larger than {}, the most numasim reads",
                    size_text(max_bytes)
                ),
            ));
        }
    }
    String::from_utf8(bytes).map_err(|e| {
        InputError::new(
            origin,
            format!(
                "not a text file: byte {} is not valid UTF-8 ({what} is text)",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// `bytes` in MiB when it is a whole number of them, else in bytes.
fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// The OS's words for an I/O error, without Rust's "(os error N)" suffix.
fn plain_io(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_zero_is_refused_at_the_first_chunk() {
        let e = read_text("z", Path::new("/dev/zero"), "the distance file", 1 << 30).unwrap_err();
        assert_eq!(
            e.to_string(),
            "z: not a text file: byte 0 is a NUL byte (the distance file is text)"
        );
    }

    #[test]
    fn a_file_over_the_limit_is_refused() {
        let dir = std::env::temp_dir().join(format!("numasim-textfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.txt");
        std::fs::write(&path, "10 20\n".repeat(1000)).unwrap();
        let e = read_text("big", &path, "the distance file", 1 << 10).unwrap_err();
        assert!(e.to_string().contains("larger than 1024 bytes"), "{e}");
        assert_eq!(read_text("big", &path, "f", 1 << 20).unwrap().len(), 6000);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_file_is_named() {
        let e = read_text("m", Path::new("/no/such"), "the machine file", 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "m: cannot read the machine file: No such file or directory"
        );
    }
}
