//! Standard output for commands that write with `?`: a write after the reader stopped
//! reading (`understudy releases status | head`) is told apart from any other I/O error, so
//! [`crate::exit::of`] ends quietly on it.

/// Standard output for a command that writes with `?` (`releases status`, the rehearsal of
/// `releases rollout --dry-run`): a write to a closed pipe fails with [`StdoutClosed`]
/// inside, which [`crate::exit::of`] ends quietly, as `main` ends a `println!` to a closed pipe.
pub fn stdout() -> Out {
    Out(std::io::stdout().lock())
}

pub struct Out(std::io::StdoutLock<'static>);

/// The reader of standard output stopped reading (`understudy releases status | head`).
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for StdoutClosed {}

fn closed(e: std::io::Error) -> std::io::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::io::Error::new(std::io::ErrorKind::BrokenPipe, StdoutClosed)
    } else {
        e
    }
}

impl std::io::Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf).map_err(closed)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(closed)
    }
}

/// Whether `e` is a write to standard output after its reader stopped reading: only
/// [`Out`]'s, so that a broken pipe to anything else (a child's stdin, a socket) is still
/// reported.
pub fn stdout_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .is_some_and(|inner| inner.is::<StdoutClosed>())
    })
}
