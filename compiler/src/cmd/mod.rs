//! One module per subcommand.
pub mod build;
pub mod check;
pub mod dev;
pub mod explain;
pub mod origin;
pub mod schema;
