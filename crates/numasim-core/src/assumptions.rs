//! Modelling assumptions: the named choices where the papers' simulators and the
//! kernel differ. The registry — names, descriptions, values, and each profile's value with its
//! source — is the data file `data/assumptions.toml`; this module parses it once and turns a
//! setting such as `paper`, `kernel26,slice=work` or `memory=parent` into [`Assumptions`].
//!
//! ```text
//!   setting = item ("," item)*        item = PROFILE | NAME=VALUE
//!   profiles: kernel26 (the Linux 2.6.18 kernel), paper (the papers' text)
//!   memory  = first-run | parent      where a process's pages and origin are
//!   slice   = wall | work             whether balancing stalls use up the running slice
//!   wake    = previous | idlest       where the Linux baseline wakes a process
//!   exec    = cpu | total             what an IO-bound process's execution time measures
//!   cost    = kernel | paper[:S]      the scale of balancing costs (S: 1–1000, default 30)
//!   load    = work | held             what an application workload's load level measures
//!   remote  = slit | scaled[:R]       remote memory latency against the SLIT distance (R: 1–3)
//! ```
//!
//! 1. Start from the setting's profile, or from `kernel26` (numasim's behaviour before
//!    assumptions were named) when it names none. At most one profile: two are an [`InputError`].
//! 2. Apply the `NAME=VALUE` items over it, each setting one assumption. The profile comes first
//!    wherever it stands (`memory=parent,paper` is `paper,memory=parent`), so an item is never
//!    silently undone. An unknown name or value, or one named twice, is an [`InputError`]; so is
//!    `linux`, the profile's old name (the policy `linux` is Linux 6.x), with the new name.
//!    `cost=paper:S` carries a continuous scale S (a number from [`Cost::SCALE_MIN`] to
//!    [`Cost::SCALE_MAX`]); `cost=paper` is `paper:30` ([`Cost::SCALE_DEFAULT`]), and prints so.
//!    `remote=scaled:R` likewise carries R ([`Remote::SCALE_MIN`] to [`Remote::SCALE_MAX`]);
//!    `remote=scaled` is `scaled:2`, and `scaled:1` is `slit` (the same model), printed so.
//! 3. [`Assumptions::pairs`] gives the full, resolved setting in registry order: what stored
//!    results are keyed by and what every table prints.

use std::sync::OnceLock;

use crate::error::InputError;

/// The registry file, as shipped.
pub const REGISTRY_TOML: &str = include_str!("../data/assumptions.toml");

/// One assumption of the registry.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub name: String,
    pub description: String,
    /// Value name → what it means, in the order of the file.
    pub values: OrderedMap,
    pub kernel26: ProfileValue,
    pub paper: ProfileValue,
}

/// A profile's value of one assumption and why.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileValue {
    pub value: String,
    pub source: String,
}

/// The registry file.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// Profile name → description.
    pub profiles: OrderedMap,
    pub assumption: Vec<Entry>,
}

/// Name → text, in the order of the file (serde_json's `preserve_order` map).
pub type OrderedMap = serde_json::Map<String, serde_json::Value>;

/// The profiles, in the order `numasim list assumptions` shows them.
pub const PROFILES: [&str; 2] = ["kernel26", "paper"];

/// Old profile names, refused with a pointer to the new one: `linux` read as the 6.x policy.
pub const RENAMED: [(&str, &str); 1] = [("linux", "kernel26")];

/// A setting split by [`Assumptions::split`]: its profile, if any, and its `NAME=VALUE` items.
pub type Split<'a> = (Option<&'static str>, Vec<(&'a str, &'a str)>);

/// The assumptions, in registry order (the test below holds the file to it).
pub const NAMES: [&str; 7] = ["memory", "slice", "wake", "exec", "cost", "load", "remote"];

impl Registry {
    /// The parsed registry (checked by the tests below; the file ships with the crate).
    pub fn get() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| toml::from_str(REGISTRY_TOML).expect("data/assumptions.toml"))
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.assumption.iter().find(|e| e.name == name)
    }
}

