//! The outbox's SQLite tables and the rows ↔ [`Record`] mapping. Every statement is
//! synchronous (`exec`); a command issues its writes with no `await` between them, so the
//! object's write coalescing commits them as one atomic batch (ADR 006).

use understudy_core::events::outbox::{Claim, Head, Record, State};
use understudy_core::events::stats::{Tally, BUCKETS};

pub use super::sql::{Sql, SqlStorage, V};

pub const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS events(
        event_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, aggregate TEXT NOT NULL,
        sequence INTEGER NOT NULL, event_type TEXT NOT NULL, schema_version INTEGER NOT NULL,
        occurred_at TEXT NOT NULL, correlation_id TEXT NOT NULL, state TEXT NOT NULL,
        attempts INTEGER NOT NULL, last_error_class TEXT, last_error TEXT, last_status INTEGER,
        next_attempt_at INTEGER, stored_at INTEGER NOT NULL, first_attempt_at INTEGER,
        delivered_at INTEGER, skipped INTEGER NOT NULL, replays INTEGER NOT NULL, payload BLOB,
        UNIQUE(tenant, aggregate, sequence))",
    "CREATE INDEX IF NOT EXISTS events_by_state ON events(state, stored_at)",
    "CREATE TABLE IF NOT EXISTS aggregates(
        tenant TEXT NOT NULL, aggregate TEXT NOT NULL, cursor INTEGER NOT NULL,
        PRIMARY KEY(tenant, aggregate))",
    "CREATE TABLE IF NOT EXISTS claims(
        event_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, aggregate TEXT NOT NULL,
        sequence INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tally(name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
];

/// Changes to the tables of [`SCHEMA`] (as they were first released), in order. An object
/// applies the ones it has not yet — `meta`'s `migrations` row counts those applied — each
/// with its count in one write batch, so an object that already holds rows is migrated
/// where it stands and a new one is built the same way. Append only; never edit one.
pub const MIGRATIONS: &[&str] = &[
    // The event's digest as accepted: a reused event ID with other contents is refused.
    // Rows stored before have none (NULL) and match any resend of their identity.
    "ALTER TABLE events ADD COLUMN digest TEXT",
];

/// The columns of a [`Record`], in [`Row`]'s order.
pub const COLS: &str = "event_id, tenant, aggregate, sequence, event_type, schema_version, \
    occurred_at, correlation_id, state, attempts, last_error_class, last_error, last_status, \
    next_attempt_at, stored_at, first_attempt_at, delivered_at, skipped, replays, digest";

/// A row's cells, read in the order the query names its columns. The raw cursor gives
/// plain values (no per-row struct decoding: a serde decoder per row type costs kilobytes
/// of the module each).
struct Cells(std::vec::IntoIter<V>);

impl Cells {
    fn s(&mut self) -> String {
        match self.0.next() {
            Some(V::String(s)) => s,
            Some(V::Integer(i)) => i.to_string(),
            _ => String::new(),
        }
    }
    fn os(&mut self) -> Option<String> {
        match self.0.next() {
            Some(V::String(s)) => Some(s),
            _ => None,
        }
    }
    fn oi(&mut self) -> Option<i64> {
        match self.0.next() {
            Some(V::Integer(i)) => Some(i),
            Some(V::Float(f)) => Some(f as i64),
            _ => None,
        }
    }
    fn u(&mut self) -> u64 {
        self.oi().map(u).unwrap_or(0)
    }
    fn ou(&mut self) -> Option<u64> {
        self.oi().map(u)
    }
}

/// Every row of `query`, as cells.
fn cells(sql: &SqlStorage, query: &str, bind: Vec<V>) -> Sql<Vec<Cells>> {
    Ok(sql
        .exec(query, bind)?
        .into_iter()
        .map(|row| Cells(row.into_iter()))
        .collect())
}

