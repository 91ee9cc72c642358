//! The module size budget. Workers refuses a script whose compressed size is over the
//! plan's limit (3 MiB on the free plan, 10 MiB on paid), and a larger module also starts
//! slower in a cold isolate — so the compiler measures every module it writes and refuses
//! one over the limit before `wrangler deploy` would, with a diagnostic saying how to fix it.

use std::path::Path;

use crate::diag::{Diagnostic, Severity};
use crate::dist::manifest::Module;

/// The diagnostic code for a module over the size limit.
pub use crate::codes::MODULE_TOO_LARGE;

pub const MIB: u64 = 1 << 20;
/// Workers free plan: 3 MiB compressed.
pub const FREE_PLAN_LIMIT: u64 = 3 * MIB;
/// Workers paid plan: 10 MiB compressed.
pub const PAID_PLAN_LIMIT: u64 = 10 * MIB;

/// Parses a size: bytes (`3145728`), or a number with `KiB`, `MiB` (`3MiB`, `10MiB`), or a
/// plan name (`free`, `paid`).
pub fn parse_limit(s: &str) -> Result<u64, String> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "free" => return Ok(FREE_PLAN_LIMIT),
        "paid" => return Ok(PAID_PLAN_LIMIT),
        _ => {}
    }
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&t[..i], t[i..].trim()),
        None => (t, ""),
    };
    let n: u64 = num.parse().map_err(|_| {
        format!("`{s}` is not a size; write e.g. 3MiB, 10MiB, 500KiB, free or paid")
    })?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => MIB,
        _ => return Err(format!("`{s}`: unknown unit `{unit}`; use KiB or MiB")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{s}` is too large"))
}

/// `1.23 MiB` / `456.7 KiB` / `89 B`.
pub fn human(bytes: u64) -> String {
    if bytes >= MIB {
        format!("{:.2} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= 1024 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// `None` when the module fits `limit` (gzipped bytes); the diagnostic otherwise. `about`
/// is the file the bake came from (the catalog, or the policy), named in the message.
pub fn check(module: &Module, items: usize, limit: u64, about: &Path) -> Option<Diagnostic> {
    if module.gzip_bytes <= limit {
        return None;
    }
    Some(Diagnostic {
        code: MODULE_TOO_LARGE,
        severity: Severity::Error,
        message: format!(
            "the baked module is {} gzipped, over the {} limit: Workers would refuse to deploy it",
            human(module.gzip_bytes),
            human(limit)
        ),
        file: about.to_path_buf(),
        span: None,
        label: String::new(),
        secondary: vec![],
        notes: vec![
            format!(
                "module: {} raw, {} gzipped",
                human(module.bytes),
                human(module.gzip_bytes)
            ),
            format!(
                "bake: {} for {items} catalog item(s)",
                human(module.bake_bytes)
            ),
        ],
        help: format!(
            "trim the stub catalog (the final net needs a curated few, not the whole inventory), \
             or on the Workers Paid plan pass `--size-limit paid` ({})",
            human(PAID_PLAN_LIMIT)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_in_bytes_units_and_plan_names() {
        assert_eq!(parse_limit("3MiB"), Ok(FREE_PLAN_LIMIT));
        assert_eq!(parse_limit("paid"), Ok(PAID_PLAN_LIMIT));
        assert_eq!(parse_limit("500KiB"), Ok(500 * 1024));
        assert_eq!(parse_limit("1234"), Ok(1234));
        assert!(parse_limit("3GB").is_err());
        assert!(parse_limit("lots").is_err());
    }

    #[test]
    fn a_module_over_the_limit_gets_a_diagnostic_naming_both_sizes() {
        let m = Module {
            bake_bytes: 10,
            bytes: 5 * MIB,
            file: "index_bg.wasm".into(),
            gzip_bytes: FREE_PLAN_LIMIT + 1,
            sha256: String::new(),
        };
        assert!(check(&m, 3, PAID_PLAN_LIMIT, Path::new("c.json")).is_none());
        let d = check(&m, 3, FREE_PLAN_LIMIT, Path::new("c.json")).unwrap();
        assert_eq!(d.code, MODULE_TOO_LARGE);
        assert!(
            d.message.contains("over the 3.00 MiB limit"),
            "{}",
            d.message
        );
    }
}
