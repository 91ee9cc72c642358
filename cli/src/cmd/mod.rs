//! One module per subcommand.
pub mod bake;
pub mod bench;
pub mod build;
pub mod check;
pub mod dev;
pub mod drill;
pub mod events;
pub mod explain;
pub mod listing;
pub mod origin;
pub mod publish;
pub mod releases;
pub mod replay;
pub mod rollouts;
pub mod schema;
pub mod simulate;
pub mod token;

use std::io::IsTerminal as _;
use std::sync::OnceLock;

use understudy_compiler::diag::Diagnostic;
use understudy_compiler::render::{self, Color, Sources};
use understudy_core::Millis;

use crate::args::ColorChoice;

static COLOR: OnceLock<ColorChoice> = OnceLock::new();

pub use crate::out::stdout;

/// Records `--color` for the whole run (set once, by `main`).
pub fn set_color(choice: ColorChoice) {
    let _ = COLOR.set(choice);
}

/// Where diagnostics go.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Whether to colour what is written to `stream`: `--color always|never`, or on a terminal
/// unless `NO_COLOR` is set to something (https://no-color.org).
pub fn color_for(stream: Stream) -> Color {
    match COLOR.get().copied().unwrap_or(ColorChoice::Auto) {
        ColorChoice::Always => Color::Always,
        ColorChoice::Never => Color::Never,
        ColorChoice::Auto => {
            let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
            let tty = match stream {
                Stream::Stdout => std::io::stdout().is_terminal(),
                Stream::Stderr => std::io::stderr().is_terminal(),
            };
            if tty && !no_color {
                Color::Always
            } else {
                Color::Never
            }
        }
    }
}

/// Renders diagnostics as `check` and `build` show them.
pub fn render_all<'a>(
    sources: &Sources,
    diags: impl IntoIterator<Item = &'a Diagnostic>,
    stream: Stream,
) -> String {
    let color = color_for(stream);
    diags
        .into_iter()
        .map(|d| render::human_with(sources, d, color))
        .collect()
}

/// The system clock, in ms since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `--now` as milliseconds since the epoch; the system clock when absent.
pub fn parse_now(now: Option<&str>) -> anyhow::Result<Millis> {
    match now {
        Some(s) => {
            let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                .map_err(|e| anyhow::anyhow!("--now `{s}` is not an RFC 3339 time ({e}); write e.g. 2026-11-30T12:00:00Z"))?;
            let ms = t.unix_timestamp_nanos() / 1_000_000;
            Ok(Millis(u64::try_from(ms).map_err(|_| {
                anyhow::anyhow!("--now `{s}` is before 1970")
            })?))
        }
        None => {
            let ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis();
            Ok(Millis(ms as u64))
        }
    }
}
