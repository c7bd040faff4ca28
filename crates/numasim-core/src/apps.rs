//! Application profiles: PARSEC-like parallel programs as data. The profiles
//! are the data file `data/apps.toml`, every number with its source (docs/apps.md); this module
//! parses them once and turns a profile and a thread count into per-thread plans.
//!
//! ```text
//!   profile: model (fork-join | pipeline | independent), work_ms, spread, footprint_mb, shared, mem
//!   plan(T) ──► per thread: [Segment { wait: (point, count)?, work_ns, signal: point? }]
//!   (a segment may instead sleep a fixed time before its work, `sleep_ns`: no profile does;
//!   a replayed trace's thread does, for a sleep whose waker is not replayed)
//!
//!   fork-join, P phases:   phase p of thread t:  wait (barrier p−1, T) · work · signal barrier p
//!   pipeline, S stages, I items:  item i at stage s on thread i mod n_s of stage s:
//!                          wait (token (s−1, i), 1) · work · signal token (s, i)
//!   independent:           one segment per thread, no synchronisation
//!   phases, P phases:      phase p forks k_p new threads (k_p uniform on 1 ..= 2T − 1, mean T),
//!                          each: wait (join p−1, k_{p−1}) · work · signal join p
//! ```
//!
//! 1. The work of a phase (fork-join: `work_ms / P`; independent: `work_ms`) is split evenly
//!    over the T threads; each thread's share is multiplied by `max(0.05, 1 + spread · z)`,
//!    z ~ N(0, 1) drawn per (phase, thread) from the workload's generator, so threads differ.
//! 2. A pipeline stage gets `share · work_ms / I` per item, multiplied the same way per item;
//!    a parallel stage has T threads, a serial stage one. Items are dealt to a stage's threads
//!    round robin (item i to thread i mod n): a documented simplification of the shared queues,
//!    which keeps each thread's demand known in advance.
//! 3. Phases (Koita et al.'s parallel processes, docs/policies/home-cluster.md): a phase's work `work_ms / P` is split
//!    evenly over its k_p threads, each thread's share drawn exponential with that mean (`spread`
//!    must be 1, the exponential's coefficient of variation); the threads of phase p are new
//!    threads, created blocked on the join of phase p − 1 and placed when it is reached.
//! 4. A thread that reaches a segment whose wait is not yet satisfied leaves the runqueue until
//!    the last signal arrives (the engine's sync points); the last phase of a fork-join has no
//!    barrier after it: the application ends when its last thread does.
//!
//! Known limits: no serial section (the main thread's input reading is not modelled, only its
//! first touch of the shared data); pipeline queues are unbounded.

use std::sync::OnceLock;

use rand::Rng;
use rand_distr::{Distribution, Exp, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// The profiles file, as shipped.
pub const APPS_TOML: &str = include_str!("../data/apps.toml");

/// How an application's threads work together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// Data-parallel phases ending in a barrier.
    ForkJoin,
    /// Stages with queues between them.
    Pipeline,
    /// Threads that never synchronise.
    Independent,
    /// A process that forks a random number of new threads per phase and joins them.
    Phases,
}

/// One stage of a pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    pub name: String,
    /// T threads (true) or one (false).
    pub parallel: bool,
    /// Share of the application's work.
    pub share: f64,
}

/// An application profile (one `[apps.NAME]` table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(skip_deserializing)]
    pub name: String,
    pub description: String,
    pub model: Model,
    #[serde(default)]
    pub phases: Option<u32>,
    #[serde(default)]
    pub items: Option<u32>,
    #[serde(default)]
    pub stages: Vec<Stage>,
    /// Total CPU work of one run (all threads), ms at speed 1 with all-local memory.
    pub work_ms: f64,
    /// Coefficient of variation of per-thread (per-item) work.
    pub spread: f64,
    pub footprint_mb: f64,
    /// Share of the footprint that every thread uses; the rest is private, split over threads.
    pub shared: f64,
    /// Memory intensity m ∈ [0, 1].
    pub mem: f64,
    /// Field → where its value comes from.
    pub sources: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    apps: indexmap_like::Ordered<Profile>,
}

/// TOML tables in file order (serde_json's `preserve_order` map keeps it).
mod indexmap_like {
    use serde::{Deserialize, Deserializer};

