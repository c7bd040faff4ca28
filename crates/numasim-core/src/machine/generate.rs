//! Synthetic distance tables (the machine generators).
//!
//! ```text
//!   two-level   10 on the diagonal, `remote` elsewhere
//!   hierarchy   group_sizes [4, 2], distances [17, 29, 40]: nodes in one group of 4 → 17,
//!               in one group of 4·2 = 8 → 29, otherwise → 40
//!   ring        10 + step × (hops around the ring)
//!   mesh/torus  10 + step × Manhattan hops on a rows × cols grid (torus: with wrap-around)
//! ```
//! Every generated table still goes through [`DistanceTable`] validation, so a generator whose
//! parameters exceed 255 fails like a hand-written table would.

use serde::Deserialize;

use crate::error::{InputError, Result};

use super::DistanceTable;

/// A generator of distance tables, as written in a machine file's `[generator]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Generator {
    /// Fully connected: 10 local, `remote` between any two nodes.
    TwoLevel { nodes: usize, remote: u32 },
    /// Hierarchy of groups: `group_sizes[k]` groups of level k form one group of level k+1;
    /// `distances[k]` is the distance inside a level-k group, the last one across the top.
    Hierarchy {
        nodes: usize,
        group_sizes: Vec<usize>,
        distances: Vec<u32>,
    },
    /// A ring of `nodes`: 10 + step × hops.
    Ring { nodes: usize, step: u32 },
    /// A 2-D mesh: 10 + step × Manhattan hops.
    Mesh { rows: usize, cols: usize, step: u32 },
    /// A 2-D torus: 10 + step × Manhattan hops with wrap-around.
    Torus { rows: usize, cols: usize, step: u32 },
}

impl Generator {
    /// Number of nodes the generator makes.
    pub fn nodes(&self) -> usize {
        match self {
            Self::TwoLevel { nodes, .. }
            | Self::Hierarchy { nodes, .. }
            | Self::Ring { nodes, .. } => *nodes,
            // Saturating: an overflowing grid is refused by `table` as too large, not wrapped.
            Self::Mesh { rows, cols, .. } | Self::Torus { rows, cols, .. } => {
                rows.saturating_mul(*cols)
            }
        }
    }

    /// Builds the table; `origin` names the input in error messages.
    pub fn table(&self, origin: &str) -> Result<DistanceTable> {
        let field_error = |msg: &str| InputError::new(origin, msg).at("field generator");
        let n = self.nodes();
        if n == 0 {
            return Err(field_error("a generator needs at least one node"));
        }
        if n > super::MAX_NODES {
            return Err(field_error(&format!(
                "{n} nodes is more than {}, the most numasim builds",
                super::MAX_NODES
            )));
        }
        let hops = |a: usize, b: usize, len: usize, wrap: bool| {
            let d = a.abs_diff(b);
            if wrap {
                d.min(len - d)
            } else {
                d
            }
        };
        let dist = |i: usize, j: usize| -> u64 {
            if i == j {
                return 10;
            }
            match self {
                Self::TwoLevel { remote, .. } => u64::from(*remote),
                Self::Hierarchy {
                    group_sizes,
                    distances,
                    ..
                } => {
                    let mut size = 1usize;
                    for (k, g) in group_sizes.iter().enumerate() {
                        size = size.saturating_mul(*g);
                        if i / size == j / size {
                            return u64::from(distances[k]);
                        }
                    }
                    u64::from(*distances.last().expect("checked non-empty"))
                }
                Self::Ring { step, nodes } => {
                    10 + u64::from(*step) * hops(i, j, *nodes, true) as u64
                }
                Self::Mesh { cols, step, .. } | Self::Torus { cols, step, .. } => {
                    let wrap = matches!(self, Self::Torus { .. });
                    let rows = n / cols;
                    let h = hops(i / cols, j / cols, rows, wrap)
                        + hops(i % cols, j % cols, *cols, wrap);
                    10 + u64::from(*step) * h as u64
                }
            }
        };
        if let Self::Hierarchy {
            group_sizes,
            distances,
            ..
        } = self
        {
            if distances.len() != group_sizes.len() + 1 {
                return Err(field_error(&format!(
                    "a hierarchy with {} group sizes needs {} distances, got {}",
                    group_sizes.len(),
                    group_sizes.len() + 1,
                    distances.len()
                )));
            }
            if group_sizes.contains(&0) {
                return Err(field_error("group sizes must be at least 1"));
            }
            // Each level's groups must tile the nodes: otherwise the last group is cut short
            // and the table describes no machine anyone built.
            let mut size = 1usize;
            for g in group_sizes {
                size = size.saturating_mul(*g);
                if !n.is_multiple_of(size) {
                    return Err(field_error(&format!(
                        "group_sizes {group_sizes:?} make groups of {size} nodes, which do not \
                         divide the {n} nodes"
                    )));
                }
            }
        }
        let rows: Vec<Vec<u32>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| u32::try_from(dist(i, j)).unwrap_or(u32::MAX))
                    .collect()
            })
            .collect();
        DistanceTable::from_matrix(origin, &rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_matches_the_kernel_capture_table() {
        let t = Generator::Ring { nodes: 8, step: 10 }.table("g").unwrap();
        assert_eq!(t.rows()[0], vec![10, 20, 30, 40, 50, 40, 30, 20]);
    }

    #[test]
    fn hierarchy_groups() {
        let g = Generator::Hierarchy {
            nodes: 8,
            group_sizes: vec![4],
            distances: vec![20, 30],
        };
        let t = g.table("g").unwrap();
        assert_eq!(t.rows()[0], vec![10, 20, 20, 20, 30, 30, 30, 30]);
        assert_eq!(t.rows()[5], vec![30, 30, 30, 30, 20, 10, 20, 20]);
    }

    #[test]
    fn torus_wraps_mesh_does_not() {
        let mesh = Generator::Mesh {
            rows: 3,
            cols: 3,
            step: 5,
        }
        .table("g")
        .unwrap();
        let torus = Generator::Torus {
            rows: 3,
            cols: 3,
            step: 5,
        }
        .table("g")
        .unwrap();
        assert_eq!(mesh.get(0, 8), 30);
        assert_eq!(torus.get(0, 8), 20);
    }

    #[test]
    fn too_far_is_refused() {
        let e = Generator::Ring {
            nodes: 64,
            step: 10,
        }
        .table("g")
        .unwrap_err();
        assert!(e.to_string().contains("above 255"), "{e}");
    }
}
