//! The per-minute chart of a queue's settled jobs, drawn as inline SVG on
//! the server (no script on the page).

use maud::{Markup, html};

use crate::fleet::Counts;

const WIDTH: usize = 600;
const HEIGHT: usize = 90;

/// One outcome drawn: its label, its colour, and its count in a minute.
type Series = (&'static str, &'static str, fn(&Counts) -> u64);

/// The outcomes drawn, bottom up.
const SERIES: [Series; 4] = [
    ("finished", "#1a7f37", |c| c.finished),
    ("retried", "#bf8700", |c| c.retried),
    ("deferred", "#1f6feb", |c| c.deferred),
    ("dead-lettered", "#b3261e", |c| c.dead_lettered),
];

/// A stacked bar per minute, oldest left, with a legend of the hour's
/// totals; `id` names the chart for tests and links.
pub(crate) fn minutes(id: &str, minutes: &[(i64, Counts)]) -> Markup {
    let sums = minutes.iter().map(|(_, c)| c.sum());
    let peak = sums.max().unwrap_or(0).max(1);
    let bar = WIDTH / minutes.len().max(1);
    let mut hour = Counts::default();
    // Each bar's segments, bottom up: x, y, height, colour, count, label.
    let mut segments = Vec::new();
    for (i, (_, counts)) in minutes.iter().enumerate() {
        hour += *counts;
        let mut y = HEIGHT;
        for (label, colour, count) in SERIES {
            let n = count(counts);
            if n > 0 {
                let h = ((n as f64 / peak as f64) * (HEIGHT as f64 - 4.0)).ceil() as usize;
                let h = h.clamp(1, y);
                y -= h;
                segments.push((i * bar + 1, y, h, colour, n, label));
            }
        }
    }
    let full = HEIGHT + 14;
    html! {
        svg id=(id) class="chart" width=(WIDTH) height=(full) viewBox={ "0 0 " (WIDTH) " " (full) }
            role="img" aria-label="jobs settled per minute over the last hour"
            xmlns="http://www.w3.org/2000/svg" {
            rect x="0" y="0" width=(WIDTH) height=(HEIGHT) fill="#ffffff" stroke="#e3e6ea" {}
            @for (x, y, height, colour, count, label) in &segments {
                rect x=(x) y=(y) width=(bar.saturating_sub(2).max(1)) height=(height)
                    fill=(colour) {
                    title { (count) " " (label) }
                }
            }
            text x="2" y=(HEIGHT + 12) font-size="10" fill="#5b6573" { "-60 min" }
            text x=(WIDTH - 2) y=(HEIGHT + 12) font-size="10" fill="#5b6573" text-anchor="end" {
                "now · peak " (peak) "/min"
            }
        }
        div.note {
            @for (label, colour, count) in SERIES {
                svg width="10" height="10" xmlns="http://www.w3.org/2000/svg" {
                    rect width="10" height="10" fill=(colour) {}
                }
                " " (label) " " (count(&hour)) "\u{a0} "
            }
            "in the last hour"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_segment_per_outcome_and_minute() {
        let mut minutes = vec![(0, Counts::default()); 60];
        minutes[59].1.finished = 10;
        minutes[59].1.dead_lettered = 2;
        minutes[3].1.retried = 1;
        let svg = minutes_svg(&minutes);
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.contains("10 finished"));
        assert!(svg.contains("2 dead-lettered"));
        assert!(svg.contains("peak 12/min"));
        assert!(svg.contains("finished 10"));
    }

    fn minutes_svg(m: &[(i64, Counts)]) -> String {
        minutes("chart-q", m).into_string()
    }
}
