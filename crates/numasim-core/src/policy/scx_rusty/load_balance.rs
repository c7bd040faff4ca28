//! scx_rusty's user-space load balancer (`scheds/rust/scx_rusty/src/load_balance.rs`,
//! `LoadBalancer::load_balance`) as pure functions on plain data: domain loads in, task →
//! domain transfers out. The policy (`super`) gathers the data from the view and applies the
//! transfers at each task's next enqueue.
//!
//! ```text
//!                    LB root: nodes sorted by load (push from the back, pull from the front)
//!                      │
//!        ┌─────────────┴──────────────┐
//!     NumaNode 0 (0.17)           NumaNode 1 (0.17)   load_sum = Σ its domains, avg = total / nodes
//!        │                            │
//!     Domain 0 … (0.05)           Domain 1 … (0.05)   load_sum = weight × Σ duty cycles,
//!        │                                            avg = total / domains
//!     tasks sorted by load (weight × duty cycle), each once per round (`migrated`)
//! ```
//!
//! 1. Loads (`create_domain_hierarchy`, `calculate_load_avgs`, scx_utils'
//!    `LoadAggregator`): a domain's load is its duty-cycle sum times the weight of its load
//!    bucket ([`ledger`]); with `lb_apply_weight` (the tuner found the machine fully
//!    utilised) infeasible weights are capped, otherwise every duty cycle counts
//!    [`DEFAULT_WEIGHT`]. A node's load is the sum of its domains'. Each entity is
//!    `NeedsPush` / `NeedsPull` when |load − avg| > avg × its ratio (node 0.17, domain 0.05:
//!    `LoadEntity::rebalance`), else `Balanced`.
//! 2. Between nodes (`balance_between_nodes`): the busiest node pushes while it needs to,
//!    up to its push cutoff (half its imbalance: `push_cutoff`), to the least loaded nodes
//!    that need to pull, one `transfer_between_nodes` each: its busiest pushing domain
//!    against the pull node's least loaded pulling domains, one task at most.
//! 3. Inside each node (`balance_within_node`): the same between its domains, a pull domain
//!    taken again as long as it still needs load.
//! 4. A transfer (`try_find_move_task`): with the pair's imbalances (to_push, to_pull) and
//!    the amount to move x = min(|imbal|) × 0.5 (`xfer_between`), the allowed, not yet moved
//!    tasks of the push domain (sorted by load) give the last one with load ≤ x and the first
//!    with load ≥ x; the one leaving the smaller |to_push − l| + |to_pull − l| is taken, only
//!    if that is not above to_push + to_pull. Tasks preferring the pull domain (mempolicy)
//!    are tried first. Loads follow the transfer.
//!
//! Orders follow the source's `SortedVec` (sorted-vec 0.8: `insert` at `binary_search`'s
//! position, `from_unsorted` by `sort_unstable`) on `OrderedFloat` loads, with the same std
//! algorithms, so ties fall as the source's do.
//!
//! Known limits: the source's per-task `is_kworker` skip has nothing to skip here (no
//! kthreads); `preferred_dom_mask` is 0 (no mempolicy), so the first, preferring pass of each
//! transfer never finds a task (it still drops the tasks the pull domain may not run, as the
//! source's does).

use std::cmp::Ordering;

use crate::workload::Pid;

/// `LB_DEFAULT_WEIGHT` (bpf/intf.h): the weight of a nice-0 task, and of every duty cycle
/// when loads are not weighted.
pub const DEFAULT_WEIGHT: f64 = 100.0;
/// `LB_MAX_WEIGHT`.
pub const LB_MAX_WEIGHT: u64 = 10_000;
/// `LB_LOAD_BUCKETS`.
pub const LB_LOAD_BUCKETS: u64 = 100;
/// A node's imbalance threshold and transfer ratios (`NumaNode::LOAD_IMBAL_*`).
pub const NODE_IMBAL_HIGH_RATIO: f64 = 0.17;
pub const NODE_XFER_TARGET_RATIO: f64 = 0.50;
pub const NODE_PUSH_MAX_RATIO: f64 = 0.50;
/// A domain's (`Domain::LOAD_IMBAL_*`).
pub const DOM_IMBAL_HIGH_RATIO: f64 = 0.05;
pub const DOM_XFER_TARGET_RATIO: f64 = 0.50;
pub const DOM_PUSH_MAX_RATIO: f64 = 0.50;

