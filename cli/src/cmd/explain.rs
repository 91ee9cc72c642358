//! `understudy explain CODE`: the page of one diagnostic code.

use crate::exit::Exit;
use std::process::ExitCode;

use crate::args::ExplainArgs;
use understudy_compiler::codes::Code;

/// One code's page as Markdown (also the source of docs/diagnostics.md).
pub fn page(d: Code) -> String {
    format!(
        "## {}\n\n*{}* — rule `{}`\n\n{}\n",
        d,
        d.title(),
        d.rule(),
        d.page()
            .replace("\n", " ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// All pages: the content of docs/diagnostics.md.
pub fn all_pages() -> String {
    let mut out = String::from(
        "# Diagnostics\n\nEvery problem `understudy check` reports has a stable code. `understudy explain CODE` prints the\npage below. This file is generated: `understudy explain --all > docs/diagnostics.md`.\n\n",
    );
    for d in Code::ALL {
        out.push_str(&page(*d));
        out.push('\n');
    }
    out
}

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    if args.code == "--all" || args.all {
        print!("{}", all_pages());
        return Ok(Exit::Ok.into());
    }
    match Code::find(&args.code) {
        Some(d) => {
            print!("{}", page(d));
            Ok(Exit::Ok.into())
        }
        None => {
            eprintln!(
                "error: `{}` is not a diagnostic code; known codes:",
                args.code
            );
            for d in Code::ALL {
                eprintln!("  {:40} {}", d.as_str(), d.title());
            }
            Ok(Exit::UsageOrIo.into())
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn docs_diagnostics_md_is_generated_from_the_codes() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/diagnostics.md"
        ))
        .expect("docs/diagnostics.md");
        assert_eq!(
            doc,
            super::all_pages(),
            "regenerate with `understudy explain --all > docs/diagnostics.md`"
        );
    }
}
