//! Running the kernel's administration tools (`nft`, `ip`, `conntrack`) as child processes.
//!
//! Upstream's kube-proxy drives nftables through the `nft` binary too (knftables), and its
//! conntrack cleanup once ran `conntrack`; a program is the stable interface those tools
//! offer, and it keeps `unsafe` netlink code out of the crate.
//!
//! Children are spawned with `tokio::process` on the calling thread, so they inherit that
//! thread's network namespace: code running inside [`crate::podnet::Netns::spawn`] programs
//! its namespace's kernel state without knowing it is in one.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::error::{Error, Result};

/// What a successful run printed.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
}

fn describe(program: &str, args: &[&str]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push(' ');
        s.push_str(a);
    }
    s
}

/// Runs `program args…` with `stdin` on its standard input; fails unless it exits 0.
pub async fn run(program: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<Output> {
    let spawn_err = |source| Error::Spawn {
        program: program.to_string(),
        source,
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(spawn_err)?;
    if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A program that fails early closes its stdin; its status and stderr say why.
        let _ = pipe.write_all(data).await;
        drop(pipe);
    }
    let out = child.wait_with_output().await.map_err(spawn_err)?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(Error::Command {
            command: describe(program, args),
            status: out.status.to_string(),
            stderr: stderr.trim().to_string(),
        });
    }
    Ok(Output { stdout, stderr })
}

/// Runs `ip args…` (iproute2).
pub async fn ip(args: &[&str]) -> Result<Output> {
    run("ip", args, None).await
}

/// Writes `value` to `/proc/sys/<key with dots as slashes>` of the calling thread's network
/// namespace (the `net.*` keys are per namespace).
pub fn sysctl(key: &str, value: &str) -> Result<()> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).map_err(|source| Error::Sysctl {
        key: key.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failing_program_reports_its_status_and_stderr() {
        let err = run("sh", &["-c", "echo nope >&2; exit 3"], None)
            .await
            .expect_err("exit 3 fails");
        let msg = err.to_string();
        assert!(msg.contains("sh -c"), "{msg}");
        assert!(msg.contains("nope"), "{msg}");
        assert!(msg.contains('3'), "{msg}");
    }

    #[tokio::test]
    async fn stdin_reaches_the_program() {
        let out = run("cat", &[], Some(b"hello")).await.expect("cat runs");
        assert_eq!(out.stdout, "hello");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let err = run("/nonexistent/nft", &[], None)
            .await
            .expect_err("absent");
        assert!(matches!(err, Error::Spawn { .. }), "{err}");
    }
}
