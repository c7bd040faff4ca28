//! Space sharing on cluster-based NUMA machines (Koita, Katayama, Saisho & Fukuda): the two-level scheduling
//! every policy of Koita et al.'s comparison shares, with one [`Scheme`] per processor-
//! allocation policy (`home_cluster`: FR FH FP HB HS; `equi`, `dynamic`, `limited`).
//!
//! ```text
//!   processor: free (owner None) │ allocated-busy (owner P, a thread of P on it)
//!                                │ allocated-idle (owner P, nothing on it)
//!   thread of P forked/woken ─► an allocated-idle processor of P (home cluster first)
//!                            └► scheme.grant(P): a free processor, or one taken from another
//!                               process (its thread is held again) ─► else P waits (requests)
//!   processor of P has nothing to run ─► P's next held thread (user-level FCFS)
//!        ├ P has threads released at this instant (a join reached) ─► kept for them
//!        ├ P has ended ─► all its processors free, its home cluster unreserved
//!        └ scheme.idle: hold │ release │ slide a thread of P from outside its home onto it
//!   after every change: waiting processes are served in request order (scheme.waiting_first:
//!   processes holding no processor first)
//! ```
//!
//! 1. A process is a thread group; its kernel scheduler state is created with its first thread.
//!    Schemes with homes reserve one at creation when a cluster is unreserved: the unreserved
//!    cluster with the most free processors, lowest index on ties (reconstruction).
//! 2. The base priority (Koita et al. §2.2), over a set of candidate processors: (1) the
//!    process's before-processors, (2) the cluster where it holds the most processors, (3) the
//!    cluster holding the most of its before-processors, (4) the cluster with the most
//!    candidates. Reading: steps 2–4 rank clusters and take the first ranked cluster that has a
//!    candidate; a before-processor is one the process released and has not got back; within
//!    a step, the lowest CPU id (docs/policies/home-cluster.md).
//! 3. Pages: Dist puts a page on the node of the faulting processor (the thread's first CPU);
//!    Con on the home cluster, or, for a process without one, on the cluster of its first
//!    processor (reconstruction).
//!
//! The policy never balances: no periodic timer, no pulls. Decisions made when a processor is
//! handed over in `cpu_idle` or `process_held` are charged like a balancer's moves (`EngineConfig`'s rates).

pub mod dynamic;
pub mod equi;
pub mod home_cluster;
pub mod limited;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::cpuset::CpuSet;
use crate::interface::{
    AffinityMove, Attempt, BalanceKind, MigrationKind, Move, Pid, Policy, PolicyContext, View,
};
use crate::machine::CpuId;

/// Every space-sharing policy: the ten of Koita et al. and the three they compare with.
pub const NAMES: [&str; 13] = [
    "fr-dist", "fh-dist", "fp-dist", "hb-dist", "hs-dist", "fr-con", "fh-con", "fp-con", "hb-con",
    "hs-con", "equi", "dyn", "lim",
];

/// The space-sharing policy called `name` (one of [`NAMES`]).
pub fn by_name(name: &str, ctx: &PolicyContext<'_>) -> SpaceSharing {
    let scheme: Box<dyn Scheme> = match name {
        "equi" => Box::<equi::Equi>::default(),
        "dyn" => Box::new(dynamic::Dynamic),
        "lim" => Box::new(limited::Limited),
        _ => Box::new(home_cluster::HomeCluster::by_name(name).expect("one of NAMES")),
    };
    SpaceSharing::new(ctx, scheme)
}

/// Page placement (Koita et al. §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Distributed: a page goes to the memory of the faulting processor's cluster.
    Dist,
    /// Concentrated: every page of a process in its home cluster.
    Con,
}

/// What the kernel scheduler keeps of one process.
#[derive(Debug, Clone, Default)]
pub struct Proc {
    /// Its reserved cluster.
    pub home: Option<usize>,
    /// Processors allocated to it.
    pub held: BTreeSet<CpuId>,
    /// Processors it released and has not got back.
    pub before: BTreeSet<CpuId>,
    /// Con without a home: the cluster of its first processor.
    pub mem_node: Option<usize>,
}

