//! Understudy's laboratory, kept beside the product as ripgrep keeps its `grep-*` crates:
//! the simulated model origin (`origin`), drills that play a scenario against the real edge
//! in workerd (`drill`), the bench that measures the edge against a bare Worker
//! (`bench`), and the witness of the host they run beside (`witness`). Nothing here ships in the Worker.
#![forbid(unsafe_code)]

pub mod bench;
pub mod drill;
pub mod events;
pub mod origin;
pub mod rollout;
pub mod sample;
pub mod witness;
