//! The per-minute chart of a queue's settled jobs, drawn as inline SVG on
//! the server (no script on the page).

use std::fmt::Write as _;

use crate::fleet::Counts;
use crate::web::html::esc;

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
pub(crate) fn minutes(id: &str, minutes: &[(i64, Counts)]) -> String {
    let peak = minutes
        .iter()
        .map(|(_, c)| c.sum())
        .max()
        .unwrap_or(0)
        .max(1);
    let bar = WIDTH / minutes.len().max(1);
    let mut svg = format!(
        "<svg id=\"{}\" class=chart width=\"{WIDTH}\" height=\"{}\" viewBox=\"0 0 {WIDTH} {}\" \
         role=\"img\" aria-label=\"jobs settled per minute over the last hour\" \
         xmlns=\"http://www.w3.org/2000/svg\">",
        esc(id),
        HEIGHT + 14,
        HEIGHT + 14
    );
    let _ = write!(
        svg,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"#ffffff\" stroke=\"#e3e6ea\"/>"
    );
    for (i, (_, counts)) in minutes.iter().enumerate() {
        let mut y = HEIGHT;
        for (label, colour, count) in SERIES {
            let n = count(counts);
            if n == 0 {
                continue;
            }
            let h = ((n as f64 / peak as f64) * (HEIGHT as f64 - 4.0)).ceil() as usize;
            let h = h.clamp(1, y);
            y -= h;
            let _ = write!(
                svg,
                "<rect x=\"{}\" y=\"{y}\" width=\"{}\" height=\"{h}\" fill=\"{colour}\"><title>{n} {label}</title></rect>",
                i * bar + 1,
                bar.saturating_sub(2).max(1),
            );
        }
    }
    let _ = write!(
        svg,
        "<text x=\"2\" y=\"{}\" font-size=\"10\" fill=\"#5b6573\">-60 min</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#5b6573\" text-anchor=\"end\">now · peak {peak}/min</text></svg>",
        HEIGHT + 12,
        WIDTH - 2,
        HEIGHT + 12
    );
    let mut hour = Counts::default();
    for (_, c) in minutes {
        hour += *c;
    }
    let mut legend = String::from("<div class=note>");
    for (label, colour, count) in SERIES {
        let _ = write!(
            legend,
            "<svg width=\"10\" height=\"10\" xmlns=\"http://www.w3.org/2000/svg\"><rect width=\"10\" height=\"10\" fill=\"{colour}\"/></svg> {label} {} &nbsp; ",
            count(&hour)
        );
    }
    legend.push_str("in the last hour</div>");
    svg + &legend
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
        minutes("chart-q", m)
    }
}
