//! `mtest`: the project's test program for containers, one static multi-call binary (what
//! upstream's `agnhost` is for upstream's e2e tests). It runs in images with no libc and no
//! shell, so everything it needs — an HTTP server, a DNS client, TLS to the API server — is
//! its own. Invoked as `pause` (by name) it is a sandbox's pause process.
//!
//! ```text
//! mtest serve-http [--port P] [--fail-liveness-after S] [--unready-after S]
//! mtest exit N [--message TEXT]      exit with N (TEXT to /dev/termination-log)
//! mtest hog SIZE                     allocate and touch SIZE (e.g. 64Mi) and hold it
//! mtest busy [SECONDS] [--threads N] burn CPU
//! mtest sleep [SECONDS|infinity]
//! mtest dns NAME [TYPE] [--server IP[:PORT]]   A AAAA SRV CNAME PTR TXT, via /etc/resolv.conf
//! mtest tcp HOST:PORT [--send DATA] [--timeout S]
//! mtest api [PATH]                   GET the API server with the service-account token
//! mtest serve-webhook --cert F --key F [--port 8443] [--deny-prefix bad]   an admission webhook
//! mtest pause                        sleep for ever, reaping orphans
//! ```

mod api;
mod dns;
mod http;
mod tcp;
mod webhook;

use std::time::Duration;

/// A failed command: its message and exit code.
pub struct Failure(pub String, pub i32);

pub type Outcome = Result<(), Failure>;

pub fn fail(msg: impl Into<String>) -> Failure {
    Failure(msg.into(), 1)
}

/// Flag values: `--name value` or `--name=value`; the rest are positional.
pub struct Args {
    pub positional: Vec<String>,
    flags: Vec<(String, String)>,
}

impl Args {
    pub fn parse(args: &[String]) -> Args {
        let mut positional = Vec::new();
        let mut flags = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if let Some(f) = a.strip_prefix("--") {
                match f.split_once('=') {
                    Some((k, v)) => flags.push((k.to_string(), v.to_string())),
                    None => flags.push((f.to_string(), it.next().cloned().unwrap_or_default())),
                }
            } else {
                positional.push(a.clone());
            }
        }
        Args { positional, flags }
    }

    pub fn flag(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn pos(&self, i: usize) -> Option<&str> {
        self.positional.get(i).map(String::as_str)
    }

    pub fn seconds(&self, name: &str) -> Result<Option<f64>, Failure> {
        self.flag(name)
            .map(|v| {
                v.parse::<f64>()
                    .map_err(|_| fail(format!("--{name}: not seconds: {v}")))
            })
            .transpose()
    }
}

/// `64Mi`, `1G`, `500k`, `1048576` → bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().ok()?;
    let mult: u64 = match unit {
        "" => 1,
        "k" | "K" => 1000,
        "Ki" => 1 << 10,
        "M" => 1_000_000,
        "Mi" => 1 << 20,
        "G" => 1_000_000_000,
        "Gi" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

fn hog(args: &Args) -> Outcome {
    let size = args
        .pos(0)
        .and_then(parse_size)
        .ok_or_else(|| fail("usage: mtest hog SIZE (e.g. 64Mi)"))?;
    const CHUNK: usize = 1 << 20;
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut total = 0u64;
    while total < size {
        let n = CHUNK.min((size - total) as usize);
        let mut v = vec![0u8; n];
        // Touch every page so the memory is really used, not just reserved.
        for i in (0..n).step_by(4096) {
            v[i] = 1;
        }
        held.push(v);
        total += n as u64;
        if total.is_multiple_of(16 << 20) || total == size {
            println!("allocated {} MiB", total >> 20);
        }
    }
    println!("holding {total} bytes");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
        std::hint::black_box(&held);
    }
}

