//! The module size budget, and how every size on the command line is read.
//!
//! The platform's limit is the *uncompressed* size of the Worker: 64 MiB on every plan, as
//! Cloudflare's Workers limits page gives it ([`PLATFORM_SOURCE`]) since September 2026,
//! when the compressed caps (3 MiB free, 10 MiB paid, gzipped) went. So `--size-limit`
//! checks the raw module, defaults to the platform's figure and refuses a limit above it
//! (a bigger module would not deploy whatever the flag says). A smaller module still
//! starts faster in a cold isolate: `--gzip-limit` is an opt-in budget on the gzipped size
//! for that, off by default.
//!
//! Sizes read one way everywhere ([`parse_size`]): bytes (`3145728`, `512B`) or a number,
//! fractions allowed, with a binary unit (`512KiB`, `1.5MiB`, `1GiB`).

use std::path::Path;

use crate::diag::{Diagnostic, Severity};
use crate::dist::manifest::Module;

/// The diagnostic code for a module over the size limit.
pub use crate::codes::MODULE_TOO_LARGE;

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;
/// The largest Worker the platform deploys: 64 MiB uncompressed, on every plan.
pub const PLATFORM_LIMIT: u64 = 64 * MIB;
/// Where [`PLATFORM_LIMIT`] comes from, as the messages and docs cite it.
pub const PLATFORM_SOURCE: &str =
    "Cloudflare's Workers limits page (developers.cloudflare.com/workers/platform/limits), \
     as of September 2026: 64 MiB uncompressed on every plan";

/// Parses a size: bytes (`1234`, `1234B`), or a number with `KiB`, `MiB` or `GiB`
/// (`512KiB`, `1.5MiB`; units in any case). The result must be a whole number of bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let example = "write bytes (3145728) or a number with KiB, MiB or GiB (512KiB, 1.5MiB)";
    if num.is_empty() {
        return Err(format!("`{s}` is not a size; {example}"));
    }
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => KIB,
        "mib" => MIB,
        "gib" => GIB,
        "k" | "kb" | "m" | "mb" | "g" | "gb" => {
            return Err(format!(
                "`{s}`: `{unit}` is ambiguous (1000 or 1024?); write KiB, MiB or GiB (1024-based)"
            ))
        }
        _ => return Err(format!("`{s}`: unknown unit `{unit}`; {example}")),
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) if !(f.contains('.') || i.is_empty() && f.is_empty()) => (i, f),
        Some(_) => return Err(format!("`{s}` is not a number; {example}")),
        None => (num, ""),
    };
    let too_large = || format!("`{s}` is too large");
    let int: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| too_large())?
    };
    let mut bytes = int.checked_mul(mult).ok_or_else(too_large)?;
    if !frac.is_empty() {
        if frac.len() > 9 {
            return Err(format!("`{s}`: at most 9 digits after the point"));
        }
        let scale = 10u128.pow(frac.len() as u32);
        let f: u128 = frac.parse().map_err(|_| format!("`{s}` is not a number"))?;
        let part = f * u128::from(mult);
        if !part.is_multiple_of(scale) {
            return Err(format!(
                "`{s}` is not a whole number of bytes ({} and a fraction)",
                u128::from(bytes) + part / scale
            ));
        }
        bytes = bytes
            .checked_add(u64::try_from(part / scale).map_err(|_| too_large())?)
            .ok_or_else(too_large)?;
    }
    Ok(bytes)
}

/// `--size-limit`: a size above zero and at most the platform's limit.
pub fn parse_module_limit(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if ["free", "paid"].contains(&t.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "`{t}`: the per-plan compressed caps are gone ({PLATFORM_SOURCE}); the default \
             is that limit, or give a smaller size"
        ));
    }
    let n = parse_size(t)?;
    if n == 0 {
        return Err("a size limit of 0 refuses every module; give a size, e.g. 10MiB".into());
    }
    if n > PLATFORM_LIMIT {
        return Err(format!(
            "`{t}` ({}) is above the platform's limit of {} ({PLATFORM_SOURCE}): a larger \
             module would not deploy; give at most 64MiB",
            human(n),
            human(PLATFORM_LIMIT)
        ));
    }
    Ok(n)
}

/// `--gzip-limit`: any size above zero.
pub fn parse_gzip_limit(s: &str) -> Result<u64, String> {
    match parse_size(s)? {
        0 => Err("a gzip limit of 0 refuses every module; give a size, e.g. 5MiB".into()),
        n => Ok(n),
    }
}

/// What a module may weigh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Uncompressed bytes (at most [`PLATFORM_LIMIT`]).
    pub raw: u64,
    /// Gzipped bytes, when a start-up budget was asked for.
    pub gzip: Option<u64>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            raw: PLATFORM_LIMIT,
            gzip: None,
        }
    }
}

