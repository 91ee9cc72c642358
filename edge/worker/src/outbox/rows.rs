//! The outbox's SQLite tables and the rows ↔ [`Record`] mapping. Every statement is
//! synchronous (`exec`); a command issues its writes with no `await` between them, so the
//! object's write coalescing commits them as one atomic batch (ADR 006).

use serde::Deserialize;
use understudy_core::events::outbox::{Claim, Head, Record, State};
use understudy_core::events::stats::{Tally, BUCKETS};
use worker::{SqlStorage, SqlStorageValue as V};

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
];

/// The columns of a [`Record`], in [`Row`]'s order.
pub const COLS: &str = "event_id, tenant, aggregate, sequence, event_type, schema_version, \
    occurred_at, correlation_id, state, attempts, last_error_class, last_error, last_status, \
    next_attempt_at, stored_at, first_attempt_at, delivered_at, skipped, replays";

pub type Sql<T> = Result<T, String>;

fn err(e: worker::Error) -> String {
    e.to_string()
}

#[derive(Deserialize)]
struct Row {
    event_id: String,
    tenant: String,
    aggregate: String,
    sequence: i64,
    event_type: String,
    schema_version: i64,
    occurred_at: String,
    correlation_id: String,
    state: String,
    attempts: i64,
    last_error_class: Option<String>,
    last_error: Option<String>,
    last_status: Option<i64>,
    next_attempt_at: Option<i64>,
    stored_at: i64,
    first_attempt_at: Option<i64>,
    delivered_at: Option<i64>,
    skipped: i64,
    replays: i64,
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Row {
    fn record(self) -> Record {
        Record {
            event_id: self.event_id,
            tenant: self.tenant,
            aggregate: self.aggregate,
            sequence: u(self.sequence),
            event_type: self.event_type,
            schema_version: u32::try_from(self.schema_version).unwrap_or(0),
            occurred_at: self.occurred_at,
            correlation_id: self.correlation_id,
            state: State::parse(&self.state).unwrap_or(State::Pending),
            attempts: u32::try_from(self.attempts).unwrap_or(u32::MAX),
            last_error_class: self.last_error_class,
            last_error: self.last_error,
            last_status: self.last_status.and_then(|s| u16::try_from(s).ok()),
            next_attempt_at: self.next_attempt_at.map(u),
            stored_at: u(self.stored_at),
            first_attempt_at: self.first_attempt_at.map(u),
            delivered_at: self.delivered_at.map(u),
            skipped: self.skipped != 0,
            replays: u32::try_from(self.replays).unwrap_or(u32::MAX),
        }
    }
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
        sql.exec(s, None).map_err(err)?;
    }
    Ok(())
}

pub fn records(sql: &SqlStorage, query: &str, bind: Vec<V>) -> Sql<Vec<Record>> {
    let rows: Vec<Row> = sql
        .exec(query, bind)
        .map_err(err)?
        .to_array()
        .map_err(err)?;
    Ok(rows.into_iter().map(Row::record).collect())
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

#[derive(Deserialize)]
struct Cursor {
    cursor: i64,
}

pub fn cursor(sql: &SqlStorage, tenant: &str, aggregate: &str) -> Sql<u64> {
    let rows: Vec<Cursor> = sql
        .exec(
            "SELECT cursor FROM aggregates WHERE tenant = ? AND aggregate = ?",
            vec![tenant.into(), aggregate.into()],
        )
        .map_err(err)?
        .to_array()
        .map_err(err)?;
    Ok(rows.first().map(|c| u(c.cursor)).unwrap_or(0))
}

pub fn set_cursor(sql: &SqlStorage, tenant: &str, aggregate: &str, to: u64) -> Sql<()> {
    sql.exec(
        "INSERT INTO aggregates(tenant, aggregate, cursor) VALUES (?, ?, ?)
         ON CONFLICT(tenant, aggregate) DO UPDATE SET cursor = MAX(cursor, excluded.cursor)",
        vec![tenant.into(), aggregate.into(), i(to)],
    )
    .map_err(err)?;
    Ok(())
}

/// Inserts a new event with its sealed payload, and its aggregate's cursor row.
pub fn insert(sql: &SqlStorage, r: &Record, sealed: Vec<u8>) -> Sql<()> {
    sql.exec(
        &format!(
            "INSERT INTO events({COLS}, payload) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
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
            V::Blob(sealed),
        ],
    )
    .map_err(err)?;
    sql.exec(
        "INSERT OR IGNORE INTO aggregates(tenant, aggregate, cursor) VALUES (?, ?, 0)",
        vec![r.tenant.as_str().into(), r.aggregate.as_str().into()],
    )
    .map_err(err)?;
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
    )
    .map_err(err)?;
    Ok(())
}

