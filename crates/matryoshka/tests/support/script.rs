//! kubectl scripts: short end-to-end scenarios written as the commands a user types and what
//! kubectl must print, each run on a fresh logical cluster, so one failing script does not hide
//! the others.
//!
//! A script is a text file. Lines:
//!
//! - `# …` a comment; blank lines are ignored.
//! - `$ ARGS` runs kubectl with ARGS (split like a shell: `'…'` and `"…"` quote). The
//!   expectations below it apply to that run; without an `exit` line it must exit 0.
//! - `$~ ARGS` the same, retried until every expectation below it holds (up to 30 s): for
//!   what controllers reach asynchronously.
//! - `> TEXT` stdout contains TEXT; `!> TEXT` it does not; `2> TEXT` stderr contains TEXT.
//! - `exit N` the run exits with N.
//! - `save NAME` writes the last run's stdout to the file NAME of the script's directory;
//!   `sub NAME FROM TO` replaces FROM by TO in that file (quoted like arguments);
//!   `copy FIXTURE NAME` copies a shared fixture into the script's directory.
//! - `file NAME` … `end` writes the lines between them to NAME.
//! - `bg ARGS` starts kubectl in the background (`get -w`); `bg> TEXT` waits up to 20 s until
//!   its stdout contains TEXT.
//!
//! In arguments and texts `{dir}` is the script's directory (where files are written),
//! `{fixtures}` the directory of the scripts, whose other files are shared fixtures, and
//! `{cluster}` the logical cluster the script runs on (`kubectl get --raw` takes a path from the
//! server's root, not from the cluster's `/clusters/<name>` prefix).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::support::{Kubectl, Run};

/// One parsed step.
#[derive(Debug, Clone)]
enum Step {
    Run {
        args: Vec<String>,
        retry: bool,
        line: usize,
        expect: Vec<Expect>,
    },
    Save(String),
    Sub(String, String, String),
    Copy(String, String),
    File(String, String),
    Background(Vec<String>),
    BackgroundOut(String, usize),
}

#[derive(Debug, Clone)]
enum Expect {
    Out(String),
    NotOut(String),
    Err(String),
    Exit(i32),
}

/// A parsed script.
#[derive(Debug, Clone)]
pub struct Script {
    pub name: String,
    steps: Vec<Step>,
}

