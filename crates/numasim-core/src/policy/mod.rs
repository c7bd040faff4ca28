//! Balancing policies: one module per policy, behind one trait. The engine never names a
//! policy; a policy never touches engine internals — it reads a [`View`] and returns decisions.
//!
//! The trait, the view and the decision types live in [`crate::interface`]; this module is
//! the registry: names, descriptions, references, option parsing and construction.

pub mod capability_aware;
pub mod external;
pub mod linux;
pub mod linux26;
pub mod memory_aware;
pub mod node_push;
pub mod origin_aware;
pub mod scx_lavd;
pub mod scx_rusty;
pub mod space;
pub mod thread_aware;

pub use crate::interface::{
    Attempt, BalanceKind, Enqueue, EnqueueKind, LazyMove, MigrationKind, Move, PageMove, Pid,
    Policy, PolicyContext,
};

use crate::error::InputError;

/// A registered policy: name, one-line description, reference.
pub struct PolicyInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub reference: &'static str,
    /// Domain builder used when none is given.
    pub default_domains: &'static str,
}

/// Every policy, by name.
pub const POLICIES: [PolicyInfo; 22] = [
    PolicyInfo {
        name: "linux26",
        description: "Linux 2.6.18 O(1) scheduler and sched-domain load balancer",
        reference: "Linux 2.6.18 kernel/sched.c (load_balance, find_busiest_group, move_tasks, ...)",
        default_domains: "two-level",
    },
    PolicyInfo {
        name: "linux",
        description: "Linux 6.x CFS/EEVDF load balancer: PELT, group classification, migration \
                      types, imb_numa_nr, newly-idle cost gating, wake_affine and \
                      select_idle_sibling, nohz idle balancing; options slice-us, nr-migrate, hz, nohz, \
                      ni_random, numa_balancing, select (kernel, thread-aware, memory-aware: \
                      which thread a pull between nodes takes)",
        reference: "Linux 6.12.95 as Debian builds it: kernel/sched/fair.c (sched_balance_rq, \
                    calculate_imbalance, detach_tasks, sched_balance_find_dst_group, \
                    select_idle_sibling, _nohz_idle_balance, ...) and pelt.c",
        default_domains: "linux",
    },
    PolicyInfo {
        name: "origin-aware",
        description: "linux26 with origin-preferring pulls (RI-LB) alternating with pushes and \
                      exchanges toward each process's origin (SI-LB); options v1, v2, \
                      min-load, nearest, si, si-lb",
        reference: "Mehta & Kanungo, Origin Aware Dynamic Load Balancing Algorithm for NUMA \
                    Multiprocessor Systems, IJETT 73(2), 2025",
        default_domains: "multilevel",
    },
    PolicyInfo {
        name: "capability-aware",
        description: "speed-weighted loads on fast/slow cores: moves in proportion to speed, \
                      CPU-bound work to speed cores, free speed cores balance, threads on one \
                      class; option place (machine, domain, node)",
        reference: "Mehta & Kanungo, capability-aware load balancing for asymmetric multicore \
                    (AMC) systems",
        default_domains: "two-level",
    },
    PolicyInfo {
        name: "thread-aware",
        description: "linux26 whose moves between nodes take the thread whose group has the least \
                      exclusive distribution over the nodes (ties: most of its group on the \
                      destination); single threads not evaluated, counts kept incrementally",
        reference: "Chiang & Su, Thread-Aware Mechanism to Enhance Inter-Node Load Balancing for \
                    Multithreaded Applications on NUMA Systems, Applied Sciences 11(14):6486, 2021",
        default_domains: "two-level",
    },
    PolicyInfo {
        name: "memory-aware",
        description: "linux26 whose moves between nodes take the thread with the fewest resident \
                      pages, then the least memory shared with other threads",
        reference: "Chiang et al., memory-aware kernel mechanism and policies for inter-node load \
                    balancing on NUMA systems (COMPSAC 2018; SPE 49(2), 2019)",
        default_domains: "two-level",
    },
    PolicyInfo {
        name: "node-push",
        description: "linux26 with a machine-wide node push balancer on a timer (scx_rusty's \
                      shape): nodes above their share of the load by the threshold push the \
                      task closest to half the imbalance to nodes below it; options threshold, \
                      period-ms",
        reference: "sched-ext/scx, scheds/rust/scx_rusty/src/load_balance.rs (push/pull \
                    domains, load_imbal_high_ratio 0.17, half the imbalance transferred)",
        default_domains: "two-level",
    },
    PolicyInfo {
        name: "scx-rusty",
        description: "sched_ext's scx_rusty: per-domain (per-node) dispatch queues by deadline \
                      or FIFO, idle CPUs stealing from other domains, a tuner every 100 ms \
                      (greedy CPU masks, 20 ms / 1 ms slice) and a user-space balancer every \
                      2 s moving tasks between nodes then domains by duty cycle; options \
                      interval_ms, tune_interval_ms, slice_us, slice_us_overutil, \
                      greedy_threshold, xnuma_greedy, fifo, direct_greedy_under, \
                      kick_greedy_under, direct_greedy_numa, load_half_life_ms, balance_load, \
                      xfer",
        reference: "sched-ext/scx scheds/rust/scx_rusty (commit 7a58a3a)",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "scx-lavd",
        description: "sched_ext scx_lavd's cross-domain load balancing over FIFO domain queues: \
                      domains per node and core type, fair shares by capacity every 10 ms, \
                      stealers and stealees with budgets, a probabilistic walk over neighbours \
                      by distance, force stealing; options dist (lavd, slit), mig-delta-pct, \
                      lb-low-util-pct, slice-us",
        reference: "sched-ext/scx scheds/rust/scx_lavd (commit 7a58a3a), balance.bpf.c",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "fr-dist",
        description: "space sharing, release: idle processors free at once; pages where the faulting processor is",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "fh-dist",
        description: "space sharing, hold: idle processors kept until the process ends; pages where the faulting processor is",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "fp-dist",
        description: "space sharing, partial hold: idle processors kept in the home cluster only; pages where the faulting processor is",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "hb-dist",
        description: "space sharing, basic home: home-cluster processors first, others' home clusters excluded; pages where the faulting processor is",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "hs-dist",
        description: "space sharing, slide: basic home, and a thread outside the home cluster moves onto a home processor that goes idle; pages where the faulting processor is",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "fr-con",
        description: "space sharing, release: idle processors free at once; pages in the home cluster",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "fh-con",
        description: "space sharing, hold: idle processors kept until the process ends; pages in the home cluster",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "fp-con",
        description: "space sharing, partial hold: idle processors kept in the home cluster only; pages in the home cluster",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "hb-con",
        description: "space sharing, basic home: home-cluster processors first, others' home clusters excluded; pages in the home cluster",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "hs-con",
        description: "space sharing, slide: basic home, and a thread outside the home cluster moves onto a home processor that goes idle; pages in the home cluster",
        reference: "Koita, Katayama, Saisho & Fukuda, Memory Conscious Scheduling for Cluster-based NUMA Multiprocessors, J. Supercomputing 16(3), 2000",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "equi",
        description: "space sharing, equipartition: equal shares capped by each process's parallelism, reallocated at creation and end; Dist pages",
        reference: "Gupta, Tucker & Urushibara, SIGMETRICS 1991 (as compared by Koita et al. 2000)",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "dyn",
        description: "space sharing, dynamic: processors move on demand (free, then idle ones, then from processes above an equal share); Dist pages",
        reference: "McCann, Vaswani & Zahorjan, ACM TOCS 11(2), 1993 (as compared by Koita et al. 2000)",
        default_domains: "flat",
    },
    PolicyInfo {
        name: "lim",
        description: "space sharing, cluster-limited: a process's processors from one cluster; Dist pages",
        reference: "Ohishi, Saisho & Fukuda, IEICE Trans. J80-D-I(1), 1997 (as compared by Koita et al. 2000)",
        default_domains: "flat",
    },
];

