//! [P-TIERS] [E-CASCADE] The kinds of fallback tier, each declared once: a module holding
//! the kind's policy settings, every fact the edge and the compiler ask of it, and what it
//! does at runtime. [`Kind`] is the list of those questions; the `tier_kinds!` table below
//! registers each kind and generates [`TierKind`] and its dispatch.
//!
//! Why a trait and a table: a tier kind used to touch ~20 files, many of them an exhaustive
//! `match` on the kind (issue 23). The cascade's walk (order, budget fit, connection limit,
//! notes), the engine's speculative reads, write-through, freshness, the compiler's rules
//! and the lab ask the kind instead, so a new kind is its module, a row here, its module and
//! row in the compiler (`compiler/src/parse/tier/`) and its keys in docs/policy.md
//! (docs/adr/010-the-engine-owns-time.md, last section).
//!
//! The kinds sit below the policy, which re-exports them: what a kind reads at runtime —
//! the request's parameters, the baked catalog, KV entries, classified answers — depends
//! on nothing that depends on the policy.

pub mod embedded;
pub mod http;
pub mod kv;

use std::ops::Deref;

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, CatalogRules};
use crate::classify::Items;
use crate::http::Outbound;
use crate::io::{Done, Op};
use crate::params::Params;
use crate::template::Template;
use crate::time::Millis;

/// The registration table: one row per kind — its variant, its word in policies (`kind =
/// "kv"`) and its settings type, which implements [`Kind`]. Generates [`TierKind`] (the
/// settings, serialised into the bake in this order), [`KindName`] (the words the compiler
/// reads and its schema lists) and the dispatch to each kind's [`Kind`].
macro_rules! tier_kinds {
    ($( $(#[$doc:meta])* $variant:ident = $word:literal, $ty:ty; )*) => {
        /// A tier's kind, with its settings. It dereferences to its [`Kind`]: ask it.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        pub enum TierKind { $( $(#[$doc])* $variant($ty), )* }

        crate::words! {
            /// The kinds' words, as a policy writes them (`kind = "kv"`).
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub enum KindName { $( $variant = $word, )* }
        }

        impl TierKind {
            /// The kind's word.
            pub const fn word(&self) -> KindName {
                match self { $( TierKind::$variant(_) => KindName::$variant, )* }
            }

            fn get(&self) -> &(dyn Kind + 'static) {
                match self { $( TierKind::$variant(k) => k, )* }
            }
        }
    };
}

tier_kinds! {
    /// A Workers KV namespace.
    Kv = "kv", kv::KvTier;
    /// The baked catalog, answered from memory.
    Embedded = "embedded", embedded::EmbeddedTier;
    /// A secondary HTTP source in its own failure domain.
    Http = "http", http::HttpTier;
}

impl TierKind {
    /// The kind's word in policies, logs and diagnostics (`kv`).
    pub const fn name(&self) -> &'static str {
        self.word().as_str()
    }
}

impl Deref for TierKind {
    type Target = dyn Kind;

    fn deref(&self) -> &(dyn Kind + 'static) {
        self.get()
    }
}

/// What the edge and the compiler ask of a tier kind. Facts first (what the budget, the
/// privacy and failure-domain rules, the Worker's bindings and write-through need), then
/// what the kind does at runtime: [`Kind::start`] when the walk reaches the tier,
/// [`Kind::finish`] with the result of the read it asked for.
pub trait Kind {
    /// The longest the tier may take, in ms (0: it answers from memory, with no I/O). It
    /// runs only when this fits what is left of the budget ([C-BUDGET], [C-SLACK]).
    fn timeout_ms(&self) -> u64;

    /// What the budget arithmetic calls that time (`KV read timeout`).
    fn timeout_label(&self) -> &'static str;

    /// It answers from memory with no I/O: a final net that needs no network
    /// ([C-LOCAL-LAST]), and where speculative reads stop (the request will not need the
    /// tiers after it).
    fn local(&self) -> bool;

    /// It answers from the baked catalog: it needs a `[catalog]`, and its answers lapse
    /// with the stubs' validation ([C-EXPIRY]).
    fn uses_catalog(&self) -> bool {
        false
    }

    /// Its answers are per user (`private`, [C-PRIVATE]), given which request parameters
    /// are identities.
    fn per_user(&self, is_identity: &dyn Fn(&str) -> bool) -> bool;

    /// The request parameters it reads, each with the key that names it ([C-PARAMS]: each
    /// must be declared).
    fn params(&self) -> Vec<Keyed<'_>>;

    /// The Workers KV namespace it reads (a binding in wrangler.toml; [C-DOMAIN]: not the
    /// origin's credential).
    fn kv_binding(&self) -> Option<Keyed<'_>> {
        None
    }

    /// The secret binding holding its credential ([C-DOMAIN]: not the origin's).
    fn secret(&self) -> Option<Keyed<'_>> {
        None
    }

    /// The URL it fetches ([C-DOMAIN]: not the origin's host; a credential goes over https).
    fn url(&self) -> Option<Keyed<'_>> {
        None
    }

    /// Where live origin answers are written back to ([E-LIVE]).
    fn write_through(&self) -> Option<WriteThrough<'_>> {
        None
    }

    /// The ceiling on the age of its answers' evidence, when it keeps entries of its own:
    /// the status endpoint reports the tier as last read ([E-VERSION]).
    fn max_age_ms(&self) -> Option<u64> {
        None
    }

    /// The KV key worth reading ahead while the origin call is out, when the model has gone
    /// silent ([E-CASCADE], `engine/race.rs`).
    fn speculative_read(&self) -> Option<KvKey<'_>> {
        None
    }

    /// The walk reached the tier at `env.now`: its answer from memory, the read it needs
    /// (`fetch` builds a request to a URL with the edge's headers and this tier's
    /// credential), or why it cannot run for this request.
    fn start<'p>(&'p self, env: &Env<'_>, fetch: &dyn Fn(&str) -> Outbound) -> Start<'p>;

    /// The read [`Kind::start`] asked for ended with `done` (a timeout is the engine's
    /// conclusion: a KV read `TimedOut`, a fetch `Observed::TimedOut`).
    fn finish(&self, env: &Env<'_>, done: Done) -> Result<Found, Miss> {
        let _ = env;
        Err(Miss::unexpected(&done))
    }
}

