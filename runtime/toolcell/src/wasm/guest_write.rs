//! A file's output stream that writes where the call is, linked in place of wasmtime-wasi's
//! `descriptor.write-via-stream`.
//!
//! wasmtime-wasi's file output stream runs each non-blocking `write` on tokio's blocking pool
//! and back, whatever `allow_blocking_current_thread` says (only `blocking-write-and-flush`
//! honours it), and a guest's `std::fs::write` reaches the non-blocking one: a hand-off and
//! two thread wake-ups for each write of a file. The sandbox already runs a call's file
//! operations on its own thread (`wasm/sandbox.rs`), so this stream does the same: `write`
//! is one positioned write (`pwrite`), done before it returns.
//!
//! What is allowed is unchanged: the descriptor must be a file opened for writing
//! (`not-permitted` otherwise, as wasmtime-wasi answers, and `bad-descriptor` for a
//! directory); the guest still asks `check-write` first and may write at most
//! [`WRITE_PERMIT_BYTES`] at once; a failed write (a full disk) is answered
//! `last-operation-failed` with the system's error and closes the stream, as wasmtime-wasi's
//! does one step later. What it costs: a write to a hung network mount holds the call's
//! thread (as every file operation of a call already does: docs/security.md, "Known limits").
//! `append-via-stream` is left to wasmtime-wasi (no toolcell tool appends).

use crate::wasm::sandbox::CallState;
use bytes::{Buf as _, Bytes};
use std::os::unix::fs::FileExt as _;
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView as _};
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError, StreamResult};

/// The most one `write` may carry (`check-write`'s answer): what wasmtime-wasi's own file
/// stream allows, so a guest sees no difference; one `pwrite` of it is tens of microseconds.
pub(crate) const WRITE_PERMIT_BYTES: usize = 64 * 1024;

/// Link [`InPlaceWrite`] as `wasi:filesystem/types`' `write-via-stream`, in place of
/// wasmtime-wasi's. `linker` must already hold wasmtime-wasi's, with shadowing allowed.
pub(crate) fn link(
    types: &mut wasmtime::component::LinkerInstance<'_, CallState>,
) -> anyhow::Result<()> {
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        |mut store, (fd, offset): (Resource<Descriptor>, u64)| {
            let view = store.data_mut().filesystem();
            // A descriptor not in the table traps, as wasmtime-wasi's does.
            let file = match view.table.get(&fd)? {
                Descriptor::File(file) if file.perms.write_not_permitted() => {
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                Descriptor::File(file) => Arc::clone(&file.file),
                Descriptor::Dir(_) => return Ok((Err(ErrorCode::BadDescriptor),)),
            };
            let stream: DynOutputStream = Box::new(InPlaceWrite {
                file,
                position: offset,
                closed: false,
            });
            let stream: Resource<DynOutputStream> = view.table.push(stream)?;
            Ok((Ok(stream),))
        },
    )?;
    Ok(())
}

/// A file's output stream whose writes are done when `write` returns.
pub(crate) struct InPlaceWrite {
    file: Arc<std::fs::File>,
    /// Where the next write lands.
    position: u64,
    /// A write failed: every later use answers `closed`.
    closed: bool,
}

impl InPlaceWrite {
    #[cfg(test)]
    fn new(file: std::fs::File, position: u64) -> InPlaceWrite {
        InPlaceWrite {
            file: Arc::new(file),
            position,
            closed: false,
        }
    }

    fn open(&self) -> StreamResult<()> {
        if self.closed {
            Err(StreamError::Closed)
        } else {
            Ok(())
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for InPlaceWrite {
    /// Always ready: nothing is ever left in flight.
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for InPlaceWrite {
    fn write(&mut self, mut bytes: Bytes) -> StreamResult<()> {
        self.open()?;
        if bytes.len() > WRITE_PERMIT_BYTES {
            return Err(StreamError::trap(
                "a write of more than check-write allowed",
            ));
        }
        while !bytes.is_empty() {
            match self.file.write_at(&bytes, self.position) {
                Ok(0) => {
                    self.closed = true;
                    return Err(StreamError::LastOperationFailed(
                        std::io::Error::from(std::io::ErrorKind::WriteZero).into(),
                    ));
                }
                Ok(written) => {
                    bytes.advance(written);
                    self.position = self.position.saturating_add(written as u64);
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    self.closed = true;
                    return Err(StreamError::LastOperationFailed(error.into()));
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        // Nothing is buffered here: a write is in the file when `write` returns.
        self.open()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.open()?;
        Ok(WRITE_PERMIT_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("f");
        (dir, path)
    }

    #[test]
    fn writes_land_at_the_offset_in_order_before_write_returns() {
        let (_dir, path) = scratch();
        std::fs::write(&path, b"0123456789").expect("seeded");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("opened");
        let mut stream = InPlaceWrite::new(file, 2);
        assert_eq!(stream.check_write().expect("open"), WRITE_PERMIT_BYTES);
        stream.write(Bytes::from_static(b"ab")).expect("written");
        // Already in the file, before any flush.
        assert_eq!(std::fs::read(&path).expect("read"), b"01ab456789");
        stream.write(Bytes::from_static(b"cd")).expect("written");
        stream.flush().expect("flushed");
        assert_eq!(std::fs::read(&path).expect("read"), b"01abcd6789");
    }

    #[test]
    fn a_failed_write_says_why_and_closes_the_stream() {
        let (_dir, path) = scratch();
        std::fs::write(&path, b"x").expect("seeded");
        // Opened for reading only: the system refuses the write.
        let file = std::fs::File::open(&path).expect("opened");
        let mut stream = InPlaceWrite::new(file, 0);
        match stream.write(Bytes::from_static(b"y")) {
            Err(StreamError::LastOperationFailed(_)) => {}
            other => panic!("expected last-operation-failed, got {other:?}"),
        }
        assert!(matches!(stream.check_write(), Err(StreamError::Closed)));
        assert!(matches!(stream.flush(), Err(StreamError::Closed)));
        assert_eq!(std::fs::read(&path).expect("read"), b"x");
    }

    #[test]
    fn a_write_past_its_permit_traps() {
        let (_dir, path) = scratch();
        let file = std::fs::File::create(&path).expect("created");
        let mut stream = InPlaceWrite::new(file, 0);
        let big = Bytes::from(vec![0u8; WRITE_PERMIT_BYTES + 1]);
        assert!(matches!(stream.write(big), Err(StreamError::Trap(_))));
        assert_eq!(std::fs::read(&path).expect("read").len(), 0);
    }
}
