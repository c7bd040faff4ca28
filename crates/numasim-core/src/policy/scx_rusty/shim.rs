//! Stand-ins for the engine's shared dispatch queues until they land (removed then).
#![allow(dead_code)]
use crate::interface::{Pid, View};
use crate::machine::CpuId;

pub enum EnqueueKind {
    New,
    Wakeup,
    SliceEnd,
}

pub enum Enqueue {
    Local {
        slice_ns: Option<u64>,
    },
    Shared {
        queue: usize,
        key: u64,
        slice_ns: Option<u64>,
        kick: Option<CpuId>,
    },
}

pub trait SharedView {
    fn shared_len(&self, queue: usize) -> usize;
    fn shared_tasks(&self, queue: usize) -> std::vec::IntoIter<Pid>;
}

impl SharedView for View<'_> {
    fn shared_len(&self, _queue: usize) -> usize {
        0
    }
    fn shared_tasks(&self, _queue: usize) -> std::vec::IntoIter<Pid> {
        Vec::new().into_iter()
    }
}
