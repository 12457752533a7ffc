//! Named network namespaces (`ip netns`, bind mounts under `/run/netns`), and running code
//! inside one.
//!
//! A [`Netns`] made by [`Netns::create`] is deleted when dropped, so a test that fails
//! half-way leaves none behind. [`Netns::spawn`] runs a future on a thread of its own that
//! has entered the namespace (`setns(2)` through rustix), on a runtime whose every thread
//! enters it too: sockets it opens and programs it starts (`nft`, `ip`, `conntrack`) belong
//! to the namespace. That is how one test process runs several nodes' networks, each as if
//! it were the only one on its machine; a real node agent simply runs inside its namespace.

use std::fs::File;
use std::future::Future;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::exec;

/// Where `ip netns` keeps its namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// A named network namespace.
#[derive(Debug)]
pub struct Netns {
    name: String,
    owned: bool,
}

/// A future running inside a namespace (see [`Netns::spawn`]).
#[derive(Debug)]
pub struct NetnsTask<T> {
    done: oneshot::Receiver<T>,
    thread: Option<std::thread::JoinHandle<()>>,
    name: String,
}

impl<T> NetnsTask<T> {
    /// Waits for the future's output.
    pub async fn join(mut self) -> Result<T> {
        let out = (&mut self.done).await;
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
        out.map_err(|_| Error::Netns {
            name: self.name.clone(),
            source: std::io::Error::other("the task in the namespace failed"),
        })
    }
}

fn enter(fd: &OwnedFd) -> std::io::Result<()> {
    move_into_link_name_space(fd.as_fd(), Some(LinkNameSpaceType::Network))
        .map_err(std::io::Error::from)
}

impl Netns {
    /// Creates namespace `name`; it is deleted when this is dropped.
    pub async fn create(name: &str) -> Result<Netns> {
        exec::ip(&["netns", "add", name]).await?;
        let ns = Netns {
            name: name.to_string(),
            owned: true,
        };
        ns.exec("ip", &["link", "set", "lo", "up"]).await?;
        Ok(ns)
    }

    /// Namespace `name`, which someone else made and will delete.
    pub fn existing(name: &str) -> Netns {
        Netns {
            name: name.to_string(),
            owned: false,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/run/netns/<name>`, as CNI's `CNI_NETNS` takes it.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(NETNS_DIR).join(&self.name)
    }

    /// Runs `program args…` inside the namespace (`ip netns exec`).
    pub async fn exec(&self, program: &str, args: &[&str]) -> Result<exec::Output> {
        let mut all = vec!["netns", "exec", self.name.as_str(), program];
        all.extend_from_slice(args);
        exec::run("ip", &all, None).await
    }

    /// A command running `program` inside the namespace, for callers that keep the child
    /// (servers in tests, a node agent).
    pub fn command(&self, program: &str) -> tokio::process::Command {
        let mut c = tokio::process::Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Sets sysctl `key` (`net.ipv4.ip_forward`) inside the namespace.
    pub async fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        self.exec("sysctl", &["-qw", &format!("{key}={value}")])
            .await
            .map(|_| ())
    }

    /// Runs `f()`'s future on a thread inside the namespace, with its own current-thread
    /// runtime (whose blocking threads enter the namespace too). Await [`NetnsTask::join`]
    /// for its output.
    pub fn spawn<F, Fut, T>(&self, f: F) -> Result<NetnsTask<T>>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T>,
        T: Send + 'static,
    {
        let err = |source| Error::Netns {
            name: self.name.clone(),
            source,
        };
        let fd: Arc<OwnedFd> = Arc::new(File::open(self.path()).map_err(err)?.into());
        let (tx, rx) = oneshot::channel();
        let name = self.name.clone();
        let thread = std::thread::Builder::new()
            .name(format!("netns-{}", self.name))
            .spawn(move || {
                if let Err(e) = enter(&fd) {
                    tracing::error!(netns = %name, error = %e, "failed to enter the namespace");
                    return;
                }
                let fd2 = fd.clone();
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .on_thread_start(move || {
                        if let Err(e) = enter(&fd2) {
                            tracing::error!(error = %e, "a runtime thread failed to enter its namespace");
                        }
                    })
                    .build();
                match rt {
                    Ok(rt) => {
                        let out = rt.block_on(f());
                        let _ = tx.send(out);
                    }
                    Err(e) => tracing::error!(netns = %name, error = %e, "no runtime"),
                }
            })
            .map_err(err)?;
        Ok(NetnsTask {
            done: rx,
            thread: Some(thread),
            name: self.name.clone(),
        })
    }

    /// Deletes the namespace now (dropping does the same, synchronously).
    pub async fn delete(mut self) -> Result<()> {
        self.owned = false;
        exec::ip(&["netns", "delete", &self.name]).await.map(|_| ())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if self.owned {
            let status = std::process::Command::new("ip")
                .args(["netns", "delete", &self.name])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
            if !matches!(status, Ok(s) if s.success()) {
                tracing::warn!(netns = %self.name, "failed to delete the network namespace");
            }
        }
    }
}

/// The names of the namespaces `ip netns` knows.
pub async fn list() -> Result<Vec<String>> {
    let out = exec::ip(&["netns", "list"]).await?;
    Ok(out
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}
