//! Small helpers to measure and print benchmark figures.

use std::time::Duration;

/// Latency samples.
#[derive(Default, Clone)]
pub struct Samples(pub Vec<Duration>);

impl Samples {
    pub fn percentile(&self, p: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let mut v = self.0.clone();
        v.sort_unstable();
        let idx = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[idx.min(v.len() - 1)]
    }
}

/// Prints the table header.
pub fn header(ours: &str, peer: &str) {
    println!(
        "{:<46} {:>16} {:>16} {:>10}",
        "benchmark", ours, peer, "ours÷peer"
    );
}

/// Prints one line: our figure, the peer's, and ours ÷ peer. `better` says which direction wins.
pub fn line(what: &str, ours: f64, peer: f64, unit: &str, better: Better) {
    let ratio = if peer == 0.0 { f64::NAN } else { ours / peer };
    let hint = match better {
        Better::Higher => "(higher is better)",
        Better::Lower => "(lower is better)",
    };
    println!(
        "{what:<46} {:>16} {:>16} {ratio:>9.2}x {hint}",
        format!("{ours:.1} {unit}"),
        format!("{peer:.1} {unit}")
    );
}

#[derive(Clone, Copy)]
pub enum Better {
    Higher,
    Lower,
}