/// A policy setting: `name` or `name:key=value,key=value` (options of that policy).
fn split_spec(spec: &str) -> (&str, Vec<(&str, &str)>) {
    let (name, opts) = spec.split_once(':').unwrap_or((spec, ""));
    let pairs = opts
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.trim(), v.trim())
        })
        .collect();
    (name.trim(), pairs)
}

/// The value a policy option takes from its word: `choices` maps each accepted word to it; any
/// other word is refused naming them all (`{policy} option '{key}' must be a, b or c, not 'x'`).
/// `origin` names the setting in the error.
pub(crate) fn option_choice<T: Copy>(
    origin: &str,
    policy: &str,
    key: &str,
    value: &str,
    choices: &[(&str, T)],
) -> Result<T, InputError> {
    if let Some(&(_, v)) = choices.iter().find(|(word, _)| *word == value) {
        return Ok(v);
    }
    let words: Vec<&str> = choices.iter().map(|(word, _)| *word).collect();
    let listed = match words.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(option_error(origin, policy, key, value, &listed))
}

/// The error for option `key` of `policy` given `value`, which is not `what` (e.g. "a whole
/// number of ms > 0"): one wording for every policy's options.
pub(crate) fn option_error(
    origin: &str,
    policy: &str,
    key: &str,
    value: &str,
    what: &str,
) -> InputError {
    InputError::new(
        origin,
        format!("{policy} option '{key}' must be {what}, not '{value}'"),
    )
}

/// The error for an option `key` that `policy` does not have, listing its `options`.
pub(crate) fn no_option(origin: &str, policy: &str, key: &str, options: &str) -> InputError {
    InputError::new(
        origin,
        format!("{policy} has no option '{key}' (its options: {options})"),
    )
}

