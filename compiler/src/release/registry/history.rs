//! `history.jsonl`: one line per change of the active release, oldest first — the
//! registry's log. Each line carries its sequence number and a checksum of itself, and
//! names the release that was active before (`from`), so a reader can tell a complete log
//! from a damaged one: a torn last line (no newline, or not JSON), a line whose bytes
//! changed (checksum), lines lost in the middle (a gap in `seq`, or a `from` that is not
//! the previous line's `release`).
//!
//! Lines written before checksums existed (no `seq`, no `sum`) are read as they are.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One line of `history.jsonl`: a change of the active release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activation {
    pub action: String,
    pub at: String,
    pub at_ms: u64,
    /// The release that was active before (none for the first).
    pub from: Option<String>,
    pub note: String,
    pub release: String,
    /// 1 for the first line, then +1 per line (0: a line from before checksums).
    #[serde(default)]
    pub seq: u64,
    /// The first 16 hex digits of the SHA-256 of the line written with `sum` empty.
    #[serde(default)]
    pub sum: String,
}

impl Activation {
    fn checksum(&self) -> String {
        let mut bare = self.clone();
        bare.sum = String::new();
        // Plain strings and integers: serialising cannot fail.
        let text = serde_json::to_string(&bare).unwrap_or_default();
        hex::encode(&Sha256::digest(text.as_bytes())[..8])
    }

    /// The line for this entry (with `seq` set by the caller), checksum filled in.
    pub fn to_line(&self) -> String {
        let mut sealed = self.clone();
        sealed.sum = self.checksum();
        let mut line = serde_json::to_string(&sealed).unwrap_or_default();
        line.push('\n');
        line
    }
}

/// What is wrong with one line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub reason: String,
}

/// The history as read: every entry that checks out, and what does not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub entries: Vec<Activation>,
    pub bad: Vec<BadLine>,
}

impl Parsed {
    pub fn is_intact(&self) -> bool {
        self.bad.is_empty()
    }

    pub fn last(&self) -> Option<&Activation> {
        self.entries.last()
    }
}

fn excerpt(s: &str) -> String {
    let t: String = s.chars().take(60).collect();
    if t.len() < s.len() {
        format!("{t}…")
    } else {
        t
    }
}

/// Reads the text of `history.jsonl`.
pub fn parse(text: &str) -> Parsed {
    let mut out = Parsed::default();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (i, raw) in lines.iter().enumerate() {
        let n = i + 1;
        let complete = raw.ends_with('\n');
        let body = raw.trim_end_matches(['\n', '\r']);
        if body.trim().is_empty() {
            if !complete {
                continue; // nothing after the last newline
            }
            out.bad.push(BadLine {
                line: n,
                reason: "an empty line".into(),
            });
            continue;
        }
        let a: Activation = match serde_json::from_str(body) {
            Ok(a) => a,
            Err(e) => {
                out.bad.push(BadLine {
                    line: n,
                    reason: if complete {
                        format!("not an activation record ({e}): `{}`", excerpt(body))
                    } else {
                        format!("torn: the file ends inside this line: `{}`", excerpt(body))
                    },
                });
                continue;
            }
        };
        if !complete {
            out.bad.push(BadLine {
                line: n,
                reason: "torn: the last line has no newline (the file was cut short)".into(),
            });
            continue;
        }
        if !a.sum.is_empty() && a.sum != a.checksum() {
            out.bad.push(BadLine {
                line: n,
                reason: format!(
                    "its checksum {} does not match its content (changed after it was written)",
                    a.sum
                ),
            });
            continue;
        }
        if let Some(prev) = out.entries.last() {
            if a.seq != 0 && prev.seq != 0 && a.seq != prev.seq + 1 {
                out.bad.push(BadLine {
                    line: n,
                    reason: format!(
                        "entry {} follows entry {}: {} entr(ies) are missing before it",
                        a.seq,
                        prev.seq,
                        a.seq.saturating_sub(prev.seq + 1)
                    ),
                });
            } else if a.from.as_deref() != Some(prev.release.as_str()) {
                out.bad.push(BadLine {
                    line: n,
                    reason: format!(
                        "it changes from {} but the line before made {} active: an entry is \
                         missing between them",
                        a.from.as_deref().unwrap_or("none"),
                        prev.release
                    ),
                });
            }
        } else if a.seq > 1 {
            out.bad.push(BadLine {
                line: n,
                reason: format!(
                    "the first line is entry {}: earlier entries are missing",
                    a.seq
                ),
            });
        }
        out.entries.push(a);
    }
    out
}

/// The text of a history holding `entries`, renumbered from 1 and sealed.
pub fn render(entries: &[Activation]) -> String {
    let mut text = String::new();
    for (i, a) in entries.iter().enumerate() {
        let mut a = a.clone();
        a.seq = i as u64 + 1;
        text.push_str(&a.to_line());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(from: Option<&str>, release: &str) -> Activation {
        Activation {
            action: "promote".into(),
            at: "2026-11-30T01:00:00Z".into(),
            at_ms: 1,
            from: from.map(str::to_string),
            note: "n".into(),
            release: release.into(),
            seq: 0,
            sum: String::new(),
        }
    }

    fn three() -> String {
        render(&[
            entry(None, "r-000000000001"),
            entry(Some("r-000000000001"), "r-000000000002"),
            entry(Some("r-000000000002"), "r-000000000003"),
        ])
    }

    #[test]
    fn a_complete_history_reads_back_intact() {
        let p = parse(&three());
        assert!(p.is_intact(), "{:?}", p.bad);
        assert_eq!(p.entries.len(), 3);
        assert_eq!(p.entries[2].seq, 3);
    }

    #[test]
    fn a_history_cut_short_anywhere_is_detected() {
        let text = three();
        for cut in 1..text.len() {
            let cut_text = &text[..cut];
            let p = parse(cut_text);
            if cut_text.ends_with('\n') {
                assert!(p.is_intact(), "cut at {cut}: {:?}", p.bad);
            } else {
                assert_eq!(p.bad.len(), 1, "cut at {cut}: {:?}", p.bad);
                assert!(p.bad[0].reason.starts_with("torn"), "{:?}", p.bad);
            }
        }
    }

    #[test]
    fn a_changed_byte_or_a_lost_line_is_detected() {
        let text = three();
        let edited = text.replacen("\"at_ms\":1", "\"at_ms\":7", 1);
        let p = parse(&edited);
        assert!(p.bad[0].reason.contains("checksum"), "{:?}", p.bad);

        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let p = parse(&format!("{}{}", lines[0], lines[2]));
        assert!(p.bad[0].reason.contains("missing"), "{:?}", p.bad);
        let p = parse(&format!("{}{}", lines[1], lines[2]));
        assert!(p.bad[0].reason.contains("earlier entries"), "{:?}", p.bad);
    }

    #[test]
    fn legacy_lines_without_checksums_are_read() {
        let legacy = "{\"action\":\"build\",\"at\":\"x\",\"at_ms\":1,\"from\":null,\"note\":\"\",\"release\":\"r-000000000001\"}\n";
        let p = parse(legacy);
        assert!(p.is_intact(), "{:?}", p.bad);
        assert_eq!(p.entries[0].seq, 0);
    }
}
