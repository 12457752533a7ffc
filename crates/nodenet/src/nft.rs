//! nftables transactions: a script of commands on one table, applied by one `nft -f -` run.
//!
//! `nft -f` applies a whole file as one netlink batch: every command takes effect or none
//! does, and packets never see a half-written ruleset. That is how upstream's knftables
//! applies kube-proxy's syncs, and how every sync here is applied. Each component owns one
//! table and never touches another's (upstream's rule for integrating with kube-proxy).
//!
//! Names of chains and sets may contain `/` and `.` (upstream's service chain names do), so
//! they are written bare; comments are quoted.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::exec;

/// An nftables address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Ip,
    Ip6,
    Inet,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Ip => "ip",
            Family::Ip6 => "ip6",
            Family::Inet => "inet",
        }
    }
}

/// A base chain's hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseChain {
    /// `filter` or `nat`.
    pub kind: &'static str,
    /// `prerouting`, `input`, `forward`, `output`, `postrouting`.
    pub hook: &'static str,
    /// The numeric priority (`dstnat` is -100, `filter` 0, `srcnat` 100).
    pub priority: i32,
}

/// Priorities of the standard hooks, as nft names them.
pub mod priority {
    pub const DSTNAT: i32 = -100;
    pub const FILTER: i32 = 0;
    pub const SRCNAT: i32 = 100;
}

fn quote(comment: &str) -> String {
    format!("\"{}\"", comment.replace(['"', '\\', '\n'], "'"))
}

/// The commands of one transaction on one table.
#[derive(Debug, Clone)]
pub struct Transaction {
    family: Family,
    table: String,
    script: String,
    commands: usize,
}

impl Transaction {
    pub fn new(family: Family, table: &str) -> Self {
        Transaction {
            family,
            table: table.to_string(),
            script: String::new(),
            commands: 0,
        }
    }

    fn line(&mut self, verb: &str, what: &str, rest: std::fmt::Arguments<'_>) {
        use std::fmt::Write;
        let _ = writeln!(
            self.script,
            "{verb} {what} {} {} {rest}",
            self.family.as_str(),
            self.table
        );
        self.commands += 1;
    }

    /// Adds the table (a no-op when it exists).
    pub fn add_table(&mut self, comment: Option<&str>) {
        match comment {
            Some(c) => self.line("add", "table", format_args!("{{ comment {} ; }}", quote(c))),
            None => self.line("add", "table", format_args!("")),
        }
    }

    /// Deletes the table and everything in it. Preceded by [`Transaction::add_table`] it
    /// cannot fail for an absent table.
    pub fn delete_table(&mut self) {
        self.line("delete", "table", format_args!(""));
    }

    /// Adds a chain (a no-op when it exists; a base chain's hook must then be the same).
    pub fn add_chain(&mut self, name: &str, base: Option<BaseChain>) {
        match base {
            Some(b) => self.line(
                "add",
                "chain",
                format_args!(
                    "{name} {{ type {} hook {} priority {} ; }}",
                    b.kind, b.hook, b.priority
                ),
            ),
            None => self.line("add", "chain", format_args!("{name}")),
        }
    }

    /// Adds a regular chain with a comment.
    pub fn add_chain_with_comment(&mut self, name: &str, comment: &str) {
        self.line(
            "add",
            "chain",
            format_args!("{name} {{ comment {} ; }}", quote(comment)),
        );
    }

    pub fn flush_chain(&mut self, name: &str) {
        self.line("flush", "chain", format_args!("{name}"));
    }

    /// Deletes a chain; it must exist and nothing may refer to it any more.
    pub fn delete_chain(&mut self, name: &str) {
        self.line("delete", "chain", format_args!("{name}"));
    }

    /// Appends `rule` to `chain`.
    pub fn add_rule(&mut self, chain: &str, rule: &str) {
        self.line("add", "rule", format_args!("{chain} {rule}"));
    }

