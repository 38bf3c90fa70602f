//! Plain-text tables: columns padded to their widest cell, every cell on
//! one line with its terminal control characters shown escaped.

/// A table being built.
#[derive(Debug, Default)]
pub(crate) struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new<const N: usize>(header: [&str; N]) -> Self {
        Table::with_first(None, header)
    }

    /// A table whose header is `header`, after a `first` column when one
    /// is given (a shard column, for a sharded queue).
    pub(crate) fn with_first<const N: usize>(first: Option<&str>, header: [&str; N]) -> Self {
        Table {
            rows: vec![first.into_iter().chain(header).map(str::to_owned).collect()],
        }
    }

    /// Adds a row; each cell is [escaped](crate::escape::line).
    pub(crate) fn row(&mut self, cells: impl IntoIterator<Item = String>) {
        let escaped = cells
            .into_iter()
            .map(|c| crate::escape::line(&c).into_owned());
        self.rows.push(escaped.collect());
    }

    /// The table as text, each line without trailing spaces.
    pub(crate) fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let line: String = (row.iter().zip(&widths))
                .map(|(cell, width)| format!("{cell:<w$}", w = width + 2))
                .collect();
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `text` cut to `max` characters with an ellipsis.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_is_printed_on_one_line_with_no_control_character() {
        let mut table = Table::new(["ID", "REASON"]);
        table.row(vec![
            "job\u{1b}[2K".into(),
            "boom\u{1b}]0;title\u{7}\r\nforged\tline \u{9b}31m \u{202e}txt".into(),
        ]);
        let text = table.render();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.lines()
                .all(|l| !l.chars().any(crate::escape::is_unsafe))
        );
        assert!(text.contains(r"job\e[2K"), "{text}");
        assert!(text.contains(r"boom\e]0;title\x07\r\nforged\tline \u{9b}31m \u{202e}txt"));
    }
}
