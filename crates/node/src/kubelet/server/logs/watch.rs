//! A wake-up when something changes in a directory (inotify, through rustix and tokio's
//! `AsyncFd`): a following log reader waits on it instead of polling. The events themselves
//! are not interpreted; the reader looks at the file again after any of them.

use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use tokio::io::unix::AsyncFd;

/// An inotify watch of one directory: writes, creations, renames and removals in it.
pub struct DirWatch {
    fd: AsyncFd<OwnedFd>,
}

impl DirWatch {
    pub fn new(dir: &Path) -> std::io::Result<DirWatch> {
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        inotify::add_watch(
            &fd,
            dir,
            WatchFlags::MODIFY
                | WatchFlags::CLOSE_WRITE
                | WatchFlags::CREATE
                | WatchFlags::MOVED_FROM
                | WatchFlags::MOVED_TO
                | WatchFlags::DELETE
                | WatchFlags::ATTRIB,
        )?;
        // `AsyncFd::new` is deprecated because an arbitrary `AsRawFd` may close its descriptor
        // while registered; an `OwnedFd` moved into the `AsyncFd` cannot, which is exactly
        // the contract of the unsafe `register` it stands for.
        #[allow(deprecated)]
        let fd = AsyncFd::new(fd)?;
        Ok(DirWatch { fd })
    }

    /// Returns once at least one event has arrived (and drains what is queued).
    pub async fn changed(&mut self) {
        loop {
            let Ok(mut guard) = self.fd.readable().await else {
                return;
            };
            let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
            let mut reader = inotify::Reader::new(guard.get_inner(), &mut buf);
            let mut seen = false;
            loop {
                match reader.next() {
                    Ok(_) => seen = true,
                    Err(rustix::io::Errno::WOULDBLOCK) => {
                        guard.clear_ready();
                        break;
                    }
                    Err(_) => return,
                }
            }
            if seen {
                return;
            }
        }
    }
}