/// The weight the load aggregator gives a task weight's bucket: the bucket's mid-point
/// (`weight_to_bucket_idx` in bpf/main.bpf.c, `bucket_range` and `bucket_weight` in
/// load_balance.rs). A nice-0 task (weight 100) falls in bucket 1, weighted 151.
pub fn bucket_weight(task_weight: u64) -> u64 {
    let bucket = task_weight * LB_LOAD_BUCKETS / LB_MAX_WEIGHT;
    let per_bucket = LB_MAX_WEIGHT / LB_LOAD_BUCKETS;
    let min_w = 1 + (LB_MAX_WEIGHT * bucket) / LB_LOAD_BUCKETS;
    (min_w as f64 + per_bucket as f64 / 2.0).ceil() as u64
}

/// What scx_utils' `LoadAggregator::calculate` answers, for domains whose tasks all have one
/// weight (one bucket each).
#[derive(Debug, Clone, PartialEq)]
pub struct Ledger {
    /// Per domain: the load the balancer uses (`dom_dcycle_sums` × `DEFAULT_WEIGHT`, or
    /// `dom_load_sums` with `lb_apply_weight`).
    pub dom_loads: Vec<f64>,
    /// Their total (`global_dcycle_sum` × `DEFAULT_WEIGHT` or `global_load_sum`).
    pub total_load: f64,
    /// The weight above which a task's weight is capped (`effective_max_weight`, 10000
    /// unless the infeasible-weight pass lowered it); used only with `lb_apply_weight`.
    pub infeas_threshold: f64,
}

fn approx_ge(a: f64, b: f64) -> bool {
    a > b || (a - b).abs() <= 0.0001
}