/// Splits a command line like a shell: whitespace separates, `'…'` and `"…"` quote (a
/// backslash escapes `"` and `\` inside double quotes).
pub fn split(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(format!("unclosed ' in {line}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => return Err(format!("unclosed \" in {line}")),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(format!("unclosed \" in {line}")),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

impl Script {
    pub fn parse(name: &str, text: &str) -> Result<Script, String> {
        let mut steps: Vec<Step> = Vec::new();
        let mut lines = text.lines().enumerate();
        while let Some((i, raw)) = lines.next() {
            let line = raw.trim();
            let at = |e: String| format!("{name}:{}: {e}", i + 1);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let expect = |e: Expect, steps: &mut Vec<Step>| -> Result<(), String> {
                match steps.last_mut() {
                    Some(Step::Run { expect, .. }) => {
                        expect.push(e);
                        Ok(())
                    }
                    _ => Err(format!("{name}:{}: an expectation without a run", i + 1)),
                }
            };
            if let Some(rest) = line.strip_prefix("$~ ") {
                steps.push(Step::Run {
                    args: split(rest).map_err(at)?,
                    retry: true,
                    line: i + 1,
                    expect: Vec::new(),
                });
            } else if let Some(rest) = line.strip_prefix("$ ") {
                steps.push(Step::Run {
                    args: split(rest).map_err(at)?,
                    retry: false,
                    line: i + 1,
                    expect: Vec::new(),
                });
            } else if let Some(t) = line.strip_prefix("!> ") {
                expect(Expect::NotOut(t.to_string()), &mut steps)?;
            } else if let Some(t) = line.strip_prefix("2> ") {
                expect(Expect::Err(t.to_string()), &mut steps)?;
            } else if let Some(t) = line.strip_prefix("bg> ") {
                steps.push(Step::BackgroundOut(t.to_string(), i + 1));
            } else if let Some(t) = line.strip_prefix("> ") {
                expect(Expect::Out(t.to_string()), &mut steps)?;
            } else if let Some(n) = line.strip_prefix("exit ") {
                let code = n
                    .trim()
                    .parse()
                    .map_err(|_| at(format!("bad exit code {n}")))?;
                expect(Expect::Exit(code), &mut steps)?;
            } else if let Some(f) = line.strip_prefix("save ") {
                steps.push(Step::Save(f.trim().to_string()));
            } else if let Some(rest) = line.strip_prefix("sub ") {
                let parts = split(rest).map_err(at)?;
                let [file, from, to] = parts.as_slice() else {
                    return Err(at("sub takes a file, a text and its replacement".into()));
                };
                steps.push(Step::Sub(file.clone(), from.clone(), to.clone()));
            } else if let Some(rest) = line.strip_prefix("copy ") {
                let parts = split(rest).map_err(at)?;
                let [from, to] = parts.as_slice() else {
                    return Err(at("copy takes a fixture and a file name".into()));
                };
                steps.push(Step::Copy(from.clone(), to.clone()));
            } else if let Some(f) = line.strip_prefix("file ") {
                let mut body = String::new();
                let mut closed = false;
                for (_, l) in lines.by_ref() {
                    if l.trim_end() == "end" {
                        closed = true;
                        break;
                    }
                    body.push_str(l);
                    body.push('\n');
                }
                if !closed {
                    return Err(at(format!("file {f} has no end")));
                }
                steps.push(Step::File(f.trim().to_string(), body));
            } else if let Some(rest) = line.strip_prefix("bg ") {
                steps.push(Step::Background(split(rest).map_err(at)?));
            } else {
                return Err(at(format!("unknown line {line:?}")));
            }
        }
        Ok(Script {
            name: name.to_string(),
            steps,
        })
    }

    /// Every script of a directory (`*.kubectl`), sorted by name.
    pub fn load_dir(dir: &Path) -> Vec<Script> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("the scripts directory")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "kubectl"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| {
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(p).expect("a script");
                Script::parse(&name, &text).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect()
    }

    /// Runs the script with `k` on `cluster`, files in `dir`; the first failure, if any.
    pub fn run(
        &self,
        k: &Kubectl,
        dir: &Path,
        fixtures: &Path,
        cluster: &str,
    ) -> Result<(), String> {
        let vars = |s: &str| {
            s.replace("{dir}", &dir.to_string_lossy())
                .replace("{fixtures}", &fixtures.to_string_lossy())
                .replace("{cluster}", cluster)
        };
        let mut last: Option<Run> = None;
        let mut bg: Option<(Child, String)> = None;
        let result = (|| {
            for step in &self.steps {
                match step {
                    Step::Run {
                        args,
                        retry,
                        line,
                        expect,
                    } => {
                        let args: Vec<String> = args.iter().map(|a| vars(a)).collect();
                        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                        let deadline = Instant::now() + Duration::from_secs(30);
                        loop {
                            let r = k.run(&argv);
                            match check(&r, expect, &vars) {
                                Ok(()) => {
                                    last = Some(r);
                                    break;
                                }
                                Err(e) if *retry && Instant::now() < deadline => {
                                    let _ = e;
                                    std::thread::sleep(Duration::from_millis(200));
                                }
                                Err(e) => {
                                    return Err(format!(
                                        "line {line}: `{}`: {e}\nstdout:\n{}\nstderr:\n{}",
                                        r.cmdline, r.stdout, r.stderr
                                    ));
                                }
                            }
                        }
                    }
                    Step::Save(f) => {
                        let out = last.as_ref().map(|r| r.stdout.clone()).unwrap_or_default();
                        std::fs::write(dir.join(f), out).map_err(|e| format!("save {f}: {e}"))?;
                    }
                    Step::Sub(f, from, to) => {
                        let path = dir.join(f);
                        let text =
                            std::fs::read_to_string(&path).map_err(|e| format!("sub {f}: {e}"))?;
                        if !text.contains(from.as_str()) {
                            return Err(format!("sub {f}: no {from:?} in it"));
                        }
                        std::fs::write(&path, text.replace(from.as_str(), to))
                            .map_err(|e| format!("sub {f}: {e}"))?;
                    }
                    Step::Copy(from, to) => {
                        std::fs::copy(fixtures.join(from), dir.join(to))
                            .map_err(|e| format!("copy {from}: {e}"))?;
                    }
                    Step::File(f, body) => {
                        std::fs::write(dir.join(f), vars(body))
                            .map_err(|e| format!("file {f}: {e}"))?;
                    }
                    Step::Background(args) => {
                        let args: Vec<String> = args.iter().map(|a| vars(a)).collect();
                        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
                        bg = Some((k.spawn(&argv), String::new()));
                    }
                    Step::BackgroundOut(text, line) => {
                        let Some((child, seen)) = bg.as_mut() else {
                            return Err(format!("line {line}: no background kubectl"));
                        };
                        let mut stdout = child.stdout.take().ok_or("no stdout")?;
                        let deadline = Instant::now() + Duration::from_secs(20);
                        let mut buf = [0u8; 4096];
                        while !seen.contains(text.as_str()) && Instant::now() < deadline {
                            match stdout.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
                            }
                        }
                        child.stdout = Some(stdout);
                        if !seen.contains(text.as_str()) {
                            return Err(format!(
                                "line {line}: the background kubectl never printed {text:?}:\n{seen}"
                            ));
                        }
                    }
                }
            }
            Ok(())
        })();
        if let Some((mut child, _)) = bg {
            let _ = child.kill();
            let _ = child.wait();
        }
        result
    }
}