/// The record in a row of [`COLS`].
fn record(mut c: Cells) -> Record {
    Record {
        event_id: c.s(),
        tenant: c.s(),
        aggregate: c.s(),
        sequence: c.u(),
        event_type: c.s(),
        schema_version: u32::try_from(c.u()).unwrap_or(0),
        occurred_at: c.s(),
        correlation_id: c.s(),
        state: State::parse(&c.s()).unwrap_or(State::Pending),
        attempts: u32::try_from(c.u()).unwrap_or(u32::MAX),
        last_error_class: c.os(),
        last_error: c.os(),
        last_status: c.ou().and_then(|s| u16::try_from(s).ok()),
        next_attempt_at: c.ou(),
        stored_at: c.u(),
        first_attempt_at: c.ou(),
        delivered_at: c.ou(),
        skipped: c.u() != 0,
        replays: u32::try_from(c.u()).unwrap_or(u32::MAX),
        digest: c.os(),
    }
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn i(v: u64) -> V {
    V::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

fn oi(v: Option<u64>) -> V {
    v.map(i).unwrap_or(V::Null)
}

fn os(v: &Option<String>) -> V {
    v.as_deref().map(V::from).unwrap_or(V::Null)
}

pub fn init(sql: &SqlStorage) -> Sql<()> {
    for s in SCHEMA {
        sql.exec(s, vec![])?;
    }
    let applied = cells(
        sql,
        "SELECT value FROM meta WHERE name = 'migrations'",
        vec![],
    )?
    .into_iter()
    .next()
    .map_or(0, |mut c| c.u());
    for (n, m) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(applied).unwrap_or(usize::MAX))
    {
        sql.exec(m, vec![])?;
        sql.exec(
            "INSERT INTO meta(name, value) VALUES ('migrations', ?)
             ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            vec![i(n as u64 + 1)],
        )?;
    }
    Ok(())
}

pub fn records(sql: &SqlStorage, query: &str, bind: Vec<V>) -> Sql<Vec<Record>> {
    Ok(cells(sql, query, bind)?.into_iter().map(record).collect())
}

pub fn by_id(sql: &SqlStorage, id: &str) -> Sql<Option<Record>> {
    let q = format!("SELECT {COLS} FROM events WHERE event_id = ?");
    Ok(records(sql, &q, vec![id.into()])?.into_iter().next())
}

pub fn at_place(sql: &SqlStorage, tenant: &str, aggregate: &str, seq: u64) -> Sql<Option<Record>> {
    let q =
        format!("SELECT {COLS} FROM events WHERE tenant = ? AND aggregate = ? AND sequence = ?");
    Ok(
        records(sql, &q, vec![tenant.into(), aggregate.into(), i(seq)])?
            .into_iter()
            .next(),
    )
}

pub fn cursor(sql: &SqlStorage, tenant: &str, aggregate: &str) -> Sql<u64> {
    let rows = cells(
        sql,
        "SELECT cursor FROM aggregates WHERE tenant = ? AND aggregate = ?",
        vec![tenant.into(), aggregate.into()],
    )?;
    Ok(rows.into_iter().next().map(|mut c| c.u()).unwrap_or(0))
}

pub fn set_cursor(sql: &SqlStorage, tenant: &str, aggregate: &str, to: u64) -> Sql<()> {
    sql.exec(
        "INSERT INTO aggregates(tenant, aggregate, cursor) VALUES (?, ?, ?)
         ON CONFLICT(tenant, aggregate) DO UPDATE SET cursor = MAX(cursor, excluded.cursor)",
        vec![tenant.into(), aggregate.into(), i(to)],
    )?;
    Ok(())
}

/// Inserts a new event with its sealed payload, and its aggregate's cursor row.
pub fn insert(sql: &SqlStorage, r: &Record, sealed: Vec<u8>) -> Sql<()> {
    sql.exec(
        &format!(
            "INSERT INTO events({COLS}, payload) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
        ),
        vec![
            r.event_id.as_str().into(),
            r.tenant.as_str().into(),
            r.aggregate.as_str().into(),
            i(r.sequence),
            r.event_type.as_str().into(),
            i(u64::from(r.schema_version)),
            r.occurred_at.as_str().into(),
            r.correlation_id.as_str().into(),
            r.state.as_str().into(),
            i(u64::from(r.attempts)),
            os(&r.last_error_class),
            os(&r.last_error),
            oi(r.last_status.map(u64::from)),
            oi(r.next_attempt_at),
            i(r.stored_at),
            oi(r.first_attempt_at),
            oi(r.delivered_at),
            i(u64::from(r.skipped)),
            i(u64::from(r.replays)),
            os(&r.digest),
            V::Blob(sealed),
        ],
    )?;
    sql.exec(
        "INSERT OR IGNORE INTO aggregates(tenant, aggregate, cursor) VALUES (?, ?, 0)",
        vec![r.tenant.as_str().into(), r.aggregate.as_str().into()],
    )?;
    Ok(())
}

/// Writes a record's mutable columns back.
pub fn update(sql: &SqlStorage, r: &Record) -> Sql<()> {
    sql.exec(
        "UPDATE events SET state = ?, attempts = ?, last_error_class = ?, last_error = ?,
            last_status = ?, next_attempt_at = ?, first_attempt_at = ?, delivered_at = ?,
            skipped = ?, replays = ? WHERE event_id = ?",
        vec![
            r.state.as_str().into(),
            i(u64::from(r.attempts)),
            os(&r.last_error_class),
            os(&r.last_error),
            oi(r.last_status.map(u64::from)),
            oi(r.next_attempt_at),
            oi(r.first_attempt_at),
            oi(r.delivered_at),
            i(u64::from(r.skipped)),
            i(u64::from(r.replays)),
            r.event_id.as_str().into(),
        ],
    )?;
    Ok(())
}

/// The sealed payload of an event (`None` once erased).
pub fn payload(sql: &SqlStorage, id: &str) -> Sql<Option<Vec<u8>>> {
    let rows = sql.exec(
        "SELECT payload FROM events WHERE event_id = ?",
        vec![id.into()],
    )?;
    for row in rows {
        if let Some(V::Blob(b)) = row.into_iter().next() {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// Most aggregates one alarm run looks at.
const MAX_HEADS: u32 = 2_000;

/// Every aggregate with an undelivered event past its cursor, with its head; and the loose
/// events (replayed dead letters the aggregate already moved past).
pub fn heads(sql: &SqlStorage) -> Sql<(Vec<Head>, Vec<Record>)> {
    let open = cells(
        sql,
        &format!(
            "SELECT a.tenant, a.aggregate, a.cursor FROM aggregates a WHERE EXISTS (SELECT 1
             FROM events e WHERE e.tenant = a.tenant AND e.aggregate = a.aggregate
             AND e.sequence > a.cursor) LIMIT {MAX_HEADS}"
        ),
        vec![],
    )?;
    let mut heads = Vec::with_capacity(open.len());
    for mut h in open {
        let (tenant, aggregate, cursor) = (h.s(), h.s(), h.u());
        heads.push(head_at(sql, tenant, aggregate, cursor)?);
    }
    let loose = records(
        sql,
        &format!(
            "SELECT {} FROM events e JOIN aggregates a ON a.tenant = e.tenant AND a.aggregate = e.aggregate
             WHERE e.state = 'PENDING' AND e.sequence <= a.cursor LIMIT {MAX_HEADS}",
            COLS.split(", ").map(|c| format!("e.{c}")).collect::<Vec<_>>().join(", ")
        ),
        vec![],
    )?;
    Ok((heads, loose))
}

/// The head of `(tenant, aggregate)` at `cursor`: the event at `cursor + 1`, or the lowest
/// later one waiting.
fn head_at(sql: &SqlStorage, tenant: String, aggregate: String, cursor: u64) -> Sql<Head> {
    let next = at_place(sql, &tenant, &aggregate, cursor + 1)?;
    let waiting = if next.is_none() {
        cells(
            sql,
            "SELECT MIN(sequence), MIN(stored_at) FROM events
             WHERE tenant = ? AND aggregate = ? AND sequence > ?",
            vec![tenant.as_str().into(), aggregate.as_str().into(), i(cursor)],
        )?
        .into_iter()
        .next()
        .and_then(|mut c| Some((c.ou()?, c.ou()?)))
    } else {
        None
    };
    Ok(Head {
        tenant,
        aggregate,
        cursor,
        next,
        waiting,
    })
}

/// One aggregate's head.
pub fn head(sql: &SqlStorage, tenant: &str, aggregate: &str) -> Sql<Head> {
    let cursor = cursor(sql, tenant, aggregate)?;
    head_at(sql, tenant.to_string(), aggregate.to_string(), cursor)
}

pub fn claim(sql: &SqlStorage, id: &str) -> Sql<Option<Claim>> {
    let rows = cells(
        sql,
        "SELECT event_id, tenant, aggregate, sequence FROM claims WHERE event_id = ?",
        vec![id.into()],
    )?;
    Ok(rows.into_iter().next().map(|mut c| Claim {
        event_id: c.s(),
        tenant: c.s(),
        aggregate: c.s(),
        sequence: c.u(),
    }))
}

pub fn insert_claim(sql: &SqlStorage, c: &Claim) -> Sql<()> {
    sql.exec(
        "INSERT INTO claims(event_id, tenant, aggregate, sequence) VALUES (?, ?, ?, ?)",
        vec![
            c.event_id.as_str().into(),
            c.tenant.as_str().into(),
            c.aggregate.as_str().into(),
            i(c.sequence),
        ],
    )?;
    Ok(())
}

/// Removes exactly this claim (a claim another request holds differently stays).
pub fn delete_claim(sql: &SqlStorage, c: &Claim) -> Sql<()> {
    sql.exec(
        "DELETE FROM claims WHERE event_id = ? AND tenant = ? AND aggregate = ? AND sequence = ?",
        vec![
            c.event_id.as_str().into(),
            c.tenant.as_str().into(),
            c.aggregate.as_str().into(),
            i(c.sequence),
        ],
    )?;
    Ok(())
}

/// Adds `by` to the counter `name`.
pub fn bump(sql: &SqlStorage, name: &str, by: u64) -> Sql<()> {
    if by == 0 {
        return Ok(());
    }
    sql.exec(
        "INSERT INTO tally(name, value) VALUES (?, ?)
         ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
        vec![name.into(), i(by)],
    )?;
    Ok(())
}

/// The counters and the latency histogram (`lat_<bucket>`).
pub fn tally(sql: &SqlStorage) -> Sql<(Tally, Vec<u64>)> {
    let mut t = Tally::default();
    let mut hist = vec![0u64; BUCKETS];
    for mut c in cells(sql, "SELECT name, value FROM tally", vec![])? {
        let (name, value) = (c.s(), c.u());
        if let Some(b) = name
            .strip_prefix("lat_")
            .and_then(|b| b.parse::<usize>().ok())
        {
            if let Some(slot) = hist.get_mut(b) {
                *slot = value;
            }
        } else {
            t.set(&name, value);
        }
    }
    Ok((t, hist))
}

/// Events per state now, and when the oldest pending one was stored.
pub fn counts(sql: &SqlStorage) -> Sql<([u64; 4], Option<u64>)> {
    let mut c = [0u64; 4]; // pending, delivered, dead letters, skipped
    for mut r in cells(
        sql,
        "SELECT state, skipped, COUNT(*) FROM events GROUP BY state, skipped",
        vec![],
    )? {
        let (state, skipped, n) = (r.s(), r.u(), r.u());
        let slot = match (State::parse(&state), skipped != 0) {
            (Some(State::Pending), _) => 0,
            (Some(State::Delivered), _) => 1,
            (Some(State::DeadLetter), false) => 2,
            (Some(State::DeadLetter), true) => 3,
            (None, _) => continue,
        };
        c[slot] += n;
    }
    let oldest = cells(
        sql,
        "SELECT MIN(stored_at) FROM events WHERE state = 'PENDING'",
        vec![],
    )?
    .into_iter()
    .next()
    .and_then(|mut o| o.ou());
    Ok((c, oldest))
}

/// Erases the payloads of events delivered before `before` (at most a batch per call).
pub fn erase_delivered(sql: &SqlStorage, before: u64) -> Sql<()> {
    sql.exec(
        "UPDATE events SET payload = NULL WHERE event_id IN (SELECT event_id FROM events
         WHERE state = 'DELIVERED' AND payload IS NOT NULL AND delivered_at < ? LIMIT 500)",
        vec![i(before)],
    )?;
    Ok(())
}

pub fn list(
    sql: &SqlStorage,
    f: &understudy_core::events::protocol::Filter,
) -> Sql<(Vec<Record>, bool)> {
    let mut q = format!("SELECT {COLS} FROM events WHERE 1 = 1");
    let mut bind = Vec::new();
    if let Some(s) = f.state {
        q.push_str(" AND state = ?");
        bind.push(V::from(s.as_str()));
    }
    if let Some(t) = &f.tenant {
        q.push_str(" AND tenant = ?");
        bind.push(V::from(t.as_str()));
    }
    if let Some(a) = &f.aggregate {
        q.push_str(" AND aggregate = ?");
        bind.push(V::from(a.as_str()));
    }
    q.push_str(" ORDER BY stored_at, event_id LIMIT ? OFFSET ?");
    bind.push(i(u64::from(f.limit) + 1));
    bind.push(i(u64::from(f.offset)));
    let mut rows = records(sql, &q, bind)?;
    let more = rows.len() > f.limit as usize;
    rows.truncate(f.limit as usize);
    Ok((rows, more))
}
