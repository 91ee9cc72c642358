//! Splicing the bake into the Worker's `.wasm` as a custom section.
//!
//! Why by hand and not with a wasm toolkit: a custom section is five fields (id 0, LEB128
//! size, LEB128 name length, name, payload) and may sit anywhere after the header, so
//! re-baking is "walk the section headers, drop ours, append the new one". The code
//! section is never touched — that is what lets a catalog re-bake skip the Rust compile
//! (docs/adr/001-custom-section.md). The walk checks every size against the bytes present,
//! so a truncated or foreign file is an error naming the offset, not a garbled output.

use std::fmt;
use std::ops::Range;

/// `\0asm` and binary format version 1.
pub const HEADER: [u8; 8] = *b"\0asm\x01\0\0\0";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmError(pub String);

impl fmt::Display for WasmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WasmError {}

/// One top-level section: its id, the byte range of the whole section (header included)
/// and, for custom sections, the name and the payload's range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub id: u8,
    pub whole: Range<usize>,
    pub custom: Option<(String, Range<usize>)>,
}

/// Reads an unsigned LEB128 `u32` at `*pos`, advancing it.
fn read_u32(bytes: &[u8], pos: &mut usize) -> Result<u32, WasmError> {
    let start = *pos;
    let mut value: u64 = 0;
    for shift in (0..35).step_by(7) {
        let byte = *bytes
            .get(*pos)
            .ok_or_else(|| WasmError(format!("truncated LEB128 number at byte {start}")))?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return u32::try_from(value)
                .map_err(|_| WasmError(format!("LEB128 number at byte {start} exceeds 32 bits")));
        }
    }
    Err(WasmError(format!(
        "LEB128 number at byte {start} is longer than 5 bytes"
    )))
}

fn write_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Walks the module's top-level sections.
pub fn sections(module: &[u8]) -> Result<Vec<Section>, WasmError> {
    if module.len() < HEADER.len() || module[..HEADER.len()] != HEADER {
        return Err(WasmError(
            "not a WebAssembly module (no `\\0asm` version 1 header)".into(),
        ));
    }
    let mut out = Vec::new();
    let mut pos = HEADER.len();
    while pos < module.len() {
        let start = pos;
        let id = module[pos];
        pos += 1;
        let size = read_u32(module, &mut pos)? as usize;
        let end = pos
            .checked_add(size)
            .filter(|&e| e <= module.len())
            .ok_or_else(|| {
                WasmError(format!(
                    "section {id} at byte {start} claims {size} bytes but the file ends at byte {}",
                    module.len()
                ))
            })?;
        let custom = if id == 0 {
            let name_len = read_u32(module, &mut pos)? as usize;
            let name_end = pos
                .checked_add(name_len)
                .filter(|&e| e <= end)
                .ok_or_else(|| {
                    WasmError(format!(
                        "custom section at byte {start} has a name longer than the section"
                    ))
                })?;
            let name = std::str::from_utf8(&module[pos..name_end]).map_err(|_| {
                WasmError(format!(
                    "custom section at byte {start} has a non-UTF-8 name"
                ))
            })?;
            Some((name.to_string(), name_end..end))
        } else {
            None
        };
        out.push(Section {
            id,
            whole: start..end,
            custom,
        });
        pos = end;
    }
    Ok(out)
}

/// The payload of the custom section `name`, if the module has one (the first, when several).
pub fn custom_section<'a>(module: &'a [u8], name: &str) -> Result<Option<&'a [u8]>, WasmError> {
    Ok(sections(module)?.into_iter().find_map(|s| match s.custom {
        Some((n, payload)) if n == name => Some(&module[payload]),
        _ => None,
    }))
}

/// A copy of `module` without any custom section called `name`.
pub fn remove_custom_section(module: &[u8], name: &str) -> Result<Vec<u8>, WasmError> {
    let mut out = Vec::with_capacity(module.len());
    out.extend_from_slice(&HEADER);
    for s in sections(module)? {
        if !matches!(&s.custom, Some((n, _)) if n == name) {
            out.extend_from_slice(&module[s.whole]);
        }
    }
    Ok(out)
}