    pub struct Ordered<T>(pub Vec<(String, T)>);

    impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let map = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
            map.into_iter()
                .map(|(k, v)| {
                    T::deserialize(v)
                        .map(|t| (k.clone(), t))
                        .map_err(|e| serde::de::Error::custom(format!("apps.{k}: {e}")))
                })
                .collect::<Result<_, _>>()
                .map(Ordered)
        }
    }
}

/// Every shipped profile, in file order (checked by the tests below).
pub fn profiles() -> &'static [Profile] {
    static PROFILES: OnceLock<Vec<Profile>> = OnceLock::new();
    PROFILES.get_or_init(|| {
        let file: File = toml::from_str(APPS_TOML).expect("data/apps.toml parses");
        file.apps
            .0
            .into_iter()
            .map(|(name, mut p)| {
                p.name = name;
                p
            })
            .collect()
    })
}

/// The profile called `name`.
pub fn profile(origin: &str, name: &str) -> Result<&'static Profile, InputError> {
    profiles().iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<_> = profiles().iter().map(|p| p.name.as_str()).collect();
        InputError::new(
            origin,
            format!(
                "unknown application '{name}'; choose one of {}",
                names.join(", ")
            ),
        )
        .at("key app")
    })
}

/// A synchronisation point an application's threads wait at and signal: a barrier (count T) or a
/// pipeline token (count 1). Points are numbered per application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    pub point: u32,
    pub count: u32,
}

/// One stretch of a thread's work: wait for a point (if any), work, signal a point (if any).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Segment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
    pub work_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<u32>,
    /// A timed block before its work (a sleep whose end no thread of the workload signals): the
    /// thread leaves its CPU for this long, then wakes as from IO. A segment sleeps or waits,
    /// not both, and a thread's first segment does not sleep (it would arrive later instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep_ns: Option<u64>,
}

/// The per-thread plans of one application instance, and how many sync points it uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub threads: Vec<Vec<Segment>>,
    pub points: u32,
}

const MS: f64 = 1e6;

/// `base` ns varied by `max(0.05, 1 + spread · z)`.
fn varied<R: Rng>(rng: &mut R, base: f64, spread: f64) -> u64 {
    let z: f64 = StandardNormal.sample(rng);
    ((base * (1.0 + spread * z).max(0.05)).round() as u64).max(1)
}

