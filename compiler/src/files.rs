//! Reading the files a policy names, safely: regular files only (a FIFO would block the
//! compiler forever, a device would stream without end), a size ceiling, UTF-8, and paths
//! confined to the policy's directory tree unless the caller allows otherwise.

use std::fs::{File, Metadata};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Policies are small; anything larger is a mistake (or an attack on the compiler).
pub const MAX_POLICY_BYTES: u64 = 1 << 20;
/// Catalog and inventory files larger than this are refused.
pub const MAX_CATALOG_BYTES: u64 = 64 << 20;

/// What kind of file system object `meta` describes, for messages.
fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    "not a regular file"
}

/// Reads a UTF-8 regular file of at most `max` bytes, with a message naming what went
/// wrong. The file's type is checked before it is opened, and again on the open handle.
pub fn read_text(path: &Path, max: u64) -> Result<String, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!("`{shown}` is {}, not a regular file", kind(&meta)));
    }
    if meta.len() > max {
        return Err(format!(
            "`{shown}` is {} bytes, over the {max} byte limit",
            meta.len()
        ));
    }
    let file = File::open(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if !meta.is_file() {
        return Err(format!("`{shown}` is {}, not a regular file", kind(&meta)));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "`{shown}` grew past the {max} byte limit while read"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "`{shown}` is not UTF-8 (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// The first `n` bytes of a regular file (for sniffing encodings); `None` otherwise.
pub fn head(path: &Path, n: u64) -> Option<Vec<u8>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    File::open(path)
        .ok()?
        .take(n)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// `rel` resolved against `base` (the policy's directory). Unless `allow_outside`, the
/// result must lie inside `base`'s tree once symbolic links are followed; the error says
/// where it leads. A path that does not exist is returned as is: reading it reports that.
pub fn confine(base: &Path, rel: &str, allow_outside: bool) -> Result<PathBuf, String> {
    let path = base.join(rel);
    if allow_outside {
        return Ok(path);
    }
    let root = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
    let resolved = match path.canonicalize() {
        Ok(p) => p,
        Err(_) => {
            // Not there: judge the path as written, so `../x` is refused before it exists.
            if Path::new(rel).is_absolute()
                || Path::new(rel)
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(format!(
                    "`{rel}` leads outside the policy's directory (through `..` or an absolute path)"
                ));
            }
            return Ok(path);
        }
    };
    if resolved.starts_with(&root) {
        Ok(path)
    } else {
        Err(format!(
            "`{rel}` leads outside the policy's directory (through `..`, an absolute path or a symbolic link)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_text(dir.path(), 10).unwrap_err();
        assert!(e.contains("a directory"), "{e}");
        #[cfg(unix)]
        {
            let fifo = dir.path().join("pipe");
            let ok = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(ok, "mkfifo is part of coreutils");
            // Returns at once: a FIFO is never opened.
            let e = read_text(&fifo, 10).unwrap_err();
            assert!(e.contains("FIFO"), "{e}");
            assert!(head(&fifo, 10).is_none());
            let e = read_text(Path::new("/dev/zero"), 10).unwrap_err();
            assert!(e.contains("character device"), "{e}");
        }
    }

    #[test]
    fn paths_stay_inside_the_policy_directory() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("policies");
        std::fs::create_dir(&inner).unwrap();
        std::fs::write(inner.join("c.json"), "{}").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "x").unwrap();
        assert!(confine(&inner, "c.json", false).is_ok());
        assert!(confine(&inner, "../secret.txt", false).is_err());
        assert!(confine(&inner, "/etc/passwd", false).is_err());
        assert!(confine(&inner, "../missing.json", false).is_err());
        assert!(confine(&inner, "../secret.txt", true).is_ok());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("secret.txt"), inner.join("link.json"))
                .unwrap();
            let e = confine(&inner, "link.json", false).unwrap_err();
            assert!(e.contains("outside"), "{e}");
        }
    }
}
