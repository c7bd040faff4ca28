//! `linux`'s nohz idle balancing (`kernel/sched/fair.c` with `CONFIG_NO_HZ_COMMON`, as Debian
//! builds 6.12): an idle CPU stops its tick, and the busy CPUs' ticks kick one tickless idle
//! CPU, the idle load balancer (ILB), to balance every due tickless idle CPU on its behalf.
//!
//! ```text
//!   machine   nohz.idle_cpus_mask (tick_stopped per CPU), nohz.nr_cpus,
//!             nohz.next_balance (jiffies), nohz.needs_update
//!   per CPU   nohz_flags (kicks sent, not yet taken) │ idle_ticked (a tick since it went
//!             idle) │ tick_idle (idle at its tick in progress) │ sd_llc's span (nr_busy_cpus)
//!             │ the ILB run it is doing: kicks taken, place in the order, earliest
//!             rq->next_balance seen
//! ```
//!
//! 1. Going idle: a CPU keeps its tick until its first tick in the idle loop (its own
//!    balancing then, if due), then stops it and joins the mask (`tick_nohz_idle_stop_tick` →
//!    `nohz_balance_enter_idle`: `needs_update`). A tickless CPU balances nothing itself.
//! 2. A busy CPU's tick, every jiffy (`nohz_balancer_kick`): the first after tickless idle
//!    leaves the mask (`nohz_balance_exit_idle`); then, with CPUs in the mask and `jiffies >=
//!    nohz.next_balance`, two tasks here or more than one busy CPU in its LLC (asymmetric: a
//!    misfit task instead) make a BALANCE kick (`kick_ilb`: `nohz.next_balance = jiffies +
//!    1`), and `needs_update` a NEXT kick; the kick goes to the lowest idle CPU of the mask
//!    (`find_new_ilb`), [`IPI_LATENCY_NS`] later, unless one is pending there.
//! 3. The kicked CPU, the idle load balancer (ILB), still idle, takes the kicks
//!    (`nohz_csd_func`) and visits the CPUs of the mask from ILB + 1, wrapping, itself last
//!    (`_nohz_idle_balance`): each idle one whose `rq->next_balance` is due is balanced on its
//!    behalf (BALANCE: `sched_balance_domains(rq, CPU_IDLE)`); it stops if it gets work
//!    itself; at the end `nohz.next_balance` is the earliest `rq->next_balance` it saw; kicks
//!    that arrived meanwhile start it again.
//!
//! The engine runs the ILB's balancing CPU by CPU (`Policy::next_kicked`), each starting when
//! the work charged for the previous one ends. What is not modelled (docs/policies/linux.md,
//! simplifications): `NOHZ_STATS_KICK` and blocked-load updates (PELT's blocked averages are
//! the engine's, exact), the expiry of a tickless CPU's own timer, CPUs kept busy by kernel
//! threads.

use super::Linux;
use crate::cpuset::CpuSet;
use crate::interface::View;
use crate::machine::CpuId;

/// `NOHZ_BALANCE_KICK` (`kernel/sched/sched.h`): the ILB balances the due idle CPUs.
pub(super) const NOHZ_BALANCE_KICK: u8 = 1 << 0;
/// `NOHZ_NEXT_KICK`: the ILB only recomputes `nohz.next_balance` (a CPU stopped its tick).
pub(super) const NOHZ_NEXT_KICK: u8 = 1 << 3;
/// `NOHZ_KICK_MASK` of the kicks modelled (`NOHZ_STATS_KICK`, blocked-load updates, is not).
pub(super) const NOHZ_KICK_MASK: u8 = NOHZ_BALANCE_KICK | NOHZ_NEXT_KICK;

/// How long after the kicking tick the ILB starts (ns): `kick_ilb` sends an IPI
/// (`smp_call_function_single_async`) to an idle CPU, which wakes, runs `nohz_csd_func` and the
/// softirq it raises on the way out of the interrupt. Not a kernel constant: an inference — an
/// IPI between cores takes about 1–2 µs on current x86, and the shallowest idle state's exit
/// latency is 1 µs in the kernel's own tables (`intel_idle`'s C1) — of the same standing as
/// the engine's balancing costs.
pub const IPI_LATENCY_NS: u64 = 2_000;