/// `1.23 MiB` / `456.7 KiB` / `89 B`.
pub fn human(bytes: u64) -> String {
    if bytes >= MIB {
        format!("{:.2} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= KIB {
        format!("{:.1} KiB", bytes as f64 / KIB as f64)
    } else {
        format!("{bytes} B")
    }
}

/// `None` when the module fits `budget`; the diagnostic otherwise. `gzip` is the module's
/// gzipped size when it was measured (with a gzip budget). `about` is the file the bake came
/// from (the catalog, or the policy), named in the message.
pub fn check(
    module: &Module,
    gzip: Option<u64>,
    items: usize,
    budget: Budget,
    about: &Path,
) -> Option<Diagnostic> {
    let (message, help) = if module.bytes > budget.raw {
        let platform = if budget.raw == PLATFORM_LIMIT {
            format!(": Workers would refuse to deploy it ({PLATFORM_SOURCE})")
        } else {
            " (--size-limit)".to_string()
        };
        (
            format!(
                "the baked module is {}, over the {} limit{platform}",
                human(module.bytes),
                human(budget.raw)
            ),
            "trim the stub catalog: the final net needs a curated few, not the whole inventory"
                .to_string(),
        )
    } else if let (Some(limit), Some(g)) = (budget.gzip, gzip) {
        if g <= limit {
            return None;
        }
        (
            format!(
                "the baked module is {} gzipped, over the {} --gzip-limit (a start-up budget; \
                 the platform's limit is {} uncompressed)",
                human(g),
                human(limit),
                human(PLATFORM_LIMIT)
            ),
            "trim the stub catalog, or raise or drop --gzip-limit".to_string(),
        )
    } else {
        return None;
    };
    let mut notes = vec![format!("module: {} raw", human(module.bytes))];
    if let Some(g) = gzip {
        notes[0].push_str(&format!(", {} gzipped", human(g)));
    }
    notes.push(format!(
        "bake: {} for {items} catalog item(s)",
        human(module.bake_bytes)
    ));
    Some(Diagnostic {
        code: MODULE_TOO_LARGE,
        severity: Severity::Error,
        message,
        file: about.to_path_buf(),
        span: None,
        label: String::new(),
        secondary: vec![],
        notes,
        help,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_one_way() {
        assert_eq!(parse_size("1234"), Ok(1234));
        assert_eq!(parse_size("1234B"), Ok(1234));
        assert_eq!(parse_size("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_size("1.5MiB"), Ok(1_572_864));
        assert_eq!(parse_size("1.5mib"), Ok(1_572_864));
        assert_eq!(parse_size(" 64MiB "), Ok(PLATFORM_LIMIT));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert_eq!(parse_size("1GiB"), Ok(GIB));
        assert!(parse_size("0.1KiB")
            .unwrap_err()
            .contains("whole number of bytes"));
        assert!(parse_size("3MB").unwrap_err().contains("ambiguous"));
        assert!(parse_size("lots").unwrap_err().contains("not a size"));
        assert!(parse_size("1.2.3MiB").is_err());
        assert!(parse_size("3TiB").unwrap_err().contains("unknown unit"));
        assert!(parse_size("99999999999999999999")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_size("").is_err());
    }

    #[test]
    fn a_module_limit_above_the_platforms_is_refused_with_its_figure() {
        assert_eq!(parse_module_limit("1.5MiB"), Ok(1_572_864));
        assert_eq!(parse_module_limit("64MiB"), Ok(PLATFORM_LIMIT));
        let e = parse_module_limit("65MiB").unwrap_err();
        assert!(
            e.contains("64.00 MiB") && e.contains("September 2026"),
            "{e}"
        );
        assert!(parse_module_limit("0").is_err());
        assert!(parse_module_limit("paid")
            .unwrap_err()
            .contains("caps are gone"));
    }

    fn module(bytes: u64) -> Module {
        Module {
            bake_bytes: 10,
            bytes,
            file: "index_bg.wasm".into(),
            sha256: String::new(),
        }
    }

    #[test]
    fn the_raw_size_is_checked_and_the_gzip_budget_only_when_asked() {
        let about = Path::new("c.json");
        let big = module(65 * MIB);
        let d = check(&big, None, 3, Budget::default(), about).unwrap();
        assert_eq!(d.code, MODULE_TOO_LARGE);
        assert!(
            d.message.contains("over the 64.00 MiB limit"),
            "{}",
            d.message
        );
        assert!(d.message.contains("September 2026"), "{}", d.message);
        let m = module(20 * MIB);
        let g = Some(4 * MIB);
        assert!(check(&m, g, 3, Budget::default(), about).is_none());
        let tight = Budget {
            raw: 10 * MIB,
            gzip: None,
        };
        assert!(check(&m, g, 3, tight, about)
            .unwrap()
            .message
            .contains("--size-limit"));
        let gz = Budget {
            raw: PLATFORM_LIMIT,
            gzip: Some(3 * MIB),
        };
        let d = check(&m, g, 3, gz, about).unwrap();
        assert!(d.message.contains("4.00 MiB gzipped"), "{}", d.message);
    }
}