impl Profile {
    /// Checks the profile's numbers (the shipped file is held to this by a test).
    pub fn check(&self) -> Result<(), String> {
        let frac = |v: f64| (0.0..=1.0).contains(&v);
        if !(self.work_ms > 0.0 && self.work_ms.is_finite()) {
            return Err(format!("work_ms {} must be positive", self.work_ms));
        }
        if !(self.spread >= 0.0 && self.spread.is_finite()) {
            return Err(format!("spread {} must be ≥ 0", self.spread));
        }
        if !(self.footprint_mb >= 0.0 && self.footprint_mb.is_finite()) {
            return Err(format!("footprint_mb {} must be ≥ 0", self.footprint_mb));
        }
        if !frac(self.shared) || !frac(self.mem) {
            return Err("shared and mem must be in [0, 1]".into());
        }
        match self.model {
            Model::ForkJoin | Model::Phases if self.phases.unwrap_or(0) == 0 => {
                Err("a fork-join or phases profile needs phases ≥ 1".into())
            }
            Model::Phases if self.spread != 1.0 => Err(format!(
                "a phases profile draws exponential thread work: spread must be 1, not {}",
                self.spread
            )),
            Model::Pipeline => {
                let sum: f64 = self.stages.iter().map(|s| s.share).sum();
                if self.items.unwrap_or(0) == 0 || self.stages.is_empty() {
                    Err("a pipeline profile needs items ≥ 1 and stages".into())
                } else if (sum - 1.0).abs() > 1e-6 || self.stages.iter().any(|s| s.share <= 0.0) {
                    Err(format!(
                        "stage shares must be positive and add up to 1 (they add up to {sum})"
                    ))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    /// Number of threads of an instance with `t` threads per parallel part (phases: the most
    /// it can have).
    pub fn thread_count(&self, t: u32) -> u32 {
        match self.model {
            Model::Phases => self.phases.unwrap_or(1).max(1) * (2 * t.max(1) - 1),
            Model::Pipeline => self
                .stages
                .iter()
                .map(|s| if s.parallel { t } else { 1 })
                .sum(),
            _ => t,
        }
    }

    /// The expected processor time (ms) an instance with `t` threads per parallel part holds
    /// at its maximum parallelism, each thread on a processor of its own until its phase's
    /// join (the `load=held` reading of a load level). Phases: a phase of k threads, each's
    /// work exponential with mean `work_ms / P / k`, lasts the longest of them, `work_ms / P /
    /// k · H_k` (H_k the k-th harmonic number), and holds k processors that long: `work_ms / P
    /// · H_k`; k is uniform on 1 ..= 2t − 1, so the instance holds `work_ms` × the mean of H_1 …
    /// H_{2t−1}. Other models: `work_ms` (no reading of their parallelism is made).
    pub fn held_ms(&self, t: u32) -> f64 {
        match self.model {
            Model::Phases => {
                let kmax = 2 * t.max(1) - 1;
                let mut h = 0.0;
                let mut sum = 0.0;
                for k in 1..=kmax {
                    h += 1.0 / f64::from(k);
                    sum += h;
                }
                self.work_ms * sum / f64::from(kmax)
            }
            _ => self.work_ms,
        }
    }

    /// The plans of one instance with `t ≥ 1` threads per parallel part.
    pub fn plan<R: Rng>(&self, t: u32, rng: &mut R) -> Plan {
        let work_ns = self.work_ms * MS;
        match self.model {
            Model::Independent => Plan {
                threads: (0..t)
                    .map(|_| {
                        vec![Segment {
                            wait: None,
                            work_ns: varied(rng, work_ns / f64::from(t), self.spread),
                            signal: None,
                            sleep_ns: None,
                        }]
                    })
                    .collect(),
                points: 0,
            },
            Model::ForkJoin => {
                let phases = self.phases.unwrap_or(1).max(1);
                let per = work_ns / f64::from(phases) / f64::from(t);
                let mut threads = vec![Vec::with_capacity(phases as usize); t as usize];
                for p in 0..phases {
                    for plan in threads.iter_mut() {
                        plan.push(Segment {
                            wait: (p > 0).then(|| Wait {
                                point: p - 1,
                                count: t,
                            }),
                            work_ns: varied(rng, per, self.spread),
                            signal: (p + 1 < phases).then_some(p),
                            sleep_ns: None,
                        });
                    }
                }
                Plan {
                    threads,
                    points: phases - 1,
                }
            }
            Model::Phases => {
                let phases = self.phases.unwrap_or(1).max(1);
                let mut threads = Vec::new();
                let mut previous = 0;
                for p in 0..phases {
                    let k = rng.random_range(1..=2 * t.max(1) - 1);
                    let mean = work_ns / f64::from(phases) / f64::from(k);
                    let exp = Exp::new(1.0 / mean).expect("positive mean");
                    for _ in 0..k {
                        threads.push(vec![Segment {
                            wait: (p > 0).then(|| Wait {
                                point: p - 1,
                                count: previous,
                            }),
                            work_ns: (exp.sample(rng).round() as u64).max(1),
                            signal: (p + 1 < phases).then_some(p),
                            sleep_ns: None,
                        }]);
                    }
                    previous = k;
                }
                Plan {
                    threads,
                    points: phases - 1,
                }
            }
            Model::Pipeline => {
                let items = self.items.unwrap_or(1).max(1);
                let mut threads = Vec::new();
                let last = self.stages.len() - 1;
                for (s, stage) in self.stages.iter().enumerate() {
                    let n = if stage.parallel { t } else { 1 };
                    let first = threads.len();
                    threads.resize(first + n as usize, Vec::new());
                    let per = work_ns * stage.share / f64::from(items);
                    let s = s as u32;
                    for i in 0..items {
                        threads[first + (i % n) as usize].push(Segment {
                            wait: (s > 0).then(|| Wait {
                                point: (s - 1) * items + i,
                                count: 1,
                            }),
                            work_ns: varied(rng, per, self.spread),
                            signal: (s < last as u32).then_some(s * items + i),
                            sleep_ns: None,
                        });
                    }
                }
                // A parallel stage with more threads than items leaves some idle: they exit.
                threads.retain(|plan| !plan.is_empty());
                Plan {
                    threads,
                    points: last as u32 * items,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_pcg::Pcg64;

    use super::*;

    #[test]
    fn every_shipped_profile_is_valid_and_sourced() {
        assert!(!profiles().is_empty());
        for p in profiles() {
            p.check().unwrap_or_else(|e| panic!("apps.{}: {e}", p.name));
            for field in [
                "model",
                "work_ms",
                "spread",
                "footprint_mb",
                "shared",
                "mem",
            ] {
                assert!(
                    p.sources.contains_key(field),
                    "apps.{} has no source for {field}",
                    p.name
                );
            }
        }
    }

    fn profile_of(model: Model) -> Profile {
        Profile {
            name: "t".into(),
            description: String::new(),
            model,
            phases: Some(3),
            items: Some(4),
            stages: vec![
                Stage {
                    name: "in".into(),
                    parallel: false,
                    share: 0.25,
                },
                Stage {
                    name: "work".into(),
                    parallel: true,
                    share: 0.5,
                },
                Stage {
                    name: "out".into(),
                    parallel: false,
                    share: 0.25,
                },
            ],
            work_ms: 12.0,
            spread: 0.0,
            footprint_mb: 0.0,
            shared: 0.0,
            mem: 0.0,
            sources: Default::default(),
        }
    }

    #[test]
    fn fork_join_plan_has_a_barrier_between_phases() {
        let plan = profile_of(Model::ForkJoin).plan(2, &mut Pcg64::seed_from_u64(1));
        assert_eq!(plan.points, 2);
        let want = vec![
            Segment {
                wait: None,
                work_ns: 2_000_000,
                signal: Some(0),
                sleep_ns: None,
            },
            Segment {
                wait: Some(Wait { point: 0, count: 2 }),
                work_ns: 2_000_000,
                signal: Some(1),
                sleep_ns: None,
            },
            Segment {
                wait: Some(Wait { point: 1, count: 2 }),
                work_ns: 2_000_000,
                signal: None,
                sleep_ns: None,
            },
        ];
        assert_eq!(plan.threads, vec![want.clone(), want]);
    }

    #[test]
    fn pipeline_plan_deals_items_round_robin_and_chains_tokens() {
        let plan = profile_of(Model::Pipeline).plan(2, &mut Pcg64::seed_from_u64(1));
        // in (1 thread) · work (2 threads) · out (1 thread); 4 items; tokens (s, i) = s·4 + i.
        assert_eq!(plan.threads.len(), 4);
        assert_eq!(plan.points, 8);
        assert_eq!(plan.threads[0].len(), 4);
        assert_eq!(
            plan.threads[0][2],
            Segment {
                wait: None,
                work_ns: 750_000,
                signal: Some(2),
                sleep_ns: None,
            }
        );
        // Thread 1 of the middle stage takes items 1 and 3.
        assert_eq!(
            plan.threads[2],
            vec![
                Segment {
                    wait: Some(Wait { point: 1, count: 1 }),
                    work_ns: 1_500_000,
                    signal: Some(5),
                    sleep_ns: None,
                },
                Segment {
                    wait: Some(Wait { point: 3, count: 1 }),
                    work_ns: 1_500_000,
                    signal: Some(7),
                    sleep_ns: None,
                },
            ]
        );
        assert_eq!(
            plan.threads[3][3],
            Segment {
                wait: Some(Wait { point: 7, count: 1 }),
                work_ns: 750_000,
                signal: None,
                sleep_ns: None,
            }
        );
        let total: u64 = plan.threads.iter().flatten().map(|s| s.work_ns).sum();
        assert_eq!(total, 12_000_000);
    }

    #[test]
    fn spread_varies_threads_but_not_the_structure() {
        let mut p = profile_of(Model::ForkJoin);
        p.spread = 0.3;
        let plan = p.plan(4, &mut Pcg64::seed_from_u64(7));
        let first: Vec<u64> = plan.threads.iter().map(|t| t[0].work_ns).collect();
        assert!(first.windows(2).any(|w| w[0] != w[1]), "{first:?}");
        assert!(plan.threads.iter().all(|t| t.len() == 3));
    }
}
