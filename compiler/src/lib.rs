//! The Understudy compiler as a library: the CLI in `main.rs` is a thin shell over it.
#![forbid(unsafe_code)]

pub mod cli;
pub mod codes;
pub mod cmd;
pub mod diag;
pub mod load;
pub mod parse;
pub mod render;
pub mod validate;
