//! The SLIT distance table: validation and the plain-text formats.
//!
//! ```text
//!   sysfs rows (one per node):         numactl --hardware block:
//!   10 20 30                           node distances:
//!   20 10 20                           node   0   1
//!   30 20 10                             0:  10  21
//!                                        1:  21  10
//! ```
//!
//! Validation, in this order, each failure naming line, row and column (rows and columns are
//! node ids, counted from 0):
//! 1. the table is not empty; every token is an integer;
//! 2. it is square (every row has as many values as there are rows);
//! 3. every value is in 10..=255 (SLIT entries are one byte; 10 is `LOCAL_DISTANCE`);
//! 4. the diagonal is strictly the row minimum and equals 10 — the kernel's `slit_valid()`
//!    (drivers/acpi/numa) refuses an off-diagonal value ≤ 10 the same way;
//! 5. an asymmetric table is accepted with a warning, as the kernel does.

use serde::{Serialize, Serializer};

use crate::error::{InputError, Result};

use super::LOCAL_DISTANCE;

/// Largest SLIT value: entries are `u8` (`numa_set_distance` refuses wider ones).
pub const MAX_DISTANCE: i64 = 255;

/// One row as read from an input, before validation.
#[derive(Debug, Clone)]
pub struct RawRow {
    /// 1-based line of the input the row came from, when it came from text.
    pub line: Option<usize>,
    /// The values, as written.
    pub cells: Vec<i64>,
}

impl RawRow {
    /// A row read from `line` (if known).
    pub fn new(line: Option<usize>, cells: Vec<i64>) -> Self {
        Self { line, cells }
    }
}

/// A validated, square SLIT distance table.
#[derive(Debug, Clone, PartialEq)]
pub struct DistanceTable {
    n: usize,
    values: Vec<u32>,
    warnings: Vec<String>,
}

impl Serialize for DistanceTable {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.rows().serialize(s)
    }
}

fn place(line: Option<usize>, row: usize, col: Option<usize>) -> String {
    let mut at = match line {
        Some(l) => format!("line {l}: row {row}"),
        None => format!("row {row}"),
    };
    if let Some(c) = col {
        at.push_str(&format!(", column {c}"));
    }
    at
}

