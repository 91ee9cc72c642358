//! `understudy events list|inspect|replay|skip` [V-OPS]: the operators' view of a running
//! edge's events outbox, through its `/__understudy/events` endpoints with the admin bearer
//! token (`--token`, or the `UNDERSTUDY_ADMIN_TOKEN` environment variable).
//!
//! Exit 0 when the edge did it; 1 when the edge refused (replay switched off, not a dead
//! letter, nothing to skip, unknown event); 2 on usage or I/O errors (edge unreachable,
//! bad token).

use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;
use understudy_lab::events::client::{self, Answer, Edge};

use crate::args::{EventsArgs, EventsCommand, Format};
use crate::exit::Exit;

const TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(args: EventsArgs) -> anyhow::Result<ExitCode> {
    let token = args
        .token
        .clone()
        .or_else(|| std::env::var("UNDERSTUDY_ADMIN_TOKEN").ok())
        .filter(|t| !t.is_empty());
    if token.is_none() {
        eprintln!("error: no admin token: pass --token or set UNDERSTUDY_ADMIN_TOKEN (the [admin].secret binding's value; `understudy dev` uses dev-admin-token for ADMIN_TOKEN)");
        return Ok(Exit::UsageOrIo.into());
    }
    let edge = Edge::parse(&args.edge, token)?;
    let answer = client::block_on(async {
        match &args.command {
            EventsCommand::List {
                state,
                tenant,
                aggregate,
                limit,
            } => {
                let mut q = vec![format!("limit={limit}")];
                for (k, v) in [
                    ("state", state),
                    ("tenant", tenant),
                    ("aggregate", aggregate),
                ] {
                    if let Some(v) = v {
                        q.push(format!("{k}={}", client::encode(v)));
                    }
                }
                edge.list(&q.join("&"), TIMEOUT).await
            }
            EventsCommand::Inspect { event_id } => edge.inspect(event_id, TIMEOUT).await,
            EventsCommand::Replay { event_id } => edge.replay(event_id, TIMEOUT).await,
            EventsCommand::Skip { tenant, aggregate } => {
                edge.skip(tenant, aggregate, TIMEOUT).await
            }
        }
    })?;
    if args.format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&answer.body)?);
    } else if (200..300).contains(&answer.status) {
        print_human(&args.command, &answer);
    }
    match answer.status {
        200..=299 => Ok(Exit::Ok.into()),
        401 => {
            eprintln!("error: the edge refused the admin token (401)");
            Ok(Exit::UsageOrIo.into())
        }
        s => {
            let code = answer.body["code"].as_str().unwrap_or("");
            let message = answer.body["message"].as_str().unwrap_or(&answer.text);
            eprintln!("error: the edge answered {s} {code}: {message}");
            Ok(if s >= 500 {
                Exit::UsageOrIo
            } else {
                Exit::Refused
            }
            .into())
        }
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn print_human(cmd: &EventsCommand, a: &Answer) {
    match cmd {
        EventsCommand::List { .. } => {
            let events = a.body["events"].as_array().cloned().unwrap_or_default();
            println!(
                "{:<28} {:<11} {:>3} {:<32} {:>6}  LAST ERROR",
                "EVENT", "STATE", "TRY", "TENANT/AGGREGATE", "SEQ"
            );
            for e in &events {
                let state = if e["skipped"] == Value::Bool(true) {
                    "SKIPPED".to_string()
                } else {
                    s(&e["state"])
                };
                println!(
                    "{:<28} {:<11} {:>3} {:<32} {:>6}  {}",
                    s(&e["event_id"]),
                    state,
                    s(&e["attempts"]),
                    format!("{}/{}", s(&e["tenant"]), s(&e["aggregate"])),
                    s(&e["sequence"]),
                    s(&e["last_error"])
                );
            }
            println!(
                "{} event(s){}",
                events.len(),
                if a.body["more"] == Value::Bool(true) {
                    " (more: raise --limit or filter)"
                } else {
                    ""
                }
            );
        }
        _ => println!(
            "{}",
            serde_json::to_string_pretty(&a.body).unwrap_or_else(|_| a.text.clone())
        ),
    }
}
