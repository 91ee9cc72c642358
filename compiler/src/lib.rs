//! The Understudy policy compiler as a library: parse and validate a policy with its catalog
//! and inventory, bake and build the Worker directory, keep the release registry, and replay
//! the edge's engine over a scenario (`simulate`) or over the edge's own logs (`replay`). The `understudy` binary (`cli/`) is a thin
//! shell over it; the laboratory (simulated origin, drills, bench) lives in `lab/`.
#![forbid(unsafe_code)]

pub mod codes;
pub mod diag;
pub mod dist;
pub mod files;
pub mod fixtures;
pub mod load;
pub mod parse;
pub mod publish;
pub mod release;
pub mod render;
pub mod replay;
pub mod simulate;
pub mod slo;
pub mod timing;
pub mod validate;