/// The global nohz state (`static struct nohz` in `fair.c`) and the per-CPU parts of it.
#[derive(Debug, Clone)]
pub(super) struct Nohz {
    /// Whether idle CPUs stop their tick (`nohz=off` on the kernel's command line: no).
    pub(super) enabled: bool,
    /// `rq->nohz_tick_stopped`: the CPU is in `nohz.idle_cpus_mask`.
    pub(super) tick_stopped: Vec<bool>,
    /// `nohz.nr_cpus`.
    pub(super) nr_cpus: usize,
    /// `nohz.next_balance`, in jiffies.
    pub(super) next_balance: u64,
    /// `nohz.needs_update`.
    pub(super) needs_update: bool,
    /// `nohz_flags(cpu)`: kicks sent to the CPU and not yet taken by `nohz_csd_func`.
    pub(super) flags: Vec<u8>,
    /// Per CPU: whether it has had a tick since it went idle (`got_tick` in `do_idle`): its
    /// tick stops after the first.
    pub(super) idle_ticked: Vec<bool>,
    /// Per CPU: whether it was idle at its tick in progress (`rq->idle_balance`).
    pub(super) tick_idle: Vec<bool>,
    /// Per CPU: the ILB run it is doing (`_nohz_idle_balance`), if any.
    pub(super) runs: Vec<Option<IlbRun>>,
    /// Per CPU: the span of its LLC domain (`sd_llc`: its highest level sharing the LLC), whose
    /// CPUs not in the mask are `sd_llc_shared->nr_busy_cpus`.
    pub(super) llc: Vec<Option<std::sync::Arc<CpuSet>>>,
}

/// One run of `_nohz_idle_balance` on an ILB CPU.
#[derive(Debug, Clone, Copy)]
pub(super) struct IlbRun {
    /// The kicks taken (`rq->nohz_idle_balance`).
    flags: u8,
    /// How many CPUs of the wrap-around order (ILB + 1, …, ILB) were visited.
    pos: usize,
    /// The earliest `rq->next_balance` seen (`next_balance`), and whether one was.
    next_balance: u64,
    update: bool,
    /// The CPU balanced last, whose `rq->next_balance` is read after its balancing.
    last: Option<CpuId>,
}

impl Nohz {
    pub(super) fn new(
        cpus: usize,
        enabled: bool,
        llc: Vec<Option<std::sync::Arc<CpuSet>>>,
    ) -> Self {
        Self {
            enabled,
            tick_stopped: vec![false; cpus],
            nr_cpus: 0,
            // init_sched_fair_class: nohz.next_balance = jiffies.
            next_balance: 0,
            needs_update: false,
            flags: vec![0; cpus],
            idle_ticked: vec![false; cpus],
            tick_idle: vec![false; cpus],
            runs: vec![None; cpus],
            llc,
        }
    }

    /// `nohz_balance_enter_idle`: the CPU stopped its tick (`tick_nohz_idle_stop_tick`).
    pub(super) fn enter_idle(&mut self, cpu: CpuId) {
        if self.tick_stopped[cpu] {
            return;
        }
        self.tick_stopped[cpu] = true;
        self.nr_cpus += 1;
        // set_cpu_sd_state_idle: nr_busy_cpus of its LLC drops (read from the mask here).
        self.needs_update = true;
    }

    /// `nohz_balance_exit_idle`, at the CPU's first busy tick.
    pub(super) fn exit_idle(&mut self, cpu: CpuId) {
        if !self.tick_stopped[cpu] {
            return;
        }
        self.tick_stopped[cpu] = false;
        self.nr_cpus -= 1;
    }

    /// `atomic_read(&sds->nr_busy_cpus)` of `cpu`'s LLC: its CPUs whose tick has not stopped.
    pub(super) fn nr_busy_cpus(&self, cpu: CpuId) -> Option<usize> {
        let llc = self.llc[cpu].as_ref()?;
        Some(llc.iter().filter(|&c| !self.tick_stopped[c]).count())
    }
}

impl Linux {
    /// `nohz_balancer_kick` and `kick_ilb` at a tick of `cpu` (run by the engine right after
    /// the tick's per-task work): the ILB to interrupt and when.
    pub(super) fn nohz_kick(&mut self, v: &View<'_>, cpu: CpuId) -> Option<(CpuId, u64)> {
        let idle = v.idle(cpu);
        self.nohz.tick_idle[cpu] = idle;
        if !self.nohz.enabled {
            return None;
        }
        // "if (unlikely(rq->idle_balance)) return;": an idle CPU's own tick never kicks.
        if idle {
            return None;
        }
        self.nohz.idle_ticked[cpu] = false;
        // sched_balance_trigger returns early on a CPU without domains (on_null_domain).
        if self.sd[cpu].is_empty() {
            return None;
        }
        // "At the first busy tick after returning from idle, we will update the busy stats."
        self.nohz.exit_idle(cpu);
        if self.nohz.nr_cpus == 0 {
            return None;
        }
        let now = self.jiffies(v.now);
        let mut flags = 0;
        if now >= self.nohz.next_balance {
            let kick = if v.nr_running(cpu) >= 2 {
                true
            } else if self.sd_asym_cpucapacity[cpu].is_some() {
                // check_misfit_status, and "Skip the LLC logic" on asymmetric systems.
                self.misfit_task_load(v, cpu) > 0
            } else {
                // "just get a NOHZ balance going if it looks like this LLC domain has tasks
                // we could move" (no RT/IRQ pressure: check_cpu_capacity never holds; no
                // asym packing).
                self.nohz.nr_busy_cpus(cpu).is_some_and(|n| n > 1)
            };
            if kick {
                flags = NOHZ_BALANCE_KICK;
            }
        }
        if self.nohz.needs_update {
            flags |= NOHZ_NEXT_KICK;
        }
        if flags == 0 {
            return None;
        }
        // kick_ilb: "Increase nohz.next_balance only when if full ilb is triggered".
        if flags & NOHZ_BALANCE_KICK != 0 {
            self.nohz.next_balance = now + 1;
        }
        // find_new_ilb: the first CPU of the mask, other than this one, that is idle.
        let ilb =
            (0..v.machine.cpus()).find(|&c| self.nohz.tick_stopped[c] && c != cpu && v.idle(c))?;
        if self.nohz.flags[ilb] & flags == flags {
            return None;
        }
        let old = self.nohz.flags[ilb];
        self.nohz.flags[ilb] |= flags;
        // "he who sets the first flag owns it": an IPI is pending already.
        if old & NOHZ_KICK_MASK != 0 {
            return None;
        }
        Some((ilb, v.now + IPI_LATENCY_NS))
    }

