//! [V-*] The laboratory's side of durable events: a client for the edge's event endpoints
//! ([`client`]), and the events drill ([`drill`]) — producers ([`produce`]) against the edge
//! in a killable process group ([`edge`]), following an events scenario ([`scenario`]).
pub mod client;
pub mod drill;
pub mod edge;
pub mod produce;
pub mod scenario;