impl DistanceTable {
    /// Validates raw rows read from `origin`.
    pub fn from_rows(origin: &str, rows: Vec<RawRow>) -> Result<Self> {
        let n = rows.len();
        if n == 0 {
            return Err(InputError::new(origin, "the distance table is empty"));
        }
        for (r, row) in rows.iter().enumerate() {
            if row.cells.len() != n {
                return Err(InputError::new(
                    origin,
                    format!(
                        "has {} values but the table has {n} rows; a distance table must be square",
                        row.cells.len()
                    ),
                )
                .at(place(row.line, r, None)));
            }
        }
        for (r, row) in rows.iter().enumerate() {
            for (c, &v) in row.cells.iter().enumerate() {
                let problem = if v < i64::from(LOCAL_DISTANCE) {
                    format!("{v} is below 10, the local distance")
                } else if v > MAX_DISTANCE {
                    format!("{v} is above 255, the largest SLIT value")
                } else {
                    continue;
                };
                return Err(InputError::new(origin, problem).at(place(row.line, r, Some(c))));
            }
        }
        for (r, row) in rows.iter().enumerate() {
            let diag = row.cells[r];
            if let Some((c, &v)) = row
                .cells
                .iter()
                .enumerate()
                .find(|&(c, &v)| c != r && v <= diag)
            {
                return Err(InputError::new(
                    origin,
                    format!(
                        "{v} is not larger than the diagonal value {diag}; the diagonal must be the row minimum"
                    ),
                )
                .at(place(row.line, r, Some(c))));
            }
            if diag != i64::from(LOCAL_DISTANCE) {
                return Err(InputError::new(
                    origin,
                    format!("the diagonal value is {diag}; it must be 10, the local distance"),
                )
                .at(place(row.line, r, Some(r))));
            }
        }
        let values: Vec<u32> = rows
            .iter()
            .flat_map(|row| row.cells.iter().map(|&v| v as u32))
            .collect();
        let mut warnings = Vec::new();
        'outer: for r in 0..n {
            for c in r + 1..n {
                let (a, b) = (values[r * n + c], values[c * n + r]);
                if a != b {
                    warnings.push(format!(
                        "{origin}: the distance table is asymmetric (row {r}, column {c} is {a} but row {c}, column {r} is {b}); accepted, as the kernel does"
                    ));
                    break 'outer;
                }
            }
        }
        Ok(Self {
            n,
            values,
            warnings,
        })
    }

    /// A table from already-known values (generators), validated like any input.
    pub fn from_matrix(origin: &str, rows: &[Vec<u32>]) -> Result<Self> {
        Self::from_rows(
            origin,
            rows.iter()
                .map(|r| RawRow::new(None, r.iter().map(|&v| i64::from(v)).collect()))
                .collect(),
        )
    }

    /// Number of nodes (rows).
    pub fn nodes(&self) -> usize {
        self.n
    }

    /// Distance from node `from` to node `to`.
    pub fn get(&self, from: usize, to: usize) -> u32 {
        self.values[from * self.n + to]
    }

    /// The table as rows.
    pub fn rows(&self) -> Vec<Vec<u32>> {
        self.values.chunks(self.n).map(<[u32]>::to_vec).collect()
    }

    /// Sorted distinct values.
    pub fn distinct_values(&self) -> Vec<u32> {
        let mut v = self.values.clone();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Warnings raised while validating (asymmetry).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// Parses a plain-text distance matrix: sysfs-style rows, or the `node distances:` block of
/// `numactl --hardware` (its CPU lists are read by [`parse_text_with_cpus`]). `#` starts a
/// comment.
pub fn parse_text(origin: &str, text: &str) -> Result<DistanceTable> {
    parse_text_with_cpus(origin, text).map(|(table, _)| table)
}

/// [`parse_text`], and for `numactl --hardware` output the CPUs of each node as its
/// `node N cpus:` lines list them (`None` for sysfs rows, or numactl output without them).
///
/// numactl output is checked whole: `available: N nodes` must match the distance rows and the
/// CPU lines, every node has one CPU line, every CPU id is a whole number below
/// [`super::MAX_CPUS`] and on one node only.
pub fn parse_text_with_cpus(
    origin: &str,
    text: &str,
) -> Result<(DistanceTable, Option<Vec<Vec<usize>>>)> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let too_many = |what: String, line: usize| {
        InputError::new(
            origin,
            format!(
                "{what}: more than {}, the most numasim builds",
                super::MAX_NODES
            ),
        )
        .at(format!("line {line}"))
    };
    match lines
        .iter()
        .position(|(_, l)| l.eq_ignore_ascii_case("node distances:"))
    {
        Some(at) => {
            let rows = parse_numactl(origin, &lines[at + 1..])?;
            let cpus = numactl_cpus(origin, &lines[..at], rows.len())?;
            Ok((DistanceTable::from_rows(origin, rows)?, cpus))
        }
        None => {
            // Checked before any value is parsed: a table over the cap is refused at once.
            if let Some(&(line, first)) = lines.first() {
                let width = first.split_whitespace().count();
                if width > super::MAX_NODES {
                    return Err(too_many(format!("the first row has {width} values"), line));
                }
            }
            if lines.len() > super::MAX_NODES {
                let (line, _) = lines[super::MAX_NODES];
                return Err(too_many(
                    format!("the table has {} rows", lines.len()),
                    line,
                ));
            }
            let rows = lines
                .iter()
                .enumerate()
                .map(|(r, &(line, l))| parse_cells(origin, line, r, l.split_whitespace()))
                .collect::<Result<Vec<_>>>()?;
            Ok((DistanceTable::from_rows(origin, rows)?, None))
        }
    }
}

