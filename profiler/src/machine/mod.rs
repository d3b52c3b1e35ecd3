//! The machine around a run, as hookprof sees it: its clocks, how busy the rest of it was, the
//! pid namespace hookprof runs in, and the other BPF programs attached where hookprof measures.
pub mod beside;
pub mod clock;
pub mod load;
pub mod namespaces;
pub mod other_probes;