/// A value a tier's settings hold, with the policy key that sets it: what diagnostics
/// point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keyed<'a> {
    pub key: &'static str,
    pub value: &'a str,
}

/// A KV key a tier reads or writes: the namespace binding and the key's template.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvKey<'a> {
    pub binding: &'a str,
    pub key: &'a Template,
}

/// Live answers are written to `to`, a key rewritten at most every `refresh_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteThrough<'a> {
    pub to: KvKey<'a>,
    pub refresh_ms: u64,
}

/// What a tier reads of the request and the isolate when it runs.
#[derive(Debug, Clone, Copy)]
pub struct Env<'a> {
    pub now: Millis,
    pub params: &'a Params,
    pub catalog: Option<&'a Catalog>,
    /// The policy's `[catalog]` rules, when it has them.
    pub catalog_rules: Option<&'a CatalogRules>,
    /// The largest answer body accepted (the origin's `max_body_bytes`).
    pub max_body_bytes: u64,
}

/// What a tier does when the walk reaches it.
#[derive(Debug, Clone, PartialEq)]
pub enum Start<'p> {
    /// It answered from memory.
    Answer(Found),
    /// It needs this read, within its timeout; the result goes to [`Kind::finish`].
    Read(Op<'p>),
    /// It cannot answer this request (noted on the log line).
    Skip(Miss),
}

/// A tier's answer: its items, their age, and whether they are baked stubs past their
/// validation ceiling (`on_expired = "disclose"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub items: Items,
    pub age_ms: u64,
    pub catalog_expired: bool,
}

impl Found {
    /// Items with no age of their own (fetched now) and nothing expired.
    pub fn fresh(items: Items) -> Found {
        Found {
            items,
            age_ms: 0,
            catalog_expired: false,
        }
    }
}

/// Why a tier did not answer: the code and detail of its note on the log line, and what
/// the read found (the log line's `tiers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Miss {
    pub code: &'static str,
    pub detail: String,
    pub read: Read,
    /// The entry's age, when it was there but too old ([`Read::Stale`]).
    pub age_ms: Option<u64>,
}

crate::words! {
    /// What a tier consulted found, as the log line's `tiers` says it.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Read {
        /// It answered.
        Hit = "hit",
        /// Nothing usable: no entry, an unvalidated or malformed one, no match.
        Miss = "miss",
        /// An entry older than the tier's ceiling (or dated in the future).
        Stale = "stale",
        /// No answer within the tier's timeout: slower than that, by how much nobody saw.
        TimedOut = "timeout",
        /// The read failed (a KV error, an HTTP tier's failure).
        Error = "error",
    }
}

/// One tier the walk consulted: when its read started and ended, what it found, and the
/// age of the entry it found (a hit's, or a stale one's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consult {
    pub tier: String,
    pub started: Millis,
    pub ended: Millis,
    pub read: Read,
    pub age_ms: Option<u64>,
}

impl Miss {
    pub fn new(code: &'static str, detail: impl Into<String>) -> Miss {
        Miss {
            code,
            detail: detail.into(),
            read: Read::Miss,
            age_ms: None,
        }
    }

    /// The miss, found as `read` (with the entry's age when it was stale).
    pub fn found(mut self, read: Read, age_ms: Option<u64>) -> Miss {
        self.read = read;
        self.age_ms = age_ms;
        self
    }

    /// A result of a kind of read the tier never asks for.
    pub fn unexpected(done: &Done) -> Miss {
        let what = match done {
            Done::Limited(_) => "a rate limiter's verdict",
            Done::Fetched(_) => "a fetch",
            Done::Kv(_) => "a KV read",
        };
        Miss::new(
            "TIER_UNEXPECTED",
            format!("{what} the tier did not ask for"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_word_and_the_bake_keeps_the_table_order() {
        let words: Vec<&str> = KindName::ALL.iter().map(|(w, _)| *w).collect();
        assert!(words.starts_with(&["kv", "embedded", "http"]), "{words:?}");
        let http = TierKind::Http(http::HttpTier {
            url: "https://m.example/".into(),
            timeout_ms: 5,
            credential_secret: None,
            result_path: vec!["items".into()],
        });
        assert_eq!(
            (http.name(), http.timeout_ms(), http.local()),
            ("http", 5, false)
        );
        // postcard writes the variant's index first: the table's order is the bake's.
        assert_eq!(postcard::to_allocvec(&http).unwrap()[0], 2);
    }
}