    /// `nohz_csd_func` and `_nohz_idle_balance` on `ilb`: the next CPU it balances on that
    /// CPU's behalf (`sched_balance_domains(rq, CPU_IDLE)`), or `None` when the run is over.
    pub(super) fn nohz_next(&mut self, v: &View<'_>, ilb: CpuId) -> Option<CpuId> {
        let n = v.machine.cpus();
        let now = self.jiffies(v.now);
        let mut run = match self.nohz.runs[ilb].take() {
            Some(run) => run,
            None => self.nohz_csd(v, ilb, now)?,
        };
        if let Some(x) = run.last.take() {
            self.fold_next_balance(&mut run, x);
        }
        loop {
            if run.pos == n {
                if run.update {
                    self.nohz.next_balance = run.next_balance;
                }
                // A kick that arrived during the run raised the softirq again.
                run = self.nohz_csd(v, ilb, now)?;
                continue;
            }
            run.pos += 1;
            let x = (ilb + run.pos) % n;
            if !self.nohz.tick_stopped[x] || !v.idle(x) {
                continue;
            }
            // "If this CPU gets work to do, stop the load balancing work being done for
            // other CPUs."
            if !v.idle(ilb) {
                if run.flags & NOHZ_NEXT_KICK != 0 {
                    self.nohz.needs_update = true;
                }
                return None;
            }
            if run.flags & NOHZ_BALANCE_KICK != 0 && now >= self.cpu[x].next_balance {
                run.last = Some(x);
                self.cpu[x].visit = Some(ilb);
                self.nohz.runs[ilb] = Some(run);
                return Some(x);
            }
            self.fold_next_balance(&mut run, x);
        }
    }

    /// `nohz_csd_func` on `ilb`: the kicks sent to it start a run if it is still idle (else
    /// they are lost).
    fn nohz_csd(&mut self, v: &View<'_>, ilb: CpuId, now: u64) -> Option<IlbRun> {
        let flags = std::mem::take(&mut self.nohz.flags[ilb]) & NOHZ_KICK_MASK;
        if flags == 0 || !v.idle(ilb) {
            return None;
        }
        if flags & NOHZ_NEXT_KICK != 0 {
            self.nohz.needs_update = false;
        }
        Some(IlbRun {
            flags,
            pos: 0,
            next_balance: now + 60 * self.hz,
            update: false,
            last: None,
        })
    }

    /// `_nohz_idle_balance`: the earliest `rq->next_balance` of the CPUs it visited.
    fn fold_next_balance(&self, run: &mut IlbRun, x: CpuId) {
        let nb = self.cpu[x].next_balance;
        if run.next_balance > nb {
            run.next_balance = nb;
            run.update = true;
        }
    }

    /// The end of an own tick of `cpu` (after its balancing softirq, if any): an idle CPU's
    /// first tick in the idle loop stops the tick (`cpuidle_idle_call(got_tick)`, 6.12.85 on,
    /// without a cpuidle driver) and enters nohz (`tick_nohz_idle_stop_tick` →
    /// `nohz_balance_enter_idle`); `busy` says whether the softirq gave it work.
    pub(super) fn end_of_tick(&mut self, cpu: CpuId, busy: bool) {
        if !self.nohz.enabled || !self.nohz.tick_idle[cpu] || busy {
            return;
        }
        if !std::mem::replace(&mut self.nohz.idle_ticked[cpu], true) {
            self.nohz.enter_idle(cpu);
        }
    }
}
