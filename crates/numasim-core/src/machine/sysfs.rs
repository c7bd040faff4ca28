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
use super::{Machine, MachineParts};

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
    let mut warnings = Vec::new();
    let mut real_cpus = Vec::new();
    let mut rows = Vec::new();
    for (r, id) in ids.iter().enumerate() {
        let node_dir = dir.join(format!("node{id}"));
        let read = |name: &str| {
            let path = node_dir.join(name);
            std::fs::read_to_string(&path).map_err(|e| {
                InputError::new(path.display().to_string(), format!("cannot read: {e}"))
            })
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
    }
}