/// Processor ownership, shared by every scheme.
#[derive(Debug, Clone)]
pub struct Alloc {
    /// CPUs of each cluster (node), in id order.
    pub clusters: Vec<Vec<CpuId>>,
    pub node_of: Vec<usize>,
    pub owner: Vec<Option<usize>>,
    /// A thread was put on the processor and it has not reported idle since.
    pub busy: Vec<bool>,
    /// Live processes by tgid.
    pub procs: BTreeMap<usize, Proc>,
    /// Per cluster: the process that reserved it.
    pub home_of: Vec<Option<usize>>,
    /// Processes waiting for processors, in request order.
    pub requests: Vec<usize>,
    /// `(time_ns, cpu, owner)` at every change of a processor's owner (for tests and traces).
    pub log: Vec<(u64, CpuId, Option<usize>)>,
}

/// A processor-allocation scheme: what differs between the policies.
pub trait Scheme: Send {
    /// The policy's name.
    fn name(&self) -> &'static str;
    /// Its page placement.
    fn pages(&self) -> Pages;
    /// Whether processes reserve a home cluster at creation.
    fn homes(&self) -> bool {
        false
    }
    /// The set of live processes changed (`tgid` was created or has ended).
    fn changed(&mut self, _a: &Alloc, _v: &View<'_>) {}
    /// The processor `tgid` gets now for a thread that may run only on `fits` (its affinity;
    /// `None`: every CPU): a free one, or one of another process (taken from it; its thread,
    /// if one runs there, is held again); `None`: it waits. Only processors that fit are
    /// candidates, at every step of the scheme's order.
    fn grant(&self, a: &Alloc, v: &View<'_>, tgid: usize, fits: Option<&CpuSet>) -> Option<CpuId>;
    /// `cpu`, allocated to `tgid`, has no thread of `tgid` to run.
    fn idle(&self, a: &Alloc, v: &View<'_>, cpu: CpuId, tgid: usize) -> Idle;
    /// Whether processes holding no processor are served before the others (else in request
    /// order).
    fn waiting_first(&self) -> bool {
        false
    }
}

/// What happens to an allocated processor with nothing to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// It stays allocated (allocated-idle).
    Hold,
    /// It becomes free.
    Release,
    /// This thread of the owner moves onto it (HS).
    Slide(Pid),
}

impl Alloc {
    pub fn new(ctx: &PolicyContext<'_>) -> Self {
        let m = ctx.machine;
        let mut clusters = vec![Vec::new(); m.nodes()];
        let node_of: Vec<usize> = (0..m.cpus()).map(|c| m.cpu_node(c)).collect();
        for (cpu, &node) in node_of.iter().enumerate() {
            clusters[node].push(cpu);
        }
        Self {
            clusters,
            node_of,
            owner: vec![None; m.cpus()],
            busy: vec![false; m.cpus()],
            procs: BTreeMap::new(),
            home_of: vec![None; m.nodes()],
            requests: Vec::new(),
            log: Vec::new(),
        }
    }

    /// Processors of `tgid` (0 for an unknown process).
    pub fn holds(&self, tgid: usize) -> usize {
        self.procs.get(&tgid).map_or(0, |p| p.held.len())
    }

    /// Whether `cpu` is free.
    pub fn free(&self, cpu: CpuId) -> bool {
        self.owner[cpu].is_none()
    }

    /// The base priority of Koita et al. §2.2 for `tgid` over the candidates.
    pub fn base_priority(&self, tgid: usize, cand: &dyn Fn(CpuId) -> bool) -> Option<CpuId> {
        let p = self.procs.get(&tgid)?;
        if let Some(c) = p.before.iter().copied().find(|&c| cand(c)) {
            return Some(c);
        }
        let count_in = |set: &BTreeSet<CpuId>, k: usize| {
            self.clusters[k].iter().filter(|c| set.contains(c)).count()
        };
        let by = |count: &dyn Fn(usize) -> usize| {
            let mut ranked: Vec<(usize, usize)> = (0..self.clusters.len())
                .map(|k| (count(k), k))
                .filter(|&(n, _)| n > 0)
                .collect();
            ranked.sort_by_key(|&(n, k)| (Reverse(n), k));
            ranked
                .iter()
                .find_map(|&(_, k)| self.clusters[k].iter().copied().find(|&c| cand(c)))
        };
        by(&|k| count_in(&p.held, k))
            .or_else(|| by(&|k| count_in(&p.before, k)))
            .or_else(|| by(&|k| self.clusters[k].iter().filter(|&&c| cand(c)).count()))
    }

    /// [`Alloc::base_priority`] over the candidates in `fits` (a thread's allowed CPUs; `None`:
    /// every CPU, the candidates as they are).
    pub fn base_priority_fit(
        &self,
        tgid: usize,
        cand: &dyn Fn(CpuId) -> bool,
        fits: Option<&CpuSet>,
    ) -> Option<CpuId> {
        match fits {
            None => self.base_priority(tgid, cand),
            Some(m) => self.base_priority(tgid, &|c| m.contains(c) && cand(c)),
        }
    }

    /// Gives `cpu` to `tgid`, taking it from its owner if it has one (logged as one change of
    /// owner, so a taking shows in the log as a change from one process to another).
    pub fn allocate(&mut self, now: u64, cpu: CpuId, tgid: usize) {
        self.forget(cpu);
        let node = self.node_of[cpu];
        let p = self.procs.get_mut(&tgid).expect("a live process");
        p.held.insert(cpu);
        p.before.remove(&cpu);
        p.mem_node.get_or_insert(node);
        self.owner[cpu] = Some(tgid);
        self.log.push((now, cpu, Some(tgid)));
    }

    /// `cpu` becomes free; it is a before-processor of its last owner.
    pub fn release(&mut self, now: u64, cpu: CpuId) {
        if self.forget(cpu) {
            self.log.push((now, cpu, None));
        }
    }

    /// `cpu` leaves its owner (if any), becoming one of its before-processors.
    fn forget(&mut self, cpu: CpuId) -> bool {
        let Some(tgid) = self.owner[cpu].take() else {
            return false;
        };
        if let Some(p) = self.procs.get_mut(&tgid) {
            p.held.remove(&cpu);
            p.before.insert(cpu);
        }
        true
    }

    /// The thread running on `cpu` for the scheduler (the view's current process).
    fn thread_on(v: &View<'_>, cpu: CpuId) -> Option<Pid> {
        v.current(cpu).or_else(|| v.queued(cpu).next())
    }
}

/// A space-sharing policy: the common two-level scheduling and one scheme.
pub struct SpaceSharing {
    pub alloc: Alloc,
    scheme: Box<dyn Scheme>,
    /// Something serving could act on changed since the last serve (a request, a processor
    /// freed or idle, a process ended). Serving again with nothing changed does nothing (each
    /// serve grants until every waiting process is refused, and a grant only takes processors
    /// away), so the engine's offers of every idle CPU after a hold cost one serve, not 64.
    dirty: bool,
    /// Processes the scheduler has known, and how many of them reserved a home cluster (the
    /// run's policy metrics `space_processes` and `space_homes`, for schemes with homes).
    processes: u64,
    homes: u64,
}

impl SpaceSharing {
    pub fn new(ctx: &PolicyContext<'_>, scheme: Box<dyn Scheme>) -> Self {
        Self {
            alloc: Alloc::new(ctx),
            scheme,
            dirty: false,
            processes: 0,
            homes: 0,
        }
    }

    fn tgid(v: &View<'_>, pid: Pid) -> usize {
        v.proc(pid).tgid
    }

    /// Creates the scheduler's record of `tgid` on its first thread.
    fn know(&mut self, v: &View<'_>, tgid: usize) {
        if self.alloc.procs.contains_key(&tgid) {
            return;
        }
        let mut p = Proc::default();
        if self.scheme.homes() {
            let a = &self.alloc;
            p.home = (0..a.clusters.len())
                .filter(|&k| a.home_of[k].is_none())
                .max_by_key(|&k| {
                    (
                        a.clusters[k].iter().filter(|&&c| a.free(c)).count(),
                        Reverse(k),
                    )
                });
            if let Some(h) = p.home {
                self.alloc.home_of[h] = Some(tgid);
                self.homes += 1;
            }
        }
        self.processes += 1;
        self.alloc.procs.insert(tgid, p);
        self.scheme.changed(&self.alloc, v);
    }

    /// An allocated-idle processor of `tgid` that thread `pid` may run on (its home cluster
    /// first, `prefer` before others).
    fn own_idle(
        &self,
        v: &View<'_>,
        pid: Pid,
        tgid: usize,
        prefer: Option<CpuId>,
    ) -> Option<CpuId> {
        let a = &self.alloc;
        let p = a.procs.get(&tgid)?;
        let idle = |c: &CpuId| !a.busy[*c] && v.may_run(pid, *c);
        if let Some(c) = prefer.filter(|c| p.held.contains(c) && idle(c)) {
            return Some(c);
        }
        let home = |c: &CpuId| Some(a.node_of[*c]) == p.home;
        p.held
            .iter()
            .copied()
            .filter(idle)
            .min_by_key(|c| (!home(c), *c))
    }

    /// Affinity decides which processor a thread may use, never whether its process gets one
    /// (docs/policies/home-cluster.md, "Affinity"): when thread `pid`, restricted by its
    /// affinity, finds no processor the scheme would give it, but its process would get one
    /// now were the thread free to run anywhere (an allocated-idle processor of its own, or the
    /// scheme's grant), the thread takes by the base priority a free processor it may run on,
    /// else an allocated-idle one of another process. `None` for a thread without affinity.
    #[inline]
    fn affine_fallback(&self, v: &View<'_>, pid: Pid, tgid: usize) -> Option<CpuId> {
        let allowed = v.allowed(pid)?;
        self.fallback_within(v, allowed, tgid)
    }

    fn fallback_within(&self, v: &View<'_>, allowed: &CpuSet, tgid: usize) -> Option<CpuId> {
        let a = &self.alloc;
        let own_idle = a.procs.get(&tgid)?.held.iter().any(|&c| !a.busy[c]);
        if !own_idle && self.scheme.grant(a, v, tgid, None).is_none() {
            return None;
        }
        let fits = Some(allowed);
        a.base_priority_fit(tgid, &|c| a.free(c) && !a.busy[c], fits)
            .or_else(|| {
                let other = |c: CpuId| a.owner[c].is_some_and(|o| o != tgid) && !a.busy[c];
                a.base_priority_fit(tgid, &other, fits)
            })
    }

    /// A processor for a thread of `tgid` without taking a running thread off one; `None`
    /// queues the request (`process_held` may then take one).
    fn admit(&mut self, v: &View<'_>, pid: Pid, prefer: Option<CpuId>) -> Option<CpuId> {
        let tgid = Self::tgid(v, pid);
        self.know(v, tgid);
        let cpu = self.own_idle(v, pid, tgid, prefer).or_else(|| {
            let c = self
                .scheme
                .grant(&self.alloc, v, tgid, v.allowed(pid))
                .filter(|&c| !self.alloc.busy[c])
                .or_else(|| self.affine_fallback(v, pid, tgid))?;
            self.alloc.allocate(v.now, c, tgid);
            Some(c)
        });
        match cpu {
            Some(c) => self.alloc.busy[c] = true,
            None => self.request(tgid),
        }
        cpu
    }

    fn request(&mut self, tgid: usize) {
        self.dirty = true;
        if !self.alloc.requests.contains(&tgid) {
            self.alloc.requests.push(tgid);
        }
    }

    /// Serves waiting processes: each gets processors for its held threads while its scheme
    /// grants them.
    fn serve(&mut self, v: &View<'_>, out: &mut Attempt) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        let mut order = self.alloc.requests.clone();
        if self.scheme.waiting_first() {
            order.sort_by_key(|&t| self.alloc.holds(t) > 0);
        }
        let placed: BTreeSet<Pid> = out.places.iter().map(|&(p, _)| p).collect();
        for tgid in order {
            for pid in v.held_in(tgid).filter(|p| !placed.contains(p)) {
                let cpu = match self.own_idle(v, pid, tgid, None) {
                    Some(c) => c,
                    None => {
                        // A processor given away in this very decision is not taken back: its
                        // thread is not in the view yet.
                        let granted = self
                            .scheme
                            .grant(&self.alloc, v, tgid, v.allowed(pid))
                            .filter(|&c| !out.places.iter().any(|&(_, to)| to == c));
                        let Some(c) = granted.or_else(|| self.affine_fallback(v, pid, tgid)) else {
                            // Without affinities every held thread of the process is refused
                            // alike; with them, the next may run elsewhere.
                            if v.any_affinity() {
                                continue;
                            }
                            break;
                        };
                        if let Some(victim) = self.alloc.owner[c] {
                            if self.alloc.busy[c] {
                                // Preempted: the victim's thread waits for a processor again.
                                let thread =
                                    Alloc::thread_on(v, c).filter(|&t| !out.holds.contains(&t));
                                out.holds.extend(thread);
                                self.request(victim);
                            }
                        }
                        self.alloc.allocate(v.now, c, tgid);
                        c
                    }
                };
                self.alloc.busy[cpu] = true;
                out.places.push((pid, cpu));
            }
        }
        let a = &self.alloc;
        let still: Vec<usize> = a
            .requests
            .iter()
            .copied()
            .filter(|&t| {
                a.procs.contains_key(&t)
                    && (v
                        .held_in(t)
                        .any(|p| !out.places.iter().any(|&(q, _)| q == p))
                        || out.holds.iter().any(|&p| Self::tgid(v, p) == t))
            })
            .collect();
        self.alloc.requests = still;
    }

    /// `tgid` has ended: its processors are free, its home unreserved.
    fn end(&mut self, v: &View<'_>, tgid: usize) {
        let Some(p) = self.alloc.procs.get(&tgid) else {
            return;
        };
        let held: Vec<CpuId> = p.held.iter().copied().collect();
        let home = p.home;
        for c in held {
            self.alloc.release(v.now, c);
        }
        if let Some(h) = home {
            self.alloc.home_of[h] = None;
        }
        self.alloc.procs.remove(&tgid);
        self.alloc.requests.retain(|&t| t != tgid);
        self.scheme.changed(&self.alloc, v);
    }

    fn decided(out: Attempt) -> Option<Attempt> {
        (!out.places.is_empty() || !out.moves.is_empty() || !out.holds.is_empty()).then_some(out)
    }
}

impl Policy for SpaceSharing {
    fn name(&self) -> &'static str {
        self.scheme.name()
    }

    /// Schemes with homes: how many processes there were and how many got a home cluster at
    /// creation (one is reserved only while a cluster is unreserved).
    fn extra_metrics(&self) -> Vec<(String, f64)> {
        if !self.scheme.homes() {
            return Vec::new();
        }
        vec![
            ("space_processes".into(), self.processes as f64),
            ("space_homes".into(), self.homes as f64),
        ]
    }

    fn place_new(&mut self, v: &View<'_>, pid: Pid, _spawn_cpu: CpuId) -> Option<CpuId> {
        self.admit(v, pid, None)
    }

    fn place_wakeup(&mut self, v: &View<'_>, pid: Pid, prev_cpu: CpuId) -> Option<CpuId> {
        self.admit(v, pid, Some(prev_cpu))
    }

    fn first_touch_node(&mut self, v: &View<'_>, pid: Pid, cpu: CpuId) -> usize {
        let node = v.machine.cpu_node(cpu);
        match self.scheme.pages() {
            Pages::Dist => node,
            Pages::Con => self
                .alloc
                .procs
                .get(&Self::tgid(v, pid))
                .and_then(|p| p.home.or(p.mem_node))
                .unwrap_or(node),
        }
    }

    fn process_held(&mut self, v: &View<'_>, _pid: Pid) -> Option<Attempt> {
        let mut out = Attempt::default();
        self.serve(v, &mut out);
        Self::decided(out)
    }

    fn cpu_idle(&mut self, v: &View<'_>, cpu: CpuId) -> Option<Attempt> {
        let mut out = Attempt::default();
        // Only a processor that just finished (or lost) a thread decides; an idle processor
        // offered again only serves waiting processes.
        let finished = std::mem::take(&mut self.alloc.busy[cpu]);
        self.dirty |= finished;
        if let (true, Some(tgid)) = (finished, self.alloc.owner[cpu]) {
            if let Some(next) = v.held_in(tgid).find(|&p| v.may_run(p, cpu)) {
                // The user-level scheduler runs the process's next thread (FCFS) that may run
                // on this processor (its affinity).
                self.alloc.busy[cpu] = true;
                out.places.push((next, cpu));
            } else if v.group_waking(tgid) > 0 {
                // A join was reached: the next phase's threads are about to be forked here.
            } else if v.group_done(tgid) {
                self.end(v, tgid);
            } else {
                match self.scheme.idle(&self.alloc, v, cpu, tgid) {
                    Idle::Hold => {}
                    Idle::Release => self.alloc.release(v.now, cpu),
                    Idle::Slide(pid) => {
                        let from = v.proc(pid).cpu;
                        self.alloc.busy[cpu] = true;
                        out.moves.push(Move {
                            pid,
                            from,
                            to: cpu,
                            kind: MigrationKind::Active,
                        });
                    }
                }
            }
        }
        self.serve(v, &mut out);
        Self::decided(out)
    }

    /// A thread whose processor its new affinity excludes leaves it and asks for one as a
    /// woken thread does: an allocated-idle processor of its process that it may run on, or
    /// the scheme's grant; else it waits (held) for one.
    fn affinity_cpu(&mut self, v: &View<'_>, pid: Pid) -> AffinityMove {
        self.admit(v, pid, None)
            .map_or(AffinityMove::Hold, AffinityMove::To)
    }

    fn next_periodic_ns(&self, _: &View<'_>, _: CpuId) -> Option<u64> {
        None
    }

    fn balance(&mut self, _: &View<'_>, _: CpuId, _: usize, _: BalanceKind) -> Option<Attempt> {
        None
    }
}
