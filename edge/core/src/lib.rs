//! Understudy's core: the policy model both the compiler and the Worker use, the baked
//! artifact format, and the sans-IO decision core of the edge.
//!
//! Nothing in this crate performs I/O or reads a clock: time is an input ([`Millis`]),
//! outcomes are inputs, and functions return what to do next. That keeps every decision
//! testable natively in virtual time, and lets `understudy simulate` replay the very code
//! the Worker runs.
#![forbid(unsafe_code)]

pub mod admin;
pub mod bake;
pub mod breaker;
pub mod cascade;
pub mod catalog;
pub mod classify;
pub mod correlation;
pub mod deadline;
pub mod disclosure;
pub mod engine;
pub mod entry;
pub mod events;
pub mod http;
pub mod io;
pub mod metrics;
pub mod params;
pub mod parked;
pub mod policy;
pub mod request;
pub mod retry;
pub mod sort;
pub mod staleness;
pub mod storm;
pub mod template;
pub mod tier;
pub mod time;
pub mod token;
pub mod wire;
pub mod words;
pub mod writethrough;

#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;

pub use time::Millis;