    /// Adds a set of `key_type` (`ipv4_addr`, `ipv4_addr . inet_proto . inet_service`).
    pub fn add_set(
        &mut self,
        name: &str,
        key_type: &str,
        flags: &[&str],
        timeout_seconds: Option<u32>,
        comment: Option<&str>,
    ) {
        use std::fmt::Write;
        let mut spec = format!("type {key_type} ;");
        if !flags.is_empty() {
            let _ = write!(spec, " flags {} ;", flags.join(","));
        }
        if let Some(t) = timeout_seconds {
            let _ = write!(spec, " timeout {t}s ;");
        }
        if let Some(c) = comment {
            let _ = write!(spec, " comment {} ;", quote(c));
        }
        self.line("add", "set", format_args!("{name} {{ {spec} }}"));
    }

    /// Adds a map from `key_type` to `value_type` (`verdict` for a verdict map).
    pub fn add_map(&mut self, name: &str, key_type: &str, value_type: &str, comment: Option<&str>) {
        let comment = comment
            .map(|c| format!(" comment {} ;", quote(c)))
            .unwrap_or_default();
        self.line(
            "add",
            "map",
            format_args!("{name} {{ type {key_type} : {value_type} ;{comment} }}"),
        );
    }

    pub fn flush_set(&mut self, name: &str) {
        self.line("flush", "set", format_args!("{name}"));
    }

    pub fn flush_map(&mut self, name: &str) {
        self.line("flush", "map", format_args!("{name}"));
    }

    pub fn delete_set(&mut self, name: &str) {
        self.line("delete", "set", format_args!("{name}"));
    }

    pub fn delete_map(&mut self, name: &str) {
        self.line("delete", "map", format_args!("{name}"));
    }

    /// Adds `key` (with `value` in a map) to set or map `name`. Adding a key a map already
    /// holds with another value fails: delete it first.
    pub fn add_element(
        &mut self,
        name: &str,
        key: &str,
        value: Option<&str>,
        comment: Option<&str>,
    ) {
        let comment = comment
            .map(|c| format!(" comment {}", quote(c)))
            .unwrap_or_default();
        match value {
            Some(v) => self.line(
                "add",
                "element",
                format_args!("{name} {{ {key}{comment} : {v} }}"),
            ),
            None => self.line(
                "add",
                "element",
                format_args!("{name} {{ {key}{comment} }}"),
            ),
        }
    }

    /// Removes `key` from set or map `name`; it must be there.
    pub fn delete_element(&mut self, name: &str, key: &str) {
        self.line("delete", "element", format_args!("{name} {{ {key} }}"));
    }

    /// How many commands the transaction holds.
    pub fn len(&self) -> usize {
        self.commands
    }

    pub fn is_empty(&self) -> bool {
        self.commands == 0
    }

    /// The script `nft -f` reads.
    pub fn script(&self) -> &str {
        &self.script
    }
}

/// The `nft` program.
#[derive(Debug, Clone)]
pub struct Nft {
    program: String,
}

impl Default for Nft {
    fn default() -> Self {
        Nft {
            program: "nft".into(),
        }
    }
}

impl Nft {
    /// `nft` at `program` (a path or a name on `PATH`).
    pub fn new(program: impl Into<String>) -> Self {
        Nft {
            program: program.into(),
        }
    }

    /// Applies `tx` atomically (an empty transaction is not run).
    pub async fn run(&self, tx: &Transaction) -> Result<()> {
        if tx.is_empty() {
            return Ok(());
        }
        exec::run(&self.program, &["-f", "-"], Some(tx.script().as_bytes())).await?;
        Ok(())
    }