/// `module` (already without a section called `name`) with the header of a custom section
/// `name` of `payload_len` bytes appended, and room reserved for the payload, which the
/// caller appends next. Returns the module and where the payload starts.
pub fn start_custom_section(
    mut module: Vec<u8>,
    name: &str,
    payload_len: usize,
) -> Result<(Vec<u8>, usize), WasmError> {
    let too_big = || {
        WasmError(format!(
            "the `{name}` payload ({payload_len} bytes) exceeds the 4 GiB section limit"
        ))
    };
    let name_len = u32::try_from(name.len()).map_err(|_| too_big())?;
    let mut body = Vec::with_capacity(name.len() + 5);
    write_u32(&mut body, name_len);
    body.extend_from_slice(name.as_bytes());
    let size = u32::try_from(body.len() + payload_len).map_err(|_| too_big())?;
    module.reserve_exact(body.len() + payload_len + 6);
    module.push(0);
    write_u32(&mut module, size);
    module.extend_from_slice(&body);
    let at = module.len();
    Ok((module, at))
}

/// A copy of `module` with every custom section called `name` removed and one holding
/// `payload` appended at the end.
pub fn set_custom_section(module: &[u8], name: &str, payload: &[u8]) -> Result<Vec<u8>, WasmError> {
    let clean = remove_custom_section(module, name)?;
    let (mut out, _) = start_custom_section(clean, name, payload.len())?;
    out.extend_from_slice(payload);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module with a type section (one `() -> ()` type) and a `name`-like custom section.
    fn tiny_module() -> Vec<u8> {
        let mut m = HEADER.to_vec();
        m.extend_from_slice(&[1, 4, 1, 0x60, 0, 0]);
        m.extend_from_slice(&[0, 5, 4, b'n', b'a', b'm', b'e']);
        m
    }

    #[test]
    fn appends_a_section_that_reads_back() {
        let m = set_custom_section(&tiny_module(), "understudy.bake", b"payload").unwrap();
        assert!(
            m.starts_with(&tiny_module()),
            "existing sections are kept byte for byte"
        );
        assert_eq!(
            custom_section(&m, "understudy.bake").unwrap(),
            Some(&b"payload"[..])
        );
        assert_eq!(custom_section(&m, "name").unwrap(), Some(&b""[..]));
    }

    #[test]
    fn rebaking_replaces_the_section_instead_of_adding_one() {
        let once = set_custom_section(&tiny_module(), "understudy.bake", b"first").unwrap();
        let twice = set_custom_section(&once, "understudy.bake", b"second, longer").unwrap();
        let named: Vec<_> = sections(&twice)
            .unwrap()
            .into_iter()
            .filter(|s| matches!(&s.custom, Some((n, _)) if n == "understudy.bake"))
            .collect();
        assert_eq!(named.len(), 1);
        assert_eq!(
            custom_section(&twice, "understudy.bake").unwrap(),
            Some(&b"second, longer"[..])
        );
        // Same inputs, same bytes, whatever was baked before.
        let direct =
            set_custom_section(&tiny_module(), "understudy.bake", b"second, longer").unwrap();
        assert_eq!(twice, direct);
    }

    #[test]
    fn large_payloads_get_multi_byte_sizes() {
        let payload = vec![7u8; 300_000];
        let m = set_custom_section(&tiny_module(), "understudy.bake", &payload).unwrap();
        assert_eq!(
            custom_section(&m, "understudy.bake")
                .unwrap()
                .map(<[u8]>::len),
            Some(300_000)
        );
    }

    #[test]
    fn rejects_what_is_not_a_module() {
        assert!(sections(b"hello")
            .unwrap_err()
            .0
            .contains("not a WebAssembly module"));
        let mut truncated = tiny_module();
        truncated.truncate(truncated.len() - 2);
        assert!(sections(&truncated)
            .unwrap_err()
            .0
            .contains("claims 5 bytes"));
        let mut bad_leb = HEADER.to_vec();
        bad_leb.extend_from_slice(&[1, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(sections(&bad_leb).is_err());
    }

    #[test]
    fn leb128_round_trips() {
        for v in [0u32, 1, 127, 128, 16_383, 16_384, u32::MAX] {
            let mut buf = Vec::new();
            write_u32(&mut buf, v);
            let mut pos = 0;
            assert_eq!(read_u32(&buf, &mut pos).unwrap(), v);
            assert_eq!(pos, buf.len());
        }
    }
}
