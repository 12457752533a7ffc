//! Bar charts as inline SVG, drawn on the server (no script, allowed by the console's content
//! security policy): one bar per period, its figure in the bar's tooltip, and the same figures
//! in a table for screen readers and for copying.

use maud::{Markup, html};

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 180.0;
/// Room for the axis labels.
const LEFT: f64 = 56.0;
const BOTTOM: f64 = 24.0;

/// A "nice" upper bound for an axis whose largest value is `max` (1, 2 or 5 × a power of ten).
pub fn axis_max(max: f64) -> f64 {
    if !max.is_finite() || max <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(max.log10().floor());
    for step in [1.0, 2.0, 5.0, 10.0] {
        if max <= step * magnitude {
            return step * magnitude;
        }
    }
    10.0 * magnitude
}

fn short(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        // Two significant digits of a small figure (0.00012 → "0.00012").
        let decimals = (1 - x.log10().floor() as i32).clamp(1, 9) as usize;
        format!("{x:.decimals$}")
    }
}

/// A bar chart of `points` (label, value) titled `title` in `unit`; `id` names it for
/// `aria-labelledby`.
pub fn bars(id: &str, title: &str, unit: &str, points: &[(String, f64)]) -> Markup {
    let max = axis_max(points.iter().map(|p| p.1).fold(0.0, f64::max));
    let n = points.len().max(1) as f64;
    let plot_w = WIDTH - LEFT;
    let plot_h = HEIGHT - BOTTOM;
    let slot = plot_w / n;
    let bar = (slot * 0.8).max(1.0);
    // Label every bar when there are few, else about every fourth.
    let every = (points.len() / 8).max(1);
    html! {
        figure.chart {
            figcaption id=(id) { (title) " (" (unit) ")" }
            svg viewBox={"0 0 " (WIDTH) " " (HEIGHT)} role="img" aria-labelledby=(id) preserveAspectRatio="xMidYMid meet" {
                line.axis x1=(LEFT) y1=(plot_h) x2=(WIDTH) y2=(plot_h) {}
                line.axis x1=(LEFT) y1="0" x2=(LEFT) y2=(plot_h) {}
                text.tick x=(LEFT - 6.0) y="12" text-anchor="end" { (short(max)) }
                text.tick x=(LEFT - 6.0) y=(plot_h) text-anchor="end" { "0" }
                @for (i, (label, value)) in points.iter().enumerate() {
                    @let h = (value / max * plot_h).clamp(0.0, plot_h);
                    @let x = LEFT + i as f64 * slot + (slot - bar) / 2.0;
                    rect.bar x=(format!("{x:.1}")) y=(format!("{:.1}", plot_h - h)) width=(format!("{bar:.1}")) height=(format!("{h:.1}")) {
                        title { (label) ": " (short(*value)) " " (unit) }
                    }
                    @if i % every == 0 {
                        text.tick x=(format!("{:.1}", x + bar / 2.0)) y=(HEIGHT - 6.0) text-anchor="middle" { (label) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_axis_ends_at_a_round_number_above_the_largest_value() {
        assert_eq!(axis_max(0.0), 1.0);
        assert_eq!(axis_max(0.7), 1.0);
        assert_eq!(axis_max(1.3), 2.0);
        assert_eq!(axis_max(3.0), 5.0);
        assert_eq!(axis_max(64.0), 100.0);
        assert_eq!(axis_max(f64::NAN), 1.0);
        assert_eq!(axis_max(0.000124), 0.0002);
    }

    #[test]
    fn small_figures_keep_two_significant_digits() {
        assert_eq!(short(0.000124), "0.00012");
        assert_eq!(short(0.5), "0.50");
        assert_eq!(short(3.25), "3.2");
        assert_eq!(short(250.0), "250");
    }

    #[test]
    fn each_value_is_a_bar_with_its_figure_as_a_tooltip_and_the_tallest_fills_the_axis() {
        let points = vec![("01:00".to_string(), 0.5), ("02:00".to_string(), 1.0)];
        let svg = bars("cpu", "vCPU", "vCPU·h", &points).into_string();
        assert_eq!(svg.matches("<rect").count(), 2);
        assert!(svg.contains("<title>02:00: 1.0 vCPU·h</title>"), "{svg}");
        assert!(svg.contains(r#"role="img" aria-labelledby="cpu""#));
        // The axis goes to 1: the second bar is the plot's full height.
        assert!(
            svg.contains(&format!(r#"height="{:.1}""#, HEIGHT - BOTTOM)),
            "{svg}"
        );
    }
}
