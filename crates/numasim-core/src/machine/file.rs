//! TOML machine files (and the presets, which are such files shipped in the package).
//!
//! ```toml
//! name = "hp-superdome-16"
//! description = "HP Superdome, 16 cells × 4 CPUs, crossbars of 4 cells"
//! source = "..."
//! cpus_per_node = 4                 # or: cpus = [4, 4, 0, 4]  (CPUs of each node)
//! # exactly one of: distance_file = "x.slit" | distances = [[10, 17], ...] | [generator]
//! [generator]
//! kind = "hierarchy"
//! nodes = 16
//! group_sizes = [4]
//! distances = [17, 29]
//! [speed]                            # optional
//! fast = 2.0
//! fast_cpus = "first-half"          # or "none", or a list of CPU ids
//! ```
//!
//! Unknown keys are errors (a typo must not silently fall back to a default). A relative
//! `distance_file` is read next to the machine file.

use std::path::Path;

use serde::Deserialize;

use crate::error::{InputError, Result};
use crate::textfile::{self, MAX_MACHINE_FILE_BYTES};

use super::distance::{self, DistanceTable, RawRow};
use super::generate::Generator;
use super::{contiguous_cpus, speeds_for, FastCpus, Machine, MachineParts};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineFile {
    name: Option<String>,
    description: Option<String>,
    source: Option<String>,
    cpus_per_node: Option<usize>,
    cpus: Option<Vec<usize>>,
    distances: Option<Vec<Vec<i64>>>,
    distance_file: Option<String>,
    generator: Option<Generator>,
    speed: Option<SpeedFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpeedFile {
    fast: f64,
    fast_cpus: FastCpusFile,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FastCpusFile {
    Named(String),
    List(Vec<usize>),
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, col)
}

/// Reads a machine file from disk.
pub fn read(path: &Path) -> Result<Machine> {
    let origin = path.display().to_string();
    let text = textfile::read_text(&origin, path, "the machine file", MAX_MACHINE_FILE_BYTES)?;
    parse(&origin, &text, path.parent())
}

/// Parses machine-file text. `base_dir` resolves a relative `distance_file`; `default_name`
/// is used when the file has no `name`.
pub fn parse(origin: &str, text: &str, base_dir: Option<&Path>) -> Result<Machine> {
    let de = toml::Deserializer::parse(text).map_err(|e| toml_error(origin, text, &e, None))?;
    let file: MachineFile = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        toml_error(origin, text, e.inner(), Some(&path))
    })?;
    build(origin, file, base_dir)
}

/// What a key of a machine file holds, in plain words, for type errors.
fn expected(path: &str) -> Option<&'static str> {
    let base = path.split('[').next().unwrap_or(path);
    Some(match base {
        "cpus_per_node" => "a whole number ≥ 1",
        "cpus" => "a list of whole numbers ≥ 0 (the CPUs of each node)",
        "distances" => "a list of rows of whole numbers (SLIT distances)",
        "name" | "description" | "source" | "distance_file" => "a string",
        "speed.fast" => "a number (the speed of a fast CPU, e.g. 2.0)",
        "speed.fast_cpus" => "\"first-half\", \"none\" or a list of CPU ids",
        "generator.nodes" => "a whole number ≥ 1",
        _ => return None,
    })
}

/// One line for a TOML error: line and column of the offending value, the key path, and the
/// problem in plain words.
fn toml_error(origin: &str, text: &str, e: &toml::de::Error, path: Option<&str>) -> InputError {
    let path = path.filter(|p| !p.is_empty() && *p != ".");
    let message = e.message().trim();
    let message = crate::error::plain_serde_message(message, path.and_then(expected));
    let mut location = e.span().map_or_else(String::new, |span| {
        let (line, col) = line_col(text, span.start);
        format!("line {line}, column {col}")
    });
    if let Some(p) = path {
        if !location.is_empty() {
            location.push_str(", ");
        }
        location.push_str(&format!("key {p}"));
    }
    InputError::new(origin, message).at(location)
}

/// Parses a machine file given as JSON of the same structure (the Python side turns YAML
/// machine files into it; serde_yaml is unmaintained). Errors name the key path: positions in
/// the generated JSON would mean nothing to the author of the YAML file.
pub fn parse_json(origin: &str, text: &str, base_dir: Option<&Path>) -> Result<Machine> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let file: MachineFile = serde_path_to_error::deserialize(de).map_err(|e| {
        let full = e.inner().to_string();
        let msg = full.split(" at line ").next().unwrap_or(&full);
        let path = e.path().to_string();
        let err = InputError::new(
            origin,
            crate::error::plain_serde_message(msg, expected(&path)),
        );
        if path == "." {
            err
        } else {
            err.at(format!("key {path}"))
        }
    })?;
    build(origin, file, base_dir)
}