/// A parsed policy setting, ready to build.
enum Spec {
    Linux26,
    Linux(linux::Options),
    ThreadAware,
    MemoryAware,
    OriginAware(origin_aware::Options),
    NodePush(node_push::Options),
    ScxRusty(scx_rusty::Options),
    ScxLavd(scx_lavd::Options),
    CapabilityAware(capability_aware::PlaceScope),
    Space(&'static str),
}

fn parse(origin: &str, spec: &str) -> Result<Spec, InputError> {
    let (name, pairs) = split_spec(spec);
    // An option given twice (`origin-aware:v1=on,v1=off`) is refused, not last-one-wins.
    for (i, (key, _)) in pairs.iter().enumerate() {
        if pairs[..i].iter().any(|(k, _)| k == key) {
            return Err(InputError::new(
                origin,
                format!("policy option '{key}' is given twice"),
            ));
        }
    }
    let no_options = |name: &str| {
        if pairs.is_empty() {
            Ok(())
        } else {
            Err(InputError::new(
                origin,
                format!("policy '{name}' takes no options"),
            ))
        }
    };
    match name {
        "linux26" => no_options(name).map(|()| Spec::Linux26),
        "linux" => linux::Options::parse(origin, &pairs).map(Spec::Linux),
        "thread-aware" => no_options(name).map(|()| Spec::ThreadAware),
        "memory-aware" => no_options(name).map(|()| Spec::MemoryAware),
        "origin-aware" => origin_aware::Options::parse(origin, &pairs).map(Spec::OriginAware),
        "node-push" => node_push::Options::parse(origin, &pairs).map(Spec::NodePush),
        "scx-rusty" => scx_rusty::Options::parse(origin, &pairs).map(Spec::ScxRusty),
        "scx-lavd" => scx_lavd::Options::parse(origin, &pairs).map(Spec::ScxLavd),
        "capability-aware" => {
            capability_aware::PlaceScope::parse(origin, &pairs).map(Spec::CapabilityAware)
        }
        _ if space::NAMES.contains(&name) => no_options(name)
            .map(|()| Spec::Space(space::NAMES.iter().find(|&&n| n == name).expect("listed"))),
        _ => {
            let names: Vec<_> = POLICIES.iter().map(|p| p.name).collect();
            Err(InputError::new(
                origin,
                format!(
                    "unknown policy '{name}'; choose one of {}",
                    names.join(", ")
                ),
            ))
        }
    }
}

/// Checks a policy setting (`name[:options]`) without building it.
pub fn validate(origin: &str, spec: &str) -> Result<(), InputError> {
    parse(origin, spec).map(|_| ())
}

/// The registered name of a policy setting (`origin-aware:v2=off` → `origin-aware`).
pub fn base_name(spec: &str) -> &str {
    split_spec(spec).0
}

/// Builds a policy from its setting: `name` or `name:key=value,...`.
pub fn by_name(spec: &str, ctx: &PolicyContext<'_>) -> Result<Box<dyn Policy>, InputError> {
    Ok(match parse("--policy", spec)? {
        Spec::Linux26 => Box::new(linux26::Linux26::new(ctx)),
        Spec::Linux(o) => Box::new(linux::Linux::new(ctx, o)),
        Spec::ThreadAware => Box::new(thread_aware::new(ctx)),
        Spec::MemoryAware => Box::new(memory_aware::new(ctx)),
        Spec::OriginAware(o) => Box::new(origin_aware::OriginAware::new(ctx, o)),
        Spec::NodePush(o) => Box::new(node_push::NodePush::new(ctx, o)),
        Spec::ScxRusty(o) => Box::new(scx_rusty::ScxRusty::new(ctx, o)),
        Spec::ScxLavd(o) => {
            o.check("--policy", ctx)?;
            Box::new(scx_lavd::ScxLavd::new(ctx, o))
        }
        Spec::CapabilityAware(scope) => {
            Box::new(capability_aware::CapabilityAware::new(ctx, scope))
        }
        Spec::Space(name) => Box::new(space::by_name(name, ctx)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_word_outside_its_choices_is_refused_naming_them() {
        let two = [("leave", true), ("move", false)];
        assert!(!option_choice("--policy", "origin-aware", "nearest", "move", &two).unwrap());
        let err = option_choice("--policy", "origin-aware", "nearest", "stay", &two).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--policy: origin-aware option 'nearest' must be leave or move, not 'stay'"
        );
        let three = [("machine", 0), ("domain", 1), ("node", 2)];
        assert_eq!(option_choice("o", "p", "place", "node", &three).unwrap(), 2);
        let err = option_choice("o", "p", "place", "rack", &three).unwrap_err();
        assert_eq!(
            err.to_string(),
            "o: p option 'place' must be machine, domain or node, not 'rack'"
        );
        // The refusal of a whole setting names the file or flag, the policy, option and word.
        let err = validate("--policy", "origin-aware:nearest=stay").unwrap_err();
        assert_eq!(
            err.to_string(),
            "--policy: origin-aware option 'nearest' must be leave or move, not 'stay'"
        );
    }
}