/// The `available: N nodes` and `node N cpus: ...` lines of numactl output (before its
/// `node distances:` block), checked against each other and the `rows` distance rows.
fn numactl_cpus(
    origin: &str,
    lines: &[(usize, &str)],
    rows: usize,
) -> Result<Option<Vec<Vec<usize>>>> {
    let mut available: Option<(usize, usize)> = None;
    let mut lists: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut owner: std::collections::BTreeMap<usize, usize> = std::collections::BTreeMap::new();
    for &(line, l) in lines {
        let at = |msg: String| InputError::new(origin, msg).at(format!("line {line}"));
        if let Some(rest) = l.strip_prefix("available:") {
            let count = rest.split_whitespace().next().unwrap_or("");
            let n = count
                .parse::<usize>()
                .map_err(|_| at(format!("'{count}' is not a node count")))?;
            available = Some((line, n));
            continue;
        }
        let Some((head, list)) = l.split_once("cpus:") else {
            continue; // size, free and other lines of numactl's output
        };
        let mut words = head.split_whitespace();
        let (Some("node"), Some(id), None) = (words.next(), words.next(), words.next()) else {
            return Err(at(format!("'{head}cpus:' is not 'node N cpus:'")));
        };
        let node = id
            .parse::<usize>()
            .map_err(|_| at(format!("'{id}' is not a node number")))?;
        if node != lists.len() {
            return Err(at(format!(
                "the CPUs of node {node} come where those of node {} are expected",
                lists.len()
            )));
        }
        let mut cpus = Vec::new();
        for word in list.split_whitespace() {
            let cpu = word
                .parse::<usize>()
                .ok()
                .filter(|&c| c < super::MAX_CPUS)
                .ok_or_else(|| {
                    at(format!(
                        "node {node} cpus: '{word}' is not a CPU id (a whole number below {})",
                        super::MAX_CPUS
                    ))
                })?;
            if let Some(other) = owner.insert(cpu, node) {
                return Err(at(format!(
                    "cpu {cpu} is listed in node {other} and node {node}"
                )));
            }
            cpus.push(cpu);
        }
        lists.push((line, cpus));
    }
    if let Some((line, n)) = available {
        if n != rows {
            return Err(InputError::new(
                origin,
                format!("says {n} nodes but its distance table has {rows} rows"),
            )
            .at(format!("line {line}")));
        }
    }
    if lists.is_empty() {
        return Ok(None);
    }
    if lists.len() != rows {
        let (line, _) = lists[lists.len() - 1];
        return Err(InputError::new(
            origin,
            format!(
                "lists the CPUs of {} nodes but its distance table has {rows} rows",
                lists.len()
            ),
        )
        .at(format!("line {line}")));
    }
    Ok(Some(lists.into_iter().map(|(_, cpus)| cpus).collect()))
}