fn build(origin: &str, file: MachineFile, base_dir: Option<&Path>) -> Result<Machine> {
    let field = |name: &str, msg: String| InputError::new(origin, msg).at(format!("field {name}"));

    let sources = [
        file.distances.is_some(),
        file.distance_file.is_some(),
        file.generator.is_some(),
    ];
    let table = match sources.iter().filter(|&&s| s).count() {
        0 => {
            return Err(InputError::new(
                origin,
                "no distances: give one of distances, distance_file or [generator]",
            ))
        }
        1 => {
            if let Some(rows) = file.distances {
                DistanceTable::from_rows(
                    &format!("{origin} (field distances)"),
                    rows.into_iter().map(|r| RawRow::new(None, r)).collect(),
                )?
            } else if let Some(rel) = &file.distance_file {
                let path = base_dir.unwrap_or(Path::new(".")).join(rel);
                let shown = path.display().to_string();
                let text =
                    textfile::read_text(&shown, &path, "the distance file", MAX_MACHINE_FILE_BYTES)
                        .map_err(|e| field("distance_file", e.to_string()))?;
                distance::parse_text(&path.display().to_string(), &text)?
            } else {
                let g = file.generator.as_ref().expect("counted above");
                g.table(origin)?
            }
        }
        _ => {
            return Err(InputError::new(
                origin,
                "give only one of distances, distance_file or [generator]",
            ))
        }
    };

    let nodes = table.nodes();
    let field_name = if file.cpus.is_some() {
        "field cpus"
    } else {
        "field cpus_per_node"
    };
    let counts = match (file.cpus_per_node, file.cpus) {
        (Some(p), None) => vec![p; nodes],
        (None, Some(list)) => list,
        (None, None) => {
            return Err(InputError::new(
                origin,
                "no CPUs: give cpus_per_node or cpus (a CPU count per node)",
            ))
        }
        (Some(_), Some(_)) => {
            return Err(InputError::new(
                origin,
                "give only one of cpus_per_node or cpus",
            ))
        }
    };
    super::check_cpu_counts(origin, field_name, &counts)?;
    let node_cpus = contiguous_cpus(&counts);
    let speeds = match &file.speed {
        None => None,
        Some(s) => {
            // Checked here, not only per CPU in `Machine::new`: a layout that makes no CPU
            // fast (`"none"`, an empty list, "first-half" of one CPU) must not hide a bad value.
            if !(s.fast.is_finite() && s.fast > 0.0) {
                return Err(field(
                    "speed.fast",
                    format!(
                        "{} is not a speed; a speed must be a positive number",
                        s.fast
                    ),
                ));
            }
            if !(super::MIN_SPEED..=super::MAX_SPEED).contains(&s.fast) {
                return Err(field(
                    "speed.fast",
                    format!(
                        "{} is outside {}..{}: a fast CPU runs at most {} times faster or \
                         slower than a normal one (speed 1)",
                        s.fast,
                        super::MIN_SPEED,
                        super::MAX_SPEED,
                        super::MAX_SPEED
                    ),
                ));
            }
            let fast = match &s.fast_cpus {
                FastCpusFile::List(ids) => FastCpus::List(ids.clone()),
                FastCpusFile::Named(n) if n == "first-half" => FastCpus::FirstHalf,
                FastCpusFile::Named(n) if n == "none" => FastCpus::None,
                FastCpusFile::Named(n) => {
                    return Err(field(
                        "speed.fast_cpus",
                        format!(
                            "'{n}' is not one of \"first-half\", \"none\" or a list of CPU ids"
                        ),
                    ))
                }
            };
            Some(speeds_for(origin, &node_cpus, &fast, s.fast)?)
        }
    };
    let default_name = base_dir
        .and(Path::new(origin).file_stem())
        .map_or_else(|| origin.to_string(), |s| s.to_string_lossy().into_owned());
    Machine::new(
        origin,
        MachineParts {
            name: file.name.unwrap_or(default_name),
            description: file.description.unwrap_or_default(),
            source: file.source.unwrap_or_default(),
            node_cpus,
            speeds,
            distances: table,
        },
    )
}

/// A machine as [`Machine::info`] writes it (its `mals` are derived, so not read).
#[derive(Debug, Deserialize)]
struct Info {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    source: String,
    nodes: Vec<InfoNode>,
    cpus: Vec<InfoCpu>,
    distances: Vec<Vec<i64>>,
}

#[derive(Debug, Deserialize)]
struct InfoNode {
    cpus: Vec<usize>,
}

#[derive(Debug, Deserialize)]
struct InfoCpu {
    speed: f64,
}

/// Reads a machine back from the JSON object [`Machine::info`] wrote (in a saved run).
pub fn from_info(origin: &str, value: &serde_json::Value) -> Result<Machine> {
    let info = Info::deserialize(value).map_err(|e| InputError::new(origin, e.to_string()))?;
    let distances = DistanceTable::from_rows(
        &format!("{origin} (field distances)"),
        info.distances
            .into_iter()
            .map(|r| RawRow::new(None, r))
            .collect(),
    )?;
    Machine::new(
        origin,
        MachineParts {
            name: info.name,
            description: info.description,
            source: info.source,
            node_cpus: info.nodes.into_iter().map(|n| n.cpus).collect(),
            speeds: Some(info.cpus.into_iter().map(|c| c.speed).collect()),
            distances,
        },
    )
}

