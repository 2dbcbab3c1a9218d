//! Units of a column, and the aligned plain-text table the columns go into.

use super::rows::PathRow;
use crate::render::units;

pub use units::{ByteUnit, byte_unit_for, bytes_in, size_label};

/// Bandwidth in GB/s (decimal, as hardware is quoted), three significant figures.
pub fn gbps(bytes_per_second: f64) -> String {
    units::sig_figs(bytes_per_second / 1e9, 3)
}

/// One time unit for a set of columns: chosen from the smallest value of all of them.
pub(super) fn time_unit(rows: &[&PathRow]) -> units::TimeUnit {
    let values: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.timing.as_ref())
        .flat_map(|t| [t.median, t.min])
        .chain(rows.iter().filter_map(|r| r.device_timing.as_ref()).map(|t| t.median))
        .collect();
    units::time_unit_for(&values)
}

pub(super) fn dash() -> String {
    "-".into()
}

/// Aligned plain-text table: `right` marks the columns of numbers.
pub(crate) fn text_table(header: &[String], body: &[Vec<String>], right: &[bool]) -> String {
    let keep: Vec<bool> = (0..header.len())
        .map(|c| !header[c].is_empty() || body.iter().any(|row| !row[c].is_empty()))
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| body.iter().map(|row| row[c].chars().count()).chain([header[c].chars().count()]).max().unwrap_or(0))
        .collect();
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .enumerate()
            .filter(|(c, _)| keep[*c])
            .map(|(c, s)| if right[c] { format!("{s:>w$}", w = widths[c]) } else { format!("{s:<w$}", w = widths[c]) })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(header);
    for row in body {
        out.push('\n');
        out.push_str(&line(row));
    }
    out
}