impl Entry {
    /// A profile's value (`profile` is one of [`PROFILES`]).
    pub fn of(&self, profile: &str) -> &ProfileValue {
        if profile == "paper" {
            &self.paper
        } else {
            &self.kernel26
        }
    }
}

/// Where a process's memory lives, and so its origin CPU and node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Memory {
    /// The CPU it first runs on (after fork/exec placement).
    #[default]
    FirstRun,
    /// Its parent's CPU, where it was created (its spawn CPU).
    Parent,
}

/// What uses up the running process's timeslice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SliceCharge {
    /// Every tick it holds the CPU, balancing stalls included (2.6.18 `scheduler_tick`).
    #[default]
    Wall,
    /// Only its own running: a balancing stall of its CPU is given back to its slice.
    Work,
}

/// Where the Linux baseline wakes a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wake {
    /// On the CPU it slept on.
    #[default]
    Previous,
    /// Placed as a new process is (`sched_balance_self` from the CPU it slept on).
    Idlest,
}

/// What an IO-bound process's execution time (`demand_ns`, the workload's `exec`) measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exec {
    /// Its CPU demand: the IO waits come on top of it.
    #[default]
    Cpu,
    /// Its time alone (speed 1, local memory): CPU bursts and IO waits together.
    Total,
}

/// The scale of balancing costs: what the engine charges per attempt, runqueue examined, task
/// examined, evaluation and migration (`EngineConfig::balancing_ns`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Cost {
    /// The engine's rates (kernel scale: 1 µs per runqueue, 0.2 µs per task, 5 µs per
    /// migration), nothing for the attempt itself.
    #[default]
    Kernel,
    /// The attempt itself charged as one more runqueue (the balancing CPU's own load, compared
    /// with the others), and everything times the scale.
    Paper(f64),
}

impl Cost {
    /// The smallest scale: the kernel's rates (the papers call the overheads "large").
    pub const SCALE_MIN: f64 = 1.0;
    /// The largest: one runqueue examined costs a whole 1 ms tick, the time unit of the papers'
    /// simulators (every published turnaround is in whole milliseconds).
    pub const SCALE_MAX: f64 = 1000.0;
    /// `cost=paper` without a scale: about the geometric middle of the range. No paper gives a
    /// number; this only gives `cost=paper` and the ablation a value (`numasim fit` infers S).
    pub const SCALE_DEFAULT: f64 = 30.0;

    fn parse(text: &str) -> Option<Cost> {
        let range = Self::SCALE_MIN..=Self::SCALE_MAX;
        let scale = parse_scaled(text, "kernel", "paper", range, Self::SCALE_DEFAULT)?;
        Some(scale.map_or(Cost::Kernel, Cost::Paper))
    }

    fn text(self) -> String {
        match self {
            Cost::Kernel => "kernel".into(),
            Cost::Paper(s) => scaled_text("paper", s, Self::SCALE_DEFAULT),
        }
    }
}

/// A value that is either `base` or `word` with a scale (`word` alone, or `word:S` with S in
/// `range`): `Some(None)` for `base`, `Some(Some(S))` for a scale (`default` for `word` alone),
/// `None` for anything else.
fn parse_scaled(
    text: &str,
    base: &str,
    word: &str,
    range: std::ops::RangeInclusive<f64>,
    default: f64,
) -> Option<Option<f64>> {
    let scale = match text.split_once(':') {
        None if text == base => return Some(None),
        None if text == word => default,
        Some((w, s)) if w == word => s.trim().parse().ok()?,
        _ => return None,
    };
    range.contains(&scale).then_some(Some(scale))
}

/// `word` for the default scale, `word:S` for any other: what [`parse_scaled`] reads back.
fn scaled_text(word: &str, scale: f64, default: f64) -> String {
    if scale == default {
        word.into()
    } else {
        format!("{word}:{scale}")
    }
}