/// Builds a machine from a plain distance-matrix text file: its CPUs are those `numactl
/// --hardware` output lists for each node, or `cpus_per_node` on every node. `option` names the
/// CPU count as the caller takes it (`--cpus-per-node`, `cpus_per_node=`) in messages.
pub fn read_matrix(path: &Path, cpus_per_node: Option<usize>, option: &str) -> Result<Machine> {
    let origin = path.display().to_string();
    let text = textfile::read_text(&origin, path, "the distance file", MAX_MACHINE_FILE_BYTES)?;
    matrix_machine(&origin, &text, cpus_per_node, option)
}

/// A machine from distance-matrix text and its CPUs (see [`read_matrix`]).
pub fn matrix_machine(
    origin: &str,
    text: &str,
    cpus_per_node: Option<usize>,
    option: &str,
) -> Result<Machine> {
    if cpus_per_node == Some(0) {
        return Err(InputError::new(
            origin,
            format!("{option} must be at least 1"),
        ));
    }
    let (table, listed) = distance::parse_text_with_cpus(origin, text)?;
    let (node_cpus, description) = match (listed, cpus_per_node) {
        (Some(lists), given) => {
            if let Some(p) = given {
                if let Some((node, list)) = lists.iter().enumerate().find(|(_, l)| l.len() != p) {
                    return Err(InputError::new(
                        origin,
                        format!(
                            "{option} {p} disagrees with the file, whose node {node} has {} \
                             CPUs; leave {option} out to use the file's CPU lists",
                            list.len()
                        ),
                    ));
                }
            }
            let counts: Vec<usize> = lists.iter().map(Vec::len).collect();
            let shown = counts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let description = format!("numactl --hardware output {origin}, CPUs per node {shown}");
            (lists, description)
        }
        (None, Some(p)) => {
            let counts = vec![p; table.nodes()];
            super::check_cpu_counts(origin, option, &counts)?;
            let description = format!("distance table from {origin}, {p} CPUs per node");
            (contiguous_cpus(&counts), description)
        }
        (None, None) => {
            return Err(InputError::new(
                origin,
                format!(
                    "a distance table without CPU lists needs {option} (or write a .toml \
                     machine file, or give numactl --hardware output, which lists each node's \
                     CPUs)"
                ),
            ))
        }
    };
    let name = Path::new(origin)
        .file_stem()
        .map_or_else(|| origin.to_string(), |s| s.to_string_lossy().into_owned());
    Machine::new(
        origin,
        MachineParts {
            name,
            description,
            source: origin.to_string(),
            node_cpus,
            speeds: None,
            distances: table,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_file() {
        let text = r#"
name = "x"
cpus_per_node = 2
[generator]
kind = "two-level"
nodes = 4
remote = 20
[speed]
fast = 2.0
fast_cpus = "first-half"
"#;
        let m = parse("x.toml", text, None).unwrap();
        assert_eq!(m.cpus(), 8);
        assert_eq!(m.speed(0), 2.0);
        assert_eq!(m.speed(1), 1.0);
        assert_eq!(m.mals(), vec![10, 20]);
    }

    /// A bad `speed.fast` is refused whatever the layout, even one with no fast CPU.
    #[test]
    fn bad_fast_speed_is_refused_without_fast_cpus() {
        for (cpus_per_node, fast_cpus) in [
            (1, "\"first-half\""),
            (2, "\"none\""),
            (2, "[]"),
            (2, "\"first-half\""),
        ] {
            for fast in ["-2.0", "0.0", "nan", "inf", "-inf"] {
                let text = format!(
                    "cpus_per_node = {cpus_per_node}\ndistances = [[10]]\n\
                     [speed]\nfast = {fast}\nfast_cpus = {fast_cpus}\n"
                );
                let e = parse("x.toml", &text, None).unwrap_err().to_string();
                assert!(
                    e.starts_with("x.toml: field speed.fast: ")
                        && e.ends_with(" is not a speed; a speed must be a positive number"),
                    "{text}: {e}"
                );
            }
        }
        let e = parse(
            "x.toml",
            "cpus_per_node = 1\ndistances = [[10]]\n[speed]\nfast = -2.0\nfast_cpus = \"first-half\"\n",
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.toml: field speed.fast: -2 is not a speed; a speed must be a positive number"
        );
    }

    #[test]
    fn unknown_key_names_line() {
        let e = parse("x.toml", "cpus_per_nod = 2\n", None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("x.toml: line 1, column 1, key cpus_per_nod: unknown field"),
            "{e}"
        );
    }
}
