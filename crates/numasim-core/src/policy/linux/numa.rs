//! Where automatic NUMA balancing (issue 17 §3) plugs into `linux`: the balancer asks
//! `migrate_degrades_locality` before `task_hot` (`can_migrate_task`), and fork placement asks
//! for the task's preferred node (`sched_balance_find_dst_group`). Without NUMA balancing no task
//! has NUMA faults, and the kernel answers −1 ("no opinion") and `NUMA_NO_NODE`: so do these.

use super::Linux;
use crate::interface::{Pid, View};
use crate::machine::CpuId;

impl Linux {
    /// NUMA balancing's verdict on moving `pid` from `src` to `dst` at `level`
    /// (`migrate_degrades_locality`): 1 degrades, 0 improves, −1 no opinion (then `task_hot`
    /// decides). Without NUMA balancing (issue 17 §3) a task has no faults: −1.
    pub fn migrate_degrades_locality(
        &self,
        _v: &View<'_>,
        _pid: Pid,
        _src: CpuId,
        _dst: CpuId,
        _level: usize,
    ) -> i32 {
        -1
    }

    /// `p->numa_preferred_nid`: none without NUMA balancing.
    pub fn preferred_node(&self, _v: &View<'_>, _pid: Pid) -> Option<usize> {
        None
    }
}