/// How long a remote memory access takes against its SLIT distance: the remote factor of a
/// thread on node n is `L = Σ_k a_k · c(n, k) / Σ_k a_k` over its pages, with `c(n, n) = d(n, n)
/// / 10` (1 on every SLIT) and, for k ≠ n, `c(n, k) = R · d(n, k) / 10` (crate::memory).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Remote {
    /// R = 1: an access costs its SLIT distance / 10, numasim's model since its first version.
    #[default]
    Slit,
    /// R > 1: every remote access costs R times its SLIT-derived latency.
    Scaled(f64),
}

impl Remote {
    /// The smallest R: the SLIT distance itself.
    pub const SCALE_MIN: f64 = 1.0;
    /// The largest: three times the SLIT-derived latency, numasim's bound for a search
    /// (data/assumptions.toml says why; unsourced).
    pub const SCALE_MAX: f64 = 3.0;
    /// `remote=scaled` without R: the middle of the range. No paper gives a number; this only
    /// gives the value a meaning and the ablation a flip (`numasim fit` infers R).
    pub const SCALE_DEFAULT: f64 = 2.0;

    fn parse(text: &str) -> Option<Remote> {
        let range = Self::SCALE_MIN..=Self::SCALE_MAX;
        let scale = parse_scaled(text, "slit", "scaled", range, Self::SCALE_DEFAULT)?;
        // One model, one name: R = 1 is the SLIT distance itself.
        Some(match scale {
            Some(r) if r != 1.0 => Remote::Scaled(r),
            _ => Remote::Slit,
        })
    }

    fn text(self) -> String {
        match self {
            Remote::Slit => "slit".into(),
            Remote::Scaled(s) => scaled_text("scaled", s, Self::SCALE_DEFAULT),
        }
    }

    /// R: what a remote access costs against its SLIT-derived latency.
    pub fn scale(self) -> f64 {
        match self {
            Remote::Slit => 1.0,
            Remote::Scaled(s) => s,
        }
    }
}

/// What an application workload's load level (`load=L`) measures (`WorkloadSpec`'s creation
/// rate is `L × CPUs / E[it]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadLevel {
    /// A process's work: `L = 1` offers the machine's capacity.
    #[default]
    Work,
    /// The processor time a process holds at its maximum parallelism (each phase's threads
    /// hold their processors until the join): `L = 1` holds every processor, not all busy.
    Held,
}

/// A full, resolved set of modelling assumptions. `Default` is the `kernel26` profile.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Assumptions {
    pub memory: Memory,
    pub slice: SliceCharge,
    pub wake: Wake,
    pub exec: Exec,
    pub cost: Cost,
    pub load: LoadLevel,
    pub remote: Remote,
}

impl Assumptions {
    /// Parses a setting (`paper`, `kernel26,slice=work`, `memory=parent`, or empty for
    /// `kernel26`); errors name `origin` (e.g. `--assume`). The profile, if any, is applied
    /// before the items wherever it stands.
    pub fn parse(origin: &str, setting: &str) -> Result<Self, InputError> {
        let (profile, items) = Self::split(origin, setting)?;
        let mut out = Self::default();
        if let Some(p) = profile {
            for e in &Registry::get().assumption {
                out.set(origin, &e.name, &e.of(p).value)?;
            }
        }
        for (name, value) in items {
            out.set(origin, name, value)?;
        }
        Ok(out)
    }

