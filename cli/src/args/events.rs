//! `understudy events …`: the operators' view of an edge's outbox.

use super::Format;

#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    #[command(subcommand)]
    pub command: EventsCommand,
    /// The edge, `http://HOST:PORT` (`understudy dev` prints it).
    #[arg(long, global = true, default_value = "http://127.0.0.1:8787")]
    pub edge: String,
    /// The admin bearer token (the `[admin].secret` binding's value); default
    /// `$UNDERSTUDY_ADMIN_TOKEN`.
    #[arg(long, global = true)]
    pub token: Option<String>,
    #[arg(long, global = true, value_enum, default_value = "human")]
    pub format: Format,
}

#[derive(Debug, clap::Subcommand)]
pub enum EventsCommand {
    /// List events, oldest first, across every shard.
    List {
        /// Only events in this state: PENDING, DELIVERED or DEAD_LETTER.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long)]
        aggregate: Option<String>,
        /// At most this many per shard.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// One event with its state, attempts, last error and payload (redacted fields masked).
    Inspect { event_id: String },
    /// Replay a dead letter with its original event ID (refused while the policy's replay
    /// switch is off).
    Replay { event_id: String },
    /// Move a held aggregate past its dead letter or its missing sequence.
    Skip {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        aggregate: String,
    },
}
