//! The running host, read from `/sys/devices/system/node`.
//!
//! ```text
//!   ROOT/sys/devices/system/node/
//!     node0/cpulist    "0-3,8-11"
//!     node0/distance   "10 21"
//!     node1/...
//! ```
//! The reader takes a root prefix so tests give it fake sysfs trees.
//!
//! 1. List the `nodeN` directories, sorted by N (ids may be sparse; they are renumbered densely,
//!    as the distance rows already are).
//! 2. Read each node's `cpulist` (empty for a memory-only node) and `distance` row.
//! 3. If the CPU ids are not exactly `0..C-1`, renumber them in increasing order and warn.

use std::path::Path;

use crate::error::{InputError, Result};

use super::distance::{DistanceTable, RawRow};
use super::{Machine, MachineParts, MAX_CPUS, MAX_NODES};

/// The largest sysfs file read (a node's `cpulist` or `distance` row): a row of
/// [`MAX_NODES`] three-digit distances is 16 KiB; 1 MiB leaves room and bounds the read.
const MAX_SYSFS_FILE_BYTES: u64 = 1 << 20;

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpulist(origin: &str, text: &str) -> Result<Vec<usize>> {
    let mut cpus = Vec::new();
    let bad = |part: &str| InputError::new(origin, format!("'{part}' is not a CPU range"));
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (
                a.parse::<usize>().map_err(|_| bad(part))?,
                b.parse::<usize>().map_err(|_| bad(part))?,
            ),
            None => {
                let v = part.parse::<usize>().map_err(|_| bad(part))?;
                (v, v)
            }
        };
        if lo > hi {
            return Err(bad(part));
        }
        // Checked before the range is expanded: `0-99999999999` is not a list to allocate.
        if hi - lo >= MAX_CPUS - cpus.len().min(MAX_CPUS) {
            return Err(InputError::new(
                origin,
                format!("more than {MAX_CPUS} CPUs listed (the most a machine has)"),
            ));
        }
        cpus.extend(lo..=hi);
    }
    Ok(cpus)
}

/// Reads the machine under `root` (`/` for the real host).
pub fn read(root: &Path) -> Result<Machine> {
    let dir = root.join("sys/devices/system/node");
    let origin = dir.display().to_string();
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| InputError::new(&origin, format!("cannot read the host's NUMA nodes: {e}")))?;
    let mut ids: Vec<usize> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        return Err(InputError::new(&origin, "no nodeN directory found"));
    }
    if ids.len() > MAX_NODES {
        return Err(InputError::new(
            &origin,
            format!(
                "{} nodeN directories, more than {MAX_NODES} (the most a machine has)",
                ids.len()
            ),
        ));
    }
    let mut warnings = Vec::new();
    let mut real_cpus = Vec::new();
    let mut rows = Vec::new();
    for (r, id) in ids.iter().enumerate() {
        let node_dir = dir.join(format!("node{id}"));
        let read = |name: &str| {
            let path = node_dir.join(name);
            let origin = path.display().to_string();
            crate::textfile::read_text(&origin, &path, "the file", MAX_SYSFS_FILE_BYTES)
        };
        let cpulist_origin = node_dir.join("cpulist").display().to_string();
        real_cpus.push(parse_cpulist(&cpulist_origin, &read("cpulist")?)?);
        let distance_origin = node_dir.join("distance").display().to_string();
        let cells = read("distance")?
            .split_whitespace()
            .enumerate()
            .map(|(c, t)| {
                t.parse::<i64>().map_err(|_| {
                    InputError::new(&distance_origin, format!("'{t}' is not an integer"))
                        .at(format!("row {r}, column {c}"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        rows.push(RawRow::new(None, cells));
    }
    if ids.iter().enumerate().any(|(i, &id)| i != id) {
        warnings.push(format!(
            "{origin}: node ids {ids:?} are sparse; numasim numbers them 0..{}",
            ids.len() - 1
        ));
    }
    let table = DistanceTable::from_rows(&origin, rows)?;
    let mut all: Vec<usize> = real_cpus.iter().flatten().copied().collect();
    all.sort_unstable();
    let dense = all.iter().enumerate().all(|(i, &c)| i == c);
    let node_cpus = if dense {
        real_cpus
    } else {
        warnings.push(format!(
            "{origin}: CPU ids are not 0..{}; numasim renumbers them in increasing order",
            all.len().saturating_sub(1)
        ));
        real_cpus
            .iter()
            .map(|l| {
                l.iter()
                    .map(|c| all.binary_search(c).expect("present"))
                    .collect()
            })
            .collect()
    };
    let mut machine = Machine::new(
        &origin,
        MachineParts {
            name: "host".into(),
            description: format!("this host, read from {origin}"),
            source: origin.clone(),
            node_cpus,
            speeds: None,
            distances: table,
        },
    )?;
    machine.warnings.extend(warnings);
    Ok(machine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists() {
        assert_eq!(
            parse_cpulist("f", "0-2,5,7-8\n").unwrap(),
            vec![0, 1, 2, 5, 7, 8]
        );
        assert_eq!(parse_cpulist("f", "\n").unwrap(), Vec::<usize>::new());
        assert!(parse_cpulist("f", "3-1").is_err());
        assert!(parse_cpulist("f", "a").is_err());
        // A range too large to be a machine's is refused before it is expanded.
        let e = parse_cpulist("f", "0-99999999999").unwrap_err().to_string();
        assert!(e.contains("more than 16384 CPUs"), "{e}");
        assert_eq!(parse_cpulist("f", "0-16383").unwrap().len(), MAX_CPUS);
        assert!(parse_cpulist("f", "0-16382,20000").is_ok());
        assert!(parse_cpulist("f", "0-16383,20000").is_err());
    }
}