    /// A setting's profile (at most one) and its `NAME=VALUE` items in the order given, checked:
    /// a second profile, an old profile name or an assumption named twice is an [`InputError`].
    /// Values are checked when they are set ([`Assumptions::set`]).
    pub fn split<'a>(origin: &str, setting: &'a str) -> Result<Split<'a>, InputError> {
        let mut profile: Option<&'static str> = None;
        let mut items: Vec<(&str, &str)> = Vec::new();
        for item in setting.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                None => {
                    if let Some((_, new)) = RENAMED.iter().find(|(old, _)| *old == item) {
                        return Err(InputError::new(
                            origin,
                            format!(
                                "the profile '{item}' is now called '{new}' (faithful to the \
                                 Linux 2.6.18 kernel; the policy '{item}' is Linux 6.x): \
                                 give {new}"
                            ),
                        ));
                    }
                    let Some(&p) = PROFILES.iter().find(|&&p| p == item) else {
                        return Err(InputError::new(
                            origin,
                            format!(
                                "unknown profile or assumption '{item}'; profiles are {}, \
                                 assumptions are NAME=VALUE with NAME one of {}",
                                PROFILES.join(", "),
                                NAMES.join(", ")
                            ),
                        ));
                    };
                    if let Some(first) = profile {
                        return Err(InputError::new(
                            origin,
                            format!(
                                "two profiles ('{first}' and '{p}'); give one, and NAME=VALUE \
                                 items to change single assumptions"
                            ),
                        ));
                    }
                    profile = Some(p);
                }
                Some((name, value)) => {
                    let name = name.trim();
                    if items.iter().any(|(n, _)| *n == name) {
                        return Err(InputError::new(
                            origin,
                            format!("assumption '{name}' is given twice"),
                        ));
                    }
                    items.push((name, value.trim()));
                }
            }
        }
        Ok((profile, items))
    }

    /// Sets one assumption by name and value name.
    pub fn set(&mut self, origin: &str, name: &str, value: &str) -> Result<(), InputError> {
        let Some(entry) = Registry::get().entry(name) else {
            return Err(InputError::new(
                origin,
                format!(
                    "unknown assumption '{name}'; choose one of {}",
                    NAMES.join(", ")
                ),
            ));
        };
        let bad = || {
            let values: Vec<&str> = entry.values.keys().map(String::as_str).collect();
            InputError::new(
                origin,
                format!(
                    "assumption {name}: unknown value '{value}'; choose one of {}",
                    values.join(", ")
                ),
            )
        };
        match name {
            "memory" => {
                self.memory = match value {
                    "first-run" => Memory::FirstRun,
                    "parent" => Memory::Parent,
                    _ => return Err(bad()),
                }
            }
            "slice" => {
                self.slice = match value {
                    "wall" => SliceCharge::Wall,
                    "work" => SliceCharge::Work,
                    _ => return Err(bad()),
                }
            }
            "wake" => {
                self.wake = match value {
                    "previous" => Wake::Previous,
                    "idlest" => Wake::Idlest,
                    _ => return Err(bad()),
                }
            }
            "exec" => {
                self.exec = match value {
                    "cpu" => Exec::Cpu,
                    "total" => Exec::Total,
                    _ => return Err(bad()),
                }
            }
            "cost" => {
                self.cost = Cost::parse(value).ok_or_else(|| {
                    InputError::new(
                        origin,
                        format!(
                            "assumption cost: unknown value '{value}'; choose one of kernel, \
                             paper, paper:S with S a scale from {} to {}",
                            Cost::SCALE_MIN,
                            Cost::SCALE_MAX
                        ),
                    )
                })?
            }
            "load" => {
                self.load = match value {
                    "work" => LoadLevel::Work,
                    "held" => LoadLevel::Held,
                    _ => return Err(bad()),
                }
            }
            "remote" => {
                self.remote = Remote::parse(value).ok_or_else(|| {
                    InputError::new(
                        origin,
                        format!(
                            "assumption remote: unknown value '{value}'; choose one of slit, \
                             scaled, scaled:R with R a scale from {} to {}",
                            Remote::SCALE_MIN,
                            Remote::SCALE_MAX
                        ),
                    )
                })?
            }
            _ => unreachable!("every registry entry has a field (tested)"),
        }
        Ok(())
    }

    /// The value of one assumption, as text (`cost=paper:S` carries its scale).
    pub fn value(&self, name: &str) -> String {
        if name == "cost" {
            return self.cost.text();
        }
        if name == "remote" {
            return self.remote.text();
        }
        self.named_value(name).into()
    }

    fn named_value(&self, name: &str) -> &'static str {
        match name {
            "memory" => match self.memory {
                Memory::FirstRun => "first-run",
                Memory::Parent => "parent",
            },
            "slice" => match self.slice {
                SliceCharge::Wall => "wall",
                SliceCharge::Work => "work",
            },
            "wake" => match self.wake {
                Wake::Previous => "previous",
                Wake::Idlest => "idlest",
            },
            "exec" => match self.exec {
                Exec::Cpu => "cpu",
                Exec::Total => "total",
            },
            "load" => match self.load {
                LoadLevel::Work => "work",
                LoadLevel::Held => "held",
            },
            _ => panic!("unknown assumption {name}"),
        }
    }

    /// Every assumption with its value, in registry order.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        NAMES.iter().map(|&n| (n, self.value(n))).collect()
    }

    /// The canonical setting text: `memory=first-run,slice=wall`.
    pub fn setting(&self) -> String {
        self.pairs()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The profile whose values these are exactly, if any.
    pub fn profile(&self) -> Option<&'static str> {
        PROFILES
            .into_iter()
            .find(|p| Self::parse("profile", p).as_ref() == Ok(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registry_value_parses_and_prints_back() {
        let names: Vec<&str> = Registry::get()
            .assumption
            .iter()
            .map(|e| &*e.name)
            .collect();
        assert_eq!(names, NAMES);
        for e in &Registry::get().assumption {
            assert!(
                !e.description.is_empty() && !e.values.is_empty(),
                "{}",
                e.name
            );
            for value in e.values.keys() {
                let a = Assumptions::parse("t", &format!("{}={value}", e.name)).unwrap();
                assert_eq!(&a.value(&e.name), value);
            }
            for p in PROFILES {
                let pv = e.of(p);
                assert!(e.values.contains_key(&pv.value), "{} {p}", e.name);
                assert!(pv.source.len() > 40, "{} {p}: a source, not a word", e.name);
            }
        }
    }

    #[test]
    fn kernel26_is_the_default_and_profiles_differ() {
        let linux = Assumptions::parse("t", "kernel26").unwrap();
        assert_eq!(linux, Assumptions::default());
        assert_eq!(Assumptions::parse("t", "").unwrap(), linux);
        let paper = Assumptions::parse("t", "paper").unwrap();
        assert_eq!(paper.memory, Memory::Parent);
        assert_eq!(paper.slice, SliceCharge::Work);
        assert_eq!(paper.profile(), Some("paper"));
        assert_eq!(linux.profile(), Some("kernel26"));
        assert_eq!(paper.wake, Wake::Idlest);
        assert_eq!(paper.exec, Exec::Cpu);
        assert_eq!(paper.cost, Cost::Kernel);
        assert_eq!(paper.remote, Remote::Slit);
        assert_eq!(
            paper.setting(),
            "memory=parent,slice=work,wake=idlest,exec=cpu,cost=kernel,load=work,remote=slit"
        );
    }

    #[test]
    fn the_profile_comes_before_the_items_wherever_it_stands() {
        let a = Assumptions::parse("t", "paper, slice=wall").unwrap();
        assert_eq!((a.memory, a.slice), (Memory::Parent, SliceCharge::Wall));
        assert_eq!(a.profile(), None);
        assert_eq!(Assumptions::parse("t", "slice=wall,paper").unwrap(), a);
        let b = Assumptions::parse("t", "memory=parent,kernel26").unwrap();
        assert_eq!(b.memory, Memory::Parent);
        assert_eq!(b, Assumptions::parse("t", "memory=parent").unwrap());
        let c = Assumptions::parse("t", "memory=first-run,paper").unwrap();
        assert_eq!((c.memory, c.wake), (Memory::FirstRun, Wake::Idlest));
    }

    #[test]
    fn remote_scaled_carries_its_scale_and_one_is_slit() {
        let p = |s: &str| Assumptions::parse("--assume", s).unwrap();
        assert_eq!(p("").remote, Remote::Slit);
        assert_eq!(p("paper").remote, Remote::Slit);
        assert_eq!(p("remote=scaled").remote, Remote::Scaled(2.0));
        assert_eq!(p("remote=scaled").value("remote"), "scaled");
        assert_eq!(p("remote=scaled:2.0").value("remote"), "scaled");
        assert_eq!(p("remote=scaled:1.5").value("remote"), "scaled:1.5");
        assert_eq!(p("remote=scaled:1.5").remote.scale(), 1.5);
        // R = 1 is the SLIT model: one value, one key in the store.
        assert_eq!(p("remote=scaled:1"), p("remote=slit"));
        assert_eq!(p("remote=scaled:1").value("remote"), "slit");
        assert_eq!(p("paper,remote=scaled:3").profile(), None);
        for bad in [
            "remote=scaled:0.5",
            "remote=scaled:3.01",
            "remote=slit:2",
            "remote=x",
        ] {
            let value = bad.split_once('=').unwrap().1;
            assert_eq!(
                Assumptions::parse("--assume", bad).unwrap_err().to_string(),
                format!(
                    "--assume: assumption remote: unknown value '{value}'; choose one of slit, \
                     scaled, scaled:R with R a scale from 1 to 3"
                )
            );
        }
    }

    #[test]
    fn cost_paper_carries_its_scale_and_prints_it_back() {
        let p = |s: &str| Assumptions::parse("t", s).unwrap();
        assert_eq!(p("cost=paper").cost, Cost::Paper(30.0));
        assert_eq!(p("cost=paper").value("cost"), "paper");
        assert_eq!(p("cost=paper:30").value("cost"), "paper");
        assert_eq!(p("cost=paper:30.0"), p("cost=paper"));
        assert_eq!(p("cost=paper:2.5").value("cost"), "paper:2.5");
        assert_eq!(p("cost=paper:1000").cost, Cost::Paper(1000.0));
        assert_eq!(p("paper,cost=paper:7").profile(), None);
        let err = |s: &str| Assumptions::parse("--assume", s).unwrap_err().to_string();
        for bad in [
            "cost=paper:0.5",
            "cost=paper:1001",
            "cost=paper:x",
            "cost=kernel:2",
            "cost=paper:NaN",
        ] {
            assert_eq!(
                err(bad),
                format!(
                    "--assume: assumption cost: unknown value '{}'; choose one of kernel, paper, \
                     paper:S with S a scale from 1 to 1000",
                    &bad[5..]
                )
            );
        }
    }

    #[test]
    fn bad_settings_name_the_problem() {
        let err = |s: &str| Assumptions::parse("--assume", s).unwrap_err().to_string();
        assert_eq!(
            err("memory=home"),
            "--assume: assumption memory: unknown value 'home'; choose one of first-run, parent"
        );
        assert_eq!(
            err("colour=red"),
            "--assume: unknown assumption 'colour'; choose one of memory, slice, wake, exec, cost, load, remote"
        );
        assert_eq!(
            err("exec=wall"),
            "--assume: assumption exec: unknown value 'wall'; choose one of cpu, total"
        );
        assert!(err("kernel").starts_with("--assume: unknown profile or assumption 'kernel'"));
        assert_eq!(
            err("paper,kernel26"),
            "--assume: two profiles ('paper' and 'kernel26'); give one, and NAME=VALUE items to \
             change single assumptions"
        );
        assert!(err("paper,paper").starts_with("--assume: two profiles ('paper' and 'paper')"));
        assert_eq!(
            err("linux"),
            "--assume: the profile 'linux' is now called 'kernel26' (faithful to the Linux 2.6.18 \
             kernel; the policy 'linux' is Linux 6.x): give kernel26"
        );
        assert!(err("memory=parent,linux").contains("now called 'kernel26'"));
        assert_eq!(
            err("slice=work,slice=wall"),
            "--assume: assumption 'slice' is given twice"
        );
    }
}
