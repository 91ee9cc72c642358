//! [R-GRADUAL] Rollouts in the lab: the local front's driver ([`front`]), and
//! `understudy drill --rollout OLD NEW` ([`drill`]) — both releases as real Workers in one
//! workerd behind the front, steady traffic through it, and `understudy releases rollout`
//! driving the steps.

mod assess;
pub mod drill;
pub mod front;
mod judged;
mod load;
pub mod plot;