/// Domain loads from domain duty-cycle sums (`create_domain_hierarchy` over
/// `calculate_load_avgs`): `weight` is the bucket weight of every task ([`bucket_weight`]),
/// `apply_weight` the source's `lb_apply_weight` (the tuner's `fully_utilized`). A domain
/// whose duty cycle reads 0 records nothing, as the source skips it.
pub fn ledger(dom_dcycles: &[f64], nr_cpus: usize, weight: u64, apply_weight: bool) -> Ledger {
    let w = weight as f64;
    let global_dcycle: f64 = dom_dcycles.iter().filter(|&&d| d != 0.0).sum();
    if !apply_weight {
        return Ledger {
            dom_loads: dom_dcycles.iter().map(|&d| DEFAULT_WEIGHT * d).collect(),
            total_load: DEFAULT_WEIGHT * global_dcycle,
            infeas_threshold: LB_MAX_WEIGHT as f64,
        };
    }
    let mut dom_loads: Vec<f64> = dom_dcycles.iter().map(|&d| w * d).collect();
    let mut total: f64 = dom_dcycles
        .iter()
        .filter(|&&d| d != 0.0)
        .map(|&d| w * d)
        .sum();
    let mut effective = LB_MAX_WEIGHT as f64;
    let max_weight = if global_dcycle != 0.0 { w } else { 0.0 };
    // `calculate` → `adjust_infeas_weights` with one weight class: λ = load / CPUs; capped at
    // λ when λ ≥ the weight, else the class is taken out and λ recomputed with nothing left.
    if approx_ge(max_weight, total / nr_cpus as f64) && global_dcycle != 0.0 {
        let p = nr_cpus as f64;
        let lambda = total / p;
        if approx_ge(lambda, w) {
            effective = lambda;
            dom_loads = dom_dcycles.iter().map(|&d| w.min(lambda) * d).collect();
            total = dom_loads.iter().sum();
        }
    }
    Ledger {
        dom_loads,
        total_load: total,
        infeas_threshold: effective,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BalanceState {
    Balanced,
    NeedsPush,
    NeedsPull,
}

/// `LoadEntity`: a node's or domain's load against its average.
#[derive(Debug, Clone)]
struct LoadEntity {
    cost_ratio: f64,
    push_max_ratio: f64,
    xfer_ratio: f64,
    load_sum: f64,
    load_avg: f64,
    load_delta: f64,
    state: BalanceState,
}

impl LoadEntity {
    fn new(cost_ratio: f64, push_max_ratio: f64, xfer_ratio: f64, sum: f64, avg: f64) -> Self {
        let mut e = Self {
            cost_ratio,
            push_max_ratio,
            xfer_ratio,
            load_sum: sum,
            load_avg: avg,
            load_delta: 0.0,
            state: BalanceState::Balanced,
        };
        e.add_load(0.0);
        e
    }

    fn imbal(&self) -> f64 {
        self.load_sum - self.load_avg
    }

    fn rebalance(&mut self, new_load: f64) {
        self.load_sum = new_load;
        let imbal = self.imbal();
        self.state = if imbal.abs() > self.load_avg * self.cost_ratio {
            if imbal > 0.0 {
                BalanceState::NeedsPush
            } else {
                BalanceState::NeedsPull
            }
        } else {
            BalanceState::Balanced
        };
    }

    fn add_load(&mut self, delta: f64) {
        self.rebalance(self.load_sum + delta);
        self.load_delta += delta;
    }

    fn push_cutoff(&self) -> f64 {
        self.imbal().abs() * self.push_max_ratio
    }

    fn xfer_between(&self, other: &LoadEntity) -> f64 {
        self.imbal().abs().min(other.imbal().abs()) * self.xfer_ratio
    }
}

/// A task the balancer may move: what `populate_tasks_by_load` reads of it.
#[derive(Debug, Clone, PartialEq)]
pub struct LbTask {
    pub pid: Pid,
    /// Weight × duty cycle.
    pub load: f64,
    /// The domains it may run in (bit per domain: `dom_mask`).
    pub dom_mask: u64,
    /// The domains its memory policy prefers (`preferred_dom_mask`; 0 here).
    pub preferred_dom_mask: u64,
}

#[derive(Debug, Clone)]
struct TaskInfo {
    task: LbTask,
    migrated: bool,
}

#[derive(Debug)]
struct Domain {
    id: usize,
    queried_tasks: bool,
    load: LoadEntity,
    tasks: Vec<TaskInfo>,
}

#[derive(Debug)]
struct NumaNode {
    load: LoadEntity,
    domains: Vec<Domain>,
}

/// `OrderedFloat`'s order on loads (never NaN here).
fn cmp_load(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// A sorted-vec 0.8 `SortedVec` keyed by load: the operations the source uses.
trait Loaded {
    fn load(&self) -> f64;
}

impl Loaded for TaskInfo {
    fn load(&self) -> f64 {
        self.task.load
    }
}
impl Loaded for Domain {
    fn load(&self) -> f64 {
        self.load.load_sum
    }
}
impl Loaded for NumaNode {
    fn load(&self) -> f64 {
        self.load.load_sum
    }
}

/// `SortedVec::insert`: at `binary_search`'s answer, found or not.
fn sv_insert<T: Loaded>(v: &mut Vec<T>, x: T) {
    let at = match v.binary_search_by(|e| cmp_load(e.load(), x.load())) {
        Ok(i) | Err(i) => i,
    };
    v.insert(at, x);
}

/// `SortedVec::push`: at the back when not below the last element, else `insert`.
fn sv_push<T: Loaded>(v: &mut Vec<T>, x: T) {
    match v.last() {
        Some(last) if cmp_load(x.load(), last.load()) == Ordering::Less => sv_insert(v, x),
        _ => v.push(x),
    }
}

/// `SortedVec::from_unsorted`: `sort_unstable`.
fn sv_from_unsorted<T: Loaded>(mut v: Vec<T>) -> Vec<T> {
    v.sort_unstable_by(|a, b| cmp_load(a.load(), b.load()));
    v
}

/// One transfer the balancer decided: `pid`'s target domain becomes `to_dom`.
#[derive(Debug, Clone, PartialEq)]
pub struct Transfer {
    pub pid: Pid,
    pub from_dom: usize,
    pub to_dom: usize,
    pub load: f64,
}

/// What a round decided and what it examined.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub transfers: Vec<Transfer>,
    /// Domains whose tasks were read (`populate_tasks_by_load`), in order.
    pub populated: Vec<usize>,
    /// Tasks read for them.
    pub tasks_read: u32,
    /// Candidate tasks scanned by the transfers (`try_find_move_task`'s filter).
    pub tasks_scanned: u32,
}

/// One round of the balancer. `dom_node[d]` is domain d's node (of `nr_nodes`); `ledger` its
/// loads; `tasks_of(d)` the tasks of domain d (its recently active tasks whose target is
/// d, in the order the domain's ring lists them), asked at most once per domain per round
/// and only when the domain is about to push (`populate_tasks_by_load`).
pub fn load_balance(
    nr_nodes: usize,
    dom_node: &[usize],
    ledger: &Ledger,
    tasks_of: &mut dyn FnMut(usize) -> Vec<LbTask>,
) -> Outcome {
    let mut lb = Balancer {
        tasks_of,
        out: Outcome::default(),
    };
    let mut nodes = create_domain_hierarchy(nr_nodes, dom_node, ledger);
    // perform_balancing
    if nr_nodes > 1 {
        lb.balance_between_nodes(&mut nodes);
    }
    for node in nodes.iter_mut() {
        lb.balance_within_node(node);
    }
    lb.out
}

fn create_domain_hierarchy(nr_nodes: usize, dom_node: &[usize], ledger: &Ledger) -> Vec<NumaNode> {
    let total = ledger.total_load;
    let numa_load_avg = total / nr_nodes as f64;
    let mut nodes: Vec<NumaNode> = (0..nr_nodes)
        .map(|_| NumaNode {
            load: LoadEntity::new(
                NODE_IMBAL_HIGH_RATIO,
                NODE_PUSH_MAX_RATIO,
                NODE_XFER_TARGET_RATIO,
                0.0,
                numa_load_avg,
            ),
            domains: Vec::new(),
        })
        .collect();
    let dom_load_avg = total / ledger.dom_loads.len() as f64;
    for (dom_id, &load) in ledger.dom_loads.iter().enumerate() {
        let node = &mut nodes[dom_node[dom_id]];
        // NumaNode::allocate_domain
        let domain = Domain {
            id: dom_id,
            queried_tasks: false,
            load: LoadEntity::new(
                DOM_IMBAL_HIGH_RATIO,
                DOM_PUSH_MAX_RATIO,
                DOM_XFER_TARGET_RATIO,
                load,
                dom_load_avg,
            ),
            tasks: Vec::new(),
        };
        sv_insert(&mut node.domains, domain);
        let sum = node.load.load_sum + load;
        node.load.rebalance(sum);
    }
    sv_from_unsorted(nodes)
}

struct Balancer<'a> {
    tasks_of: &'a mut dyn FnMut(usize) -> Vec<LbTask>,
    out: Outcome,
}

impl Balancer<'_> {
    fn populate_tasks_by_load(&mut self, dom: &mut Domain) {
        if dom.queried_tasks {
            return;
        }
        dom.queried_tasks = true;
        self.out.populated.push(dom.id);
        for task in (self.tasks_of)(dom.id) {
            self.out.tasks_read += 1;
            sv_insert(
                &mut dom.tasks,
                TaskInfo {
                    task,
                    migrated: false,
                },
            );
        }
    }

    /// `try_find_move_task`: the load moved, if a task was.
    fn try_find_move_task(
        &mut self,
        (push_dom, to_push): (&mut Domain, f64),
        (pull_dom, to_pull): (&mut Domain, f64),
        prefer: bool,
        to_xfer: f64,
    ) -> Option<f64> {
        let to_pull = to_pull.abs();
        let calc_new_imbal = |xfer: f64| (to_push - xfer).abs() + (to_pull - xfer).abs();
        self.populate_tasks_by_load(push_dom);
        let pull_bit = 1_u64 << pull_dom.id;
        // The source keeps only the filtered tasks in the push domain, whatever comes next.
        let tasks: Vec<TaskInfo> = std::mem::take(&mut push_dom.tasks)
            .into_iter()
            .filter(|t| t.task.dom_mask & pull_bit != 0 && !t.migrated)
            .collect();
        self.out.tasks_scanned += tasks.len() as u32;
        let filter = |t: &TaskInfo| !prefer || t.task.preferred_dom_mask & pull_bit > 0;
        let below = tasks
            .iter()
            .rposition(|t| cmp_load(t.task.load, to_xfer) != Ordering::Greater && filter(t));
        let above = tasks
            .iter()
            .position(|t| cmp_load(t.task.load, to_xfer) != Ordering::Less && filter(t));
        let (index, new_imbal) = match (below, above) {
            (None, None) => {
                push_dom.tasks = sv_from_unsorted(tasks);
                return None;
            }
            (Some(i), None) | (None, Some(i)) => (i, calc_new_imbal(tasks[i].task.load)),
            (Some(i0), Some(i1)) => {
                let (n0, n1) = (
                    calc_new_imbal(tasks[i0].task.load),
                    calc_new_imbal(tasks[i1].task.load),
                );
                if n0 <= n1 {
                    (i0, n0)
                } else {
                    (i1, n1)
                }
            }
        };
        let old_imbal = to_push + to_pull;
        if old_imbal < new_imbal {
            push_dom.tasks = sv_from_unsorted(tasks);
            return None;
        }
        let mut tasks = tasks;
        tasks[index].migrated = true;
        let load = tasks[index].task.load;
        let pid = tasks[index].task.pid;
        push_dom.tasks = sv_from_unsorted(tasks);
        // Domain::transfer_load
        self.out.transfers.push(Transfer {
            pid,
            from_dom: push_dom.id,
            to_dom: pull_dom.id,
            load,
        });
        push_dom.load.add_load(-load);
        pull_dom.load.add_load(load);
        Some(load)
    }

    /// Both passes of a transfer: tasks preferring the pull domain, then any.
    fn try_both(
        &mut self,
        push: (&mut Domain, f64),
        pull: (&mut Domain, f64),
        xfer: f64,
    ) -> Option<f64> {
        let (push_dom, to_push) = push;
        let (pull_dom, to_pull) = pull;
        self.try_find_move_task((push_dom, to_push), (pull_dom, to_pull), true, xfer)
            .or_else(|| {
                self.try_find_move_task((push_dom, to_push), (pull_dom, to_pull), false, xfer)
            })
    }

    fn transfer_between_nodes(
        &mut self,
        push_node: &mut NumaNode,
        pull_node: &mut NumaNode,
    ) -> f64 {
        let push_imbal = push_node.load.imbal();
        let pull_imbal = pull_node.load.imbal();
        let xfer = push_node.load.xfer_between(&pull_node.load);
        if push_imbal <= 0.0 || pull_imbal >= 0.0 {
            // The source bails out of the whole round here (it cannot happen: a push node is
            // above its average, a pull node below).
            return 0.0;
        }
        let mut pushers: std::collections::VecDeque<Domain> = Default::default();
        let mut pullers: Vec<Domain> = Vec::new();
        let mut pushed = 0.0;
        while let Some(mut push_dom) = push_node.domains.pop() {
            if push_dom.load.state != BalanceState::NeedsPush {
                sv_insert(&mut push_node.domains, push_dom);
                break;
            }
            while !pull_node.domains.is_empty() {
                let mut pull_dom = pull_node.domains.remove(0);
                if pull_dom.load.state != BalanceState::NeedsPull {
                    sv_insert(&mut pull_node.domains, pull_dom);
                    break;
                }
                let transferred = self.try_both(
                    (&mut push_dom, push_imbal),
                    (&mut pull_dom, pull_imbal),
                    xfer,
                );
                pullers.push(pull_dom);
                if let Some(t) = transferred {
                    pushed = t;
                    push_node.load.add_load(-t);
                    pull_node.load.add_load(t);
                    break;
                }
            }
            while let Some(p) = pullers.pop() {
                sv_insert(&mut pull_node.domains, p);
            }
            pushers.push_back(push_dom);
            if pushed > 0.0 {
                break;
            }
        }
        while let Some(p) = pushers.pop_front() {
            sv_insert(&mut push_node.domains, p);
        }
        pushed
    }

    fn balance_between_nodes(&mut self, nodes: &mut Vec<NumaNode>) {
        let mut pushers: std::collections::VecDeque<NumaNode> = Default::default();
        let mut pullers: Vec<NumaNode> = Vec::new();
        while nodes.len() >= 2 {
            let mut push_node = nodes.pop().expect("two or more");
            if push_node.load.state != BalanceState::NeedsPush {
                sv_insert(nodes, push_node);
                break;
            }
            let push_cutoff = push_node.load.push_cutoff();
            let mut pushed = 0.0;
            while !nodes.is_empty() && pushed < push_cutoff {
                let mut pull_node = nodes.remove(0);
                if pull_node.load.state != BalanceState::NeedsPull {
                    sv_insert(nodes, pull_node);
                    break;
                }
                let migrated = self.transfer_between_nodes(&mut push_node, &mut pull_node);
                pullers.push(pull_node);
                if migrated > 0.0 {
                    pushed += migrated;
                }
            }
            while let Some(p) = pullers.pop() {
                sv_insert(nodes, p);
            }
            pushers.push_back(push_node);
        }
        while let Some(p) = pushers.pop_front() {
            sv_insert(nodes, p);
        }
    }

    fn balance_within_node(&mut self, node: &mut NumaNode) {
        if node.domains.len() < 2 {
            return;
        }
        let mut pushers: std::collections::VecDeque<Domain> = Default::default();
        let mut pullers: Vec<Domain> = Vec::new();
        while node.domains.len() >= 2 {
            let mut push_dom = node.domains.pop().expect("two or more");
            if node.domains.is_empty() || push_dom.load.state != BalanceState::NeedsPush {
                sv_insert(&mut node.domains, push_dom);
                break;
            }
            let mut pushed = 0.0;
            let push_cutoff = push_dom.load.push_cutoff();
            let push_imbal = push_dom.load.imbal();
            while !node.domains.is_empty() && pushed < push_cutoff {
                let mut pull_dom = node.domains.remove(0);
                if pull_dom.load.state != BalanceState::NeedsPull {
                    sv_push(&mut node.domains, pull_dom);
                    break;
                }
                let pull_imbal = pull_dom.load.imbal();
                let xfer = push_dom.load.xfer_between(&pull_dom.load);
                let transferred = self.try_both(
                    (&mut push_dom, push_imbal),
                    (&mut pull_dom, pull_imbal),
                    xfer,
                );
                if let Some(t) = transferred {
                    pushed += t;
                    sv_insert(&mut node.domains, pull_dom);
                    continue;
                }
                pullers.push(pull_dom);
            }
            while let Some(p) = pullers.pop() {
                sv_insert(&mut node.domains, p);
            }
            pushers.push_back(push_dom);
        }
        while let Some(p) = pushers.pop_front() {
            sv_insert(&mut node.domains, p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(pid: Pid, load: f64) -> LbTask {
        LbTask {
            pid,
            load,
            dom_mask: u64::MAX,
            preferred_dom_mask: 0,
        }
    }

    fn unweighted(dcycles: &[f64]) -> Ledger {
        ledger(dcycles, 8, bucket_weight(100), false)
    }

    #[test]
    fn a_nice_0_task_weighs_151_in_the_aggregator() {
        // weight_to_bucket_idx(100) = 100 · 100 / 10000 = 1; bucket 1 spans [101, 200];
        // its mid-point ceil(101 + 50) = 151.
        assert_eq!(bucket_weight(100), 151);
        assert_eq!(bucket_weight(1), 51);
    }

    #[test]
    fn weighted_loads_cap_infeasible_weights_only_at_full_load() {
        // One weight class w = 151: calculate() adjusts when w ≥ load / CPUs, i.e. when the
        // duty cycles sum to at most the CPUs; adjust_infeas_weights caps at λ = load / CPUs
        // only when λ ≥ w. 4 CPUs, duty cycles 3 and 1: λ = 604 / 4 = 151: capped at 151.
        let l = ledger(&[3.0, 1.0], 4, 151, true);
        assert_eq!(l.dom_loads, vec![453.0, 151.0]);
        assert_eq!(l.infeas_threshold, 151.0);
        // 8 CPUs, duty cycles 3 and 2: λ = 755 / 8 < 151: the class is taken out, no cap.
        let l = ledger(&[3.0, 2.0], 8, 151, true);
        assert_eq!(l.dom_loads, vec![453.0, 302.0]);
        assert_eq!(l.infeas_threshold, 10_000.0);
        // 4 CPUs, duty cycles 3 and 2: 151 < 755 / 4, no adjustment.
        let l = ledger(&[3.0, 2.0], 4, 151, true);
        assert_eq!(l.infeas_threshold, 10_000.0);
        assert_eq!(l.total_load, 755.0);
        // Unweighted: 100 · d.
        assert_eq!(unweighted(&[3.0, 2.0]).dom_loads, vec![300.0, 200.0]);
        assert_eq!(unweighted(&[3.0, 2.0]).total_load, 500.0);
    }

    #[test]
    fn a_node_level_push_moves_the_task_closest_to_half_the_smaller_imbalance() {
        // Two nodes, one domain each. Duty cycles 3.0 and 1.0: loads 300 and 100, total 400,
        // node avg 200 (threshold 0.17 · 200 = 34), domain avg 200.
        // Node 0: imbal +100 (push), node 1: imbal −100 (pull).
        // xfer = min(100, 100) · 0.5 = 50; push cutoff 100 · 0.5 = 50.
        // Domain 0's tasks: 20, 45, 70, 90, 75 (sorted 20 45 70 75 90): last ≤ 50 is 45
        // (new imbal |100−45| + |100−45| = 110), first ≥ 50 is 70 (30 + 30 = 60): 70 is
        // taken (60 ≤ 200). Pushed 70 ≥ cutoff 50: node 0 stops.
        // Then within nodes: one domain each, nothing.
        let l = unweighted(&[3.0, 1.0]);
        let mut asked = Vec::new();
        let out = load_balance(2, &[0, 1], &l, &mut |d| {
            asked.push(d);
            if d == 0 {
                vec![
                    task(1, 20.0),
                    task(2, 45.0),
                    task(3, 70.0),
                    task(4, 90.0),
                    task(5, 75.0),
                ]
            } else {
                vec![task(9, 100.0)]
            }
        });
        assert_eq!(
            out.transfers,
            vec![Transfer {
                pid: 3,
                from_dom: 0,
                to_dom: 1,
                load: 70.0
            }]
        );
        assert_eq!(asked, vec![0]);
        assert_eq!(out.tasks_read, 5);
    }

    #[test]
    fn between_nodes_the_busiest_domain_pushes_to_the_first_pulling_domain_of_the_pull_node() {
        // Nodes {dom 0, dom 1} and {dom 2, dom 3}; duty cycles 2.0, 1.6, 0.4, 0.4: loads 200,
        // 160, 40, 40; total 440, node avg 220 (17 %: 37.4), domain avg 110 (5 %: 5.5).
        // Node 0 at 360 (+140) pushes to node 1 at 80 (−140): xfer 70, cutoff 70.
        // Its busiest domain, dom 0 (+90), pushes to the pull node's first domain: dom 2 and
        // dom 3 tie at 40 and dom 3, inserted second, sits first (SortedVec::insert at
        // binary_search's answer). Node imbalances stand for the pair's: to_push = to_pull =
        // 140; around x = 70, 65 leaves 150 and 80 leaves 120: 80 goes to dom 3.
        // Pushed 80 ≥ 70: node 0 stops. Inside node 0, dom 0 (120) and dom 1 (160) both
        // push; inside node 1, dom 3 (120, +10) pushes to dom 2 (−70) with x = 5 but has no
        // recently active task of its own (its ring is empty).
        let l = unweighted(&[2.0, 1.6, 0.4, 0.4]);
        let mut asked = Vec::new();
        let out = load_balance(2, &[0, 0, 1, 1], &l, &mut |d| {
            asked.push(d);
            match d {
                0 => vec![task(1, 30.0), task(2, 65.0), task(3, 80.0)],
                _ => Vec::new(),
            }
        });
        assert_eq!(
            out.transfers,
            vec![Transfer {
                pid: 3,
                from_dom: 0,
                to_dom: 3,
                load: 80.0
            }]
        );
        assert_eq!(asked, vec![0, 3]);
    }

    #[test]
    fn a_task_that_would_not_reduce_the_imbalance_is_refused() {
        // Node imbalances ±100 as above (old imbal 200); the only task weighs 250:
        // |100 − 250| + |100 − 250| = 300 > 200: refused, nothing moves.
        let l = unweighted(&[3.0, 1.0]);
        let out = load_balance(2, &[0, 1], &l, &mut |_| vec![task(1, 250.0)]);
        assert!(out.transfers.is_empty());
        // A task of exactly 200 leaves 100 + 100 = 200, not above: taken.
        let out = load_balance(2, &[0, 1], &l, &mut |_| vec![task(1, 200.0)]);
        assert_eq!(out.transfers.len(), 1);
        // Around x = 50, 40 leaves |100 − 40| · 2 = 120 and 60 leaves 80: 60 is taken.
        let out = load_balance(2, &[0, 1], &l, &mut |_| vec![task(1, 40.0), task(2, 60.0)]);
        assert_eq!(out.transfers[0].pid, 2);
        // A task that may not run in the pull domain is not a candidate.
        let out = load_balance(2, &[0, 1], &l, &mut |_| {
            vec![LbTask {
                dom_mask: 0b01,
                ..task(1, 50.0)
            }]
        });
        assert!(out.transfers.is_empty());
    }

    #[test]
    fn within_a_node_the_push_domain_keeps_pushing_to_a_pull_domain_that_still_needs() {
        // One node, two domains with duty cycles 2.6 and 1.4: loads 260 and 140, avg 200
        // (5 % = 10). Push dom 0 (+60, cutoff 30), pull dom 1 (−60): xfer = 60 · 0.5 = 30.
        // Tasks of dom 0: 10, 12, 25, 50. Last ≤ 30: 25 (|60−25|·2 = 70), first ≥ 30: 50
        // (10 + 10 = 20): 50 taken. Dom 0 → 210 (+10: not above 10, balanced), dom 1 →
        // 190. Pushed 50 ≥ cutoff 30: stop.
        let l = unweighted(&[2.6, 1.4]);
        let out = load_balance(1, &[0, 0], &l, &mut |d| {
            assert_eq!(d, 0);
            vec![task(1, 10.0), task(2, 12.0), task(3, 25.0), task(4, 50.0)]
        });
        assert_eq!(out.transfers.len(), 1);
        assert_eq!(out.transfers[0].pid, 4);
        assert_eq!((out.transfers[0].from_dom, out.transfers[0].to_dom), (0, 1));
        // With only small tasks, the domain pushes several until its cutoff (30):
        // 25 first (x = 30: last ≤ 30 is 25, 70; no task ≥ 30), pushed 25 < 30; dom 1 at
        // 165 still needs (−35 < −10): x = min(35, 35) / 2 = 17.5 with to_push 60 (the
        // source keeps the push domain's first imbalance) and to_pull 35: last ≤ 17.5 is 12
        // (48 + 23 = 71), first ≥ 17.5 none: 12 taken (71 ≤ 95). Pushed 37 ≥ 30: stop.
        let out = load_balance(1, &[0, 0], &l, &mut |_| {
            vec![task(1, 10.0), task(2, 12.0), task(3, 25.0)]
        });
        let pids: Vec<Pid> = out.transfers.iter().map(|t| t.pid).collect();
        assert_eq!(pids, vec![3, 2]);
    }

    #[test]
    fn balanced_nodes_move_nothing() {
        // Loads 210 and 190 around 200: 10 is below the node threshold (34) and not above
        // the domain one (10): balanced at both levels, no domain's tasks read.
        let l = unweighted(&[2.1, 1.9]);
        let out = load_balance(2, &[0, 1], &l, &mut |_| vec![task(1, 10.0)]);
        assert!(out.transfers.is_empty());
        assert!(out.populated.is_empty());
    }
}