fn parse_cells<'a>(
    origin: &str,
    line: usize,
    row: usize,
    tokens: impl Iterator<Item = &'a str>,
) -> Result<RawRow> {
    let cells = tokens
        .enumerate()
        .map(|(c, t)| {
            t.parse::<i64>().map_err(|_| {
                InputError::new(origin, format!("'{t}' is not an integer")).at(place(
                    Some(line),
                    row,
                    Some(c),
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RawRow::new(Some(line), cells))
}

fn parse_numactl(origin: &str, lines: &[(usize, &str)]) -> Result<Vec<RawRow>> {
    let Some(&(header_line, header)) = lines.first() else {
        return Err(InputError::new(
            origin,
            "'node distances:' is not followed by a header line",
        ));
    };
    let mut header_tokens = header.split_whitespace();
    if header_tokens.next() != Some("node") {
        return Err(InputError::new(
            origin,
            format!("expected the header 'node 0 1 ...' after 'node distances:', found '{header}'"),
        )
        .at(format!("line {header_line}")));
    }
    let columns = header_tokens.count();
    if columns > super::MAX_NODES {
        return Err(InputError::new(
            origin,
            format!(
                "the header names {columns} nodes: more than {}, the most numasim builds",
                super::MAX_NODES
            ),
        )
        .at(format!("line {header_line}")));
    }
    let mut rows = Vec::new();
    for &(line, l) in &lines[1..] {
        let Some((label, rest)) = l.split_once(':') else {
            break;
        };
        let Ok(label) = label.trim().parse::<usize>() else {
            break;
        };
        let row = rows.len();
        if label != row {
            return Err(InputError::new(
                origin,
                format!("row is labelled node {label}, expected node {row}"),
            )
            .at(format!("line {line}")));
        }
        let parsed = parse_cells(origin, line, row, rest.split_whitespace())?;
        if parsed.cells.len() != columns {
            return Err(InputError::new(
                origin,
                format!(
                    "has {} values but the header names {columns} nodes",
                    parsed.cells.len()
                ),
            )
            .at(place(Some(line), row, None)));
        }
        rows.push(parsed);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_rows_parse() {
        let t = parse_text("f", "10 20\n# comment\n20 10\n").unwrap();
        assert_eq!(t.rows(), vec![vec![10, 20], vec![20, 10]]);
        assert!(t.warnings().is_empty());
    }

    #[test]
    fn numactl_block_parses_and_skips_the_rest() {
        let text = "available: 2 nodes (0-1)\nnode 0 cpus: 0 1\nnode 1 cpus: 2 3\nnode distances:\nnode   0   1 \n  0:  10  21 \n  1:  21  10 \n";
        let t = parse_text("f", text).unwrap();
        assert_eq!(t.rows(), vec![vec![10, 21], vec![21, 10]]);
    }

    #[test]
    fn numactl_cpu_lists_are_read_and_checked() {
        let head = "node distances:\nnode 0 1\n0: 10 20\n1: 20 10\n";
        let ok = format!("available: 2 nodes (0-1)\nnode 0 cpus: 0 2 4\nnode 0 size: 10 MB\nnode 1 cpus: 1 3\n{head}");
        let (_, cpus) = parse_text_with_cpus("f", &ok).unwrap();
        assert_eq!(cpus, Some(vec![vec![0, 2, 4], vec![1, 3]]));
        for (text, message) in [
            (
                "node 0 cpus: 0 x\nnode 1 cpus: 1\n",
                "f: line 1: node 0 cpus: 'x' is not a CPU id (a whole number below 16384)",
            ),
            (
                "node 0 cpus: 0 1\nnode 1 cpus: 1\n",
                "f: line 2: cpu 1 is listed in node 0 and node 1",
            ),
            (
                "available: 3 nodes (0-2)\n",
                "f: line 1: says 3 nodes but its distance table has 2 rows",
            ),
            (
                "node 0 cpus: 0\n",
                "f: line 1: lists the CPUs of 1 nodes but its distance table has 2 rows",
            ),
            (
                "node 1 cpus: 0\nnode 0 cpus: 1\n",
                "f: line 1: the CPUs of node 1 come where those of node 0 are expected",
            ),
        ] {
            let e = parse_text_with_cpus("f", &format!("{text}{head}")).unwrap_err();
            assert_eq!(e.to_string(), message);
        }
    }

    #[test]
    fn a_table_over_the_node_cap_is_refused_before_parsing() {
        let row = "10 ".repeat(super::super::MAX_NODES + 1);
        let e = parse_text("f", &format!("{row}\nnot even a number\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "f: line 1: the first row has 4097 values: more than 4096, the most numasim builds"
        );
    }

    #[test]
    fn asymmetric_is_a_warning() {
        let t = parse_text("f", "10 20\n30 10\n").unwrap();
        assert_eq!(t.warnings().len(), 1);
        assert!(t.warnings()[0].contains("asymmetric"));
    }

    #[test]
    fn errors_name_line_row_and_column() {
        let e = parse_text("f.slit", "10 20\n20 x\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.slit: line 2: row 1, column 1: 'x' is not an integer"
        );
        let e = parse_text("f.slit", "10 20\n9 10\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.slit: line 2: row 1, column 0: 9 is below 10, the local distance"
        );
    }
}