fn busy(args: &Args) -> Outcome {
    let secs = args
        .pos(0)
        .map(|s| {
            s.parse::<f64>()
                .map_err(|_| fail(format!("not seconds: {s}")))
        })
        .transpose()?;
    let threads: usize = args
        .flag("threads")
        .map(|t| t.parse().map_err(|_| fail(format!("--threads: {t}"))))
        .transpose()?
        .unwrap_or(1);
    let deadline = secs.map(|s| std::time::Instant::now() + Duration::from_secs_f64(s));
    println!("burning {threads} CPU(s)");
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let mut x = 0u64;
                loop {
                    for _ in 0..1_000_000 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                        return;
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}

fn sleep(args: &Args) -> Outcome {
    match args.pos(0) {
        None | Some("infinity") => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Some(s) => {
            let secs: f64 = s.parse().map_err(|_| fail(format!("not seconds: {s}")))?;
            std::thread::sleep(Duration::from_secs_f64(secs));
            Ok(())
        }
    }
}

fn exit(args: &Args) -> Outcome {
    let code: i32 = args
        .pos(0)
        .unwrap_or("0")
        .parse()
        .map_err(|_| fail("usage: mtest exit N [--message TEXT]"))?;
    if let Some(m) = args.flag("message") {
        println!("{m}");
        let _ = std::fs::write("/dev/termination-log", m);
    }
    std::process::exit(code)
}

/// A pause process: sleeps for ever and reaps the orphans a shared PID namespace hands it.
fn pause() -> Outcome {
    use rustix::process::{WaitOptions, wait};
    loop {
        match wait(WaitOptions::empty()) {
            Ok(Some(_)) => {}
            // No children (ECHILD): look again later.
            _ => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

/// Acts on SIGTERM and SIGINT. As a container's PID 1 the program would otherwise ignore them
/// (the kernel drops signals PID 1 has no handler for) and every pod would wait out its grace
/// period. `pause` exits 0, as upstream's pause does; every other command ends as if killed by
/// the signal (exit code 128 + signal: 143 for SIGTERM).
fn on_termination(pause: bool) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) else {
        eprintln!("mtest: cannot handle SIGTERM; it will be ignored as PID 1");
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            std::process::exit(if pause { 0 } else { 128 + sig });
        }
    });
}

const USAGE: &str =
    "usage: mtest serve-http|serve-webhook|exit|hog|busy|sleep|dns|tcp|api|pause ...";

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let invoked = argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_default();
    let (cmd, rest) = if invoked == "pause" {
        ("pause".to_string(), &argv[1.min(argv.len())..])
    } else {
        match argv.get(1) {
            Some(c) => (c.clone(), &argv[2..]),
            None => {
                eprintln!("{USAGE}");
                std::process::exit(2);
            }
        }
    };
    let args = Args::parse(rest);
    on_termination(cmd == "pause");
    let outcome = match cmd.as_str() {
        "serve-http" => http::serve(&args),
        "exit" => exit(&args),
        "hog" => hog(&args),
        "busy" => busy(&args),
        "sleep" => sleep(&args),
        "dns" => dns::command(&args),
        "tcp" => tcp::command(&args),
        "api" => api::command(&args),
        "serve-webhook" => webhook::serve(&args),
        "pause" => pause(),
        other => Err(Failure(format!("unknown command {other:?}\n{USAGE}"), 2)),
    };
    if let Err(Failure(msg, code)) = outcome {
        eprintln!("mtest {cmd}: {msg}");
        std::process::exit(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_kubernetes_and_decimal_suffixes() {
        assert_eq!(parse_size("64Mi"), Some(64 << 20));
        assert_eq!(parse_size("1G"), Some(1_000_000_000));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1Xi"), None);
        assert_eq!(parse_size("Mi"), None);
    }

    #[test]
    fn flags_and_positionals_are_told_apart() {
        let a = Args::parse(&[
            "x".into(),
            "--port".into(),
            "80".into(),
            "--n=2".into(),
            "y".into(),
        ]);
        assert_eq!(a.positional, vec!["x", "y"]);
        assert_eq!(
            (a.flag("port"), a.flag("n"), a.flag("z")),
            (Some("80"), Some("2"), None)
        );
    }
}