fn check(r: &Run, expect: &[Expect], vars: &dyn Fn(&str) -> String) -> Result<(), String> {
    let want_code = expect
        .iter()
        .find_map(|e| match e {
            Expect::Exit(c) => Some(*c),
            _ => None,
        })
        .unwrap_or(0);
    if r.code != want_code {
        return Err(format!("exit code {} instead of {want_code}", r.code));
    }
    for e in expect {
        match e {
            Expect::Out(t) if !r.stdout.contains(&vars(t)) => {
                return Err(format!("stdout lacks {t:?}"));
            }
            Expect::NotOut(t) if r.stdout.contains(&vars(t)) => {
                return Err(format!("stdout has {t:?}"));
            }
            Expect::Err(t) if !r.stderr.contains(&vars(t)) => {
                return Err(format!("stderr lacks {t:?}"));
            }
            _ => {}
        }
    }
    Ok(())
}

#[test]
fn command_lines_split_like_a_shell() {
    assert_eq!(
        split(r#"patch cm x -p '{"a": "b c"}' --type "merge" x"y"z"#).unwrap(),
        [
            "patch",
            "cm",
            "x",
            "-p",
            r#"{"a": "b c"}"#,
            "--type",
            "merge",
            "xyz"
        ]
    );
    assert!(split("get 'open").is_err());
}

#[test]
fn scripts_parse_runs_expectations_and_files() {
    let s = Script::parse(
        "t",
        "# c\n$ get cm\n> NAME\n!> gone\n2> warn\nexit 1\nfile a.yaml\nx: 1\nend\nsave b\nsub b 'x' 'y'\n",
    )
    .unwrap();
    assert_eq!(s.steps.len(), 4);
    assert!(Script::parse("t", "> orphan\n").is_err());
    assert!(Script::parse("t", "file a\nno end\n").is_err());
    assert!(Script::parse("t", "frobnicate\n").is_err());
}