/// The sealed payload of an event (`None` once erased).
pub fn payload(sql: &SqlStorage, id: &str) -> Sql<Option<Vec<u8>>> {
    let cursor = sql
        .exec(
            "SELECT payload FROM events WHERE event_id = ?",
            vec![id.into()],
        )
        .map_err(err)?;
    for row in cursor.raw() {
        let row = row.map_err(err)?;
        if let Some(V::Blob(b)) = row.into_iter().next() {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

#[derive(Deserialize)]
struct HeadRow {
    h_tenant: String,
    h_aggregate: String,
    h_cursor: i64,
}

#[derive(Deserialize)]
struct Waiting {
    sequence: Option<i64>,
    stored_at: Option<i64>,
}

/// Most aggregates one alarm run looks at.
const MAX_HEADS: u32 = 2_000;

/// Every aggregate with an undelivered event past its cursor, with its head; and the loose
/// events (replayed dead letters the aggregate already moved past).
pub fn heads(sql: &SqlStorage) -> Sql<(Vec<Head>, Vec<Record>)> {
    let open: Vec<HeadRow> = sql
        .exec(
            &format!(
                "SELECT a.tenant AS h_tenant, a.aggregate AS h_aggregate, a.cursor AS h_cursor
                 FROM aggregates a WHERE EXISTS (SELECT 1 FROM events e WHERE e.tenant = a.tenant
                 AND e.aggregate = a.aggregate AND e.sequence > a.cursor) LIMIT {MAX_HEADS}"
            ),
            None,
        )
        .map_err(err)?
        .to_array()
        .map_err(err)?;
    let mut heads = Vec::with_capacity(open.len());
    for h in open {
        let cursor = u(h.h_cursor);
        let next = at_place(sql, &h.h_tenant, &h.h_aggregate, cursor + 1)?;
        let waiting = if next.is_none() {
            let w: Vec<Waiting> = sql
                .exec(
                    "SELECT MIN(sequence) AS sequence, MIN(stored_at) AS stored_at FROM events
                     WHERE tenant = ? AND aggregate = ? AND sequence > ?",
                    vec![
                        h.h_tenant.as_str().into(),
                        h.h_aggregate.as_str().into(),
                        i(cursor),
                    ],
                )
                .map_err(err)?
                .to_array()
                .map_err(err)?;
            w.first()
                .and_then(|w| Some((u(w.sequence?), u(w.stored_at?))))
        } else {
            None
        };
        heads.push(Head {
            tenant: h.h_tenant,
            aggregate: h.h_aggregate,
            cursor,
            next,
            waiting,
        });
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

/// One aggregate's head.
pub fn head(sql: &SqlStorage, tenant: &str, aggregate: &str) -> Sql<Head> {
    let cursor = cursor(sql, tenant, aggregate)?;
    let next = at_place(sql, tenant, aggregate, cursor + 1)?;
    let waiting = if next.is_none() {
        let w: Vec<Waiting> = sql
            .exec(
                "SELECT MIN(sequence) AS sequence, MIN(stored_at) AS stored_at FROM events
                 WHERE tenant = ? AND aggregate = ? AND sequence > ?",
                vec![tenant.into(), aggregate.into(), i(cursor)],
            )
            .map_err(err)?
            .to_array()
            .map_err(err)?;
        w.first()
            .and_then(|w| Some((u(w.sequence?), u(w.stored_at?))))
    } else {
        None
    };
    Ok(Head {
        tenant: tenant.to_string(),
        aggregate: aggregate.to_string(),
        cursor,
        next,
        waiting,
    })
}

#[derive(Deserialize)]
struct ClaimRow {
    event_id: String,
    tenant: String,
    aggregate: String,
    sequence: i64,
}

pub fn claim(sql: &SqlStorage, id: &str) -> Sql<Option<Claim>> {
    let rows: Vec<ClaimRow> = sql
        .exec(
            "SELECT event_id, tenant, aggregate, sequence FROM claims WHERE event_id = ?",
            vec![id.into()],
        )
        .map_err(err)?
        .to_array()
        .map_err(err)?;
    Ok(rows.into_iter().next().map(|r| Claim {
        event_id: r.event_id,
        tenant: r.tenant,
        aggregate: r.aggregate,
        sequence: u(r.sequence),
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
    )
    .map_err(err)?;
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
    )
    .map_err(err)?;
    Ok(())
}

#[derive(Deserialize)]
struct Named {
    name: String,
    value: i64,
}

/// The counters and the latency histogram (`lat_<bucket>`).
pub fn tally(sql: &SqlStorage) -> Sql<(Tally, Vec<u64>)> {
    let rows: Vec<Named> = sql
        .exec("SELECT name, value FROM tally", None)
        .map_err(err)?
        .to_array()
        .map_err(err)?;
    let mut t = Tally::default();
    let mut hist = vec![0u64; BUCKETS];
    for r in rows {
        if let Some(b) = r
            .name
            .strip_prefix("lat_")
            .and_then(|b| b.parse::<usize>().ok())
        {
            if let Some(slot) = hist.get_mut(b) {
                *slot = u(r.value);
            }
        } else {
            t.set(&r.name, u(r.value));
        }
    }
    Ok((t, hist))
}

#[derive(Deserialize)]
struct Count {
    state: String,
    skipped: i64,
    n: i64,
}

#[derive(Deserialize)]
struct Oldest {
    t: Option<i64>,
}

/// Events per state now, and when the oldest pending one was stored.
pub fn counts(sql: &SqlStorage) -> Sql<([u64; 4], Option<u64>)> {
    let rows: Vec<Count> = sql
        .exec(
            "SELECT state, skipped, COUNT(*) AS n FROM events GROUP BY state, skipped",
            None,
        )
        .map_err(err)?
        .to_array()
        .map_err(err)?;
    let mut c = [0u64; 4]; // pending, delivered, dead letters, skipped
    for r in rows {
        let slot = match (State::parse(&r.state), r.skipped != 0) {
            (Some(State::Pending), _) => 0,
            (Some(State::Delivered), _) => 1,
            (Some(State::DeadLetter), false) => 2,
            (Some(State::DeadLetter), true) => 3,
            (None, _) => continue,
        };
        c[slot] += u(r.n);
    }
    let oldest: Vec<Oldest> = sql
        .exec(
            "SELECT MIN(stored_at) AS t FROM events WHERE state = 'PENDING'",
            None,
        )
        .map_err(err)?
        .to_array()
        .map_err(err)?;
    Ok((c, oldest.first().and_then(|o| o.t).map(u)))
}

/// Erases the payloads of events delivered before `before` (at most a batch per call).
pub fn erase_delivered(sql: &SqlStorage, before: u64) -> Sql<()> {
    sql.exec(
        "UPDATE events SET payload = NULL WHERE event_id IN (SELECT event_id FROM events
         WHERE state = 'DELIVERED' AND payload IS NOT NULL AND delivered_at < ? LIMIT 500)",
        vec![i(before)],
    )
    .map_err(err)?;
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
