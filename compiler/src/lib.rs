//! The Understudy compiler as a library: the CLI in `main.rs` is a thin shell over it.
#![forbid(unsafe_code)]

pub mod bench;
pub mod cli;
pub mod cmd;
pub mod codes;
pub mod diag;
pub mod dist;
pub mod drill;
pub mod load;
pub mod origin;
pub mod parse;
pub mod release;
pub mod render;
pub mod simulate;
pub mod validate;