    async fn json(&self, args: &[&str]) -> Result<Vec<Value>> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = exec::run(&self.program, &all, None).await?;
        let v: Value = serde_json::from_str(&out.stdout)
            .map_err(|e| Error::NftOutput(format!("{e}: {}", out.stdout)))?;
        match v.get("nftables").and_then(Value::as_array) {
            Some(items) => Ok(items.clone()),
            None => Err(Error::NftOutput(out.stdout)),
        }
    }

    /// The tables in the kernel, as (family, name).
    pub async fn tables(&self) -> Result<Vec<(String, String)>> {
        let items = self.json(&["list", "tables"]).await?;
        Ok(items
            .iter()
            .filter_map(|i| i.get("table"))
            .filter_map(|t| Some((t.get("family")?.as_str()?, t.get("name")?.as_str()?)))
            .map(|(f, n)| (f.to_string(), n.to_string()))
            .collect())
    }

    async fn objects(
        &self,
        what: &str,
        key: &str,
        family: Family,
        table: &str,
    ) -> Result<Vec<String>> {
        let items = self.json(&["list", what, family.as_str()]).await?;
        Ok(items
            .iter()
            .filter_map(|i| i.get(key))
            .filter(|c| c.get("table").and_then(Value::as_str) == Some(table))
            .filter_map(|c| c.get("name").and_then(Value::as_str))
            .map(str::to_string)
            .collect())
    }

    /// The names of the chains of `table`.
    pub async fn chains(&self, family: Family, table: &str) -> Result<Vec<String>> {
        self.objects("chains", "chain", family, table).await
    }

    /// The names of the sets (not maps) of `table`.
    pub async fn sets(&self, family: Family, table: &str) -> Result<Vec<String>> {
        self.objects("sets", "set", family, table).await
    }

    /// Whether `table` exists.
    pub async fn has_table(&self, family: Family, table: &str) -> Result<bool> {
        Ok(self
            .tables()
            .await?
            .iter()
            .any(|(f, n)| f == family.as_str() && n == table))
    }

    /// Deletes `table` if it exists.
    pub async fn delete_table(&self, family: Family, table: &str) -> Result<()> {
        let mut tx = Transaction::new(family, table);
        tx.add_table(None);
        tx.delete_table();
        self.run(&tx).await
    }

    /// The table printed as `nft list table` does (for tests and debugging).
    pub async fn list_table(&self, family: Family, table: &str) -> Result<String> {
        Ok(exec::run(
            &self.program,
            &["list", "table", family.as_str(), table],
            None,
        )
        .await?
        .stdout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_written_for_the_table() {
        let mut tx = Transaction::new(Family::Ip, "kube-proxy");
        tx.add_table(Some("rules for kube-proxy"));
        tx.add_chain(
            "nat-prerouting",
            Some(BaseChain {
                kind: "nat",
                hook: "prerouting",
                priority: priority::DSTNAT,
            }),
        );
        tx.add_map(
            "service-ips",
            "ipv4_addr . inet_proto . inet_service",
            "verdict",
            Some("ClusterIP traffic"),
        );
        tx.add_element(
            "service-ips",
            "10.96.0.1 . tcp . 443",
            Some("goto service-X-default/kubernetes/tcp/https"),
            None,
        );
        tx.add_set(
            "affinity-X",
            "ipv4_addr",
            &["dynamic", "timeout"],
            Some(10800),
            None,
        );
        tx.add_element(
            "no-endpoint-services",
            "10.96.0.2 . tcp . 80",
            Some("drop"),
            Some("a/b:\"p\""),
        );
        assert_eq!(tx.len(), 6);
        assert_eq!(
            tx.script(),
            "add table ip kube-proxy { comment \"rules for kube-proxy\" ; }\n\
             add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }\n\
             add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment \"ClusterIP traffic\" ; }\n\
             add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 443 : goto service-X-default/kubernetes/tcp/https }\n\
             add set ip kube-proxy affinity-X { type ipv4_addr ; flags dynamic,timeout ; timeout 10800s ; }\n\
             add element ip kube-proxy no-endpoint-services { 10.96.0.2 . tcp . 80 comment \"a/b:'p'\" : drop }\n"
        );
    }
}
