//! Table cells that read the same in JupyterLab whether the notebook is trusted or not.
//!
//! Every rule a cell needs is inline: JupyterLab's own `td{text-align:right}` beats a `<style>`
//! block, and an untrusted notebook loses the block altogether. The sanitiser keeps inline
//! `text-align`, `vertical-align`, `white-space`, `min-width` and `max-width` in px/em units (not
//! `ch`, and not `overflow-wrap:anywhere`), so widths are in em: a monospace character is 0.6 em.
//! Padding is inline and small, and number headings wrap at spaces: a `%share` table must fit the
//! output area of a 1024-pixel window with JupyterLab's file browser open (about 590 pixels).
//! Long words are never broken anywhere: device strings get `<wbr>` after `/` and `:`, so they
//! break only there or at spaces, and a column cannot shrink below the widths set here.

use super::escape;

/// The table itself: monospace, so that widths in em hold for every cell.
pub const TABLE_STYLE: &str = "font-family:monospace;font-size:12px";

/// Narrowest a text column may be: ten monospace characters (0.6 em each) and a little slack.
pub const TEXT_MIN: &str = "min-width:6.1em";

/// A text cell: left-aligned, at least [`TEXT_MIN`] wide, wrapping only at spaces and `<wbr>`.
pub const TEXT_STYLE: &str = "text-align:left;vertical-align:top;min-width:6.1em;white-space:normal;padding:2px 4px";
/// A long text cell (a reason): wraps at spaces inside a bounded width, never narrower than a
/// text column, so a reason reads as a few lines instead of a column of fragments.
pub const LONG_TEXT_STYLE: &str =
    "text-align:left;vertical-align:top;min-width:6.1em;max-width:26em;white-space:normal;padding:2px 4px";
/// A number: right-aligned and never wrapped.
pub const NUM_STYLE: &str = "text-align:right;vertical-align:top;white-space:nowrap;padding:2px 4px";
/// A number column's heading: right-aligned, wrapping at spaces (`bytes moved (KiB)` is wider
/// than any number under it).
pub const NUM_HEAD_STYLE: &str = "text-align:right;vertical-align:bottom;white-space:normal;padding:2px 4px";
/// The line under a row with what can be long (devices, pointers, contexts, memory, streams).
pub const DETAIL_STYLE: &str =
    "text-align:left;vertical-align:top;white-space:normal;color:#555;font-size:11px;padding:0 4px 4px 2em";

/// Text escaped for HTML with a `<wbr>` after every `/` and `:`, where a device string such as
/// `/job:localhost/replica:0/task:0/device:CPU:0` may break (and nowhere else but spaces).
pub fn breakable(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for c in text.chars() {
        let mut buf = [0u8; 4];
        out.push_str(&escape(c.encode_utf8(&mut buf)));
        if c == '/' || c == ':' {
            out.push_str("<wbr>");
        }
    }
    out
}

/// `<th>` of a text column.
pub fn th_text(label: &str) -> String {
    format!("<th style=\"{TEXT_STYLE}\">{}</th>", escape(label))
}

/// `<th>` of a number column (class `num` for the `<style>` block and tools).
pub fn th_num(label: &str) -> String {
    format!("<th class=\"num\" style=\"{NUM_HEAD_STYLE}\">{}</th>", escape(label))
}

/// `<td>` of text given as HTML (already escaped), with extra inline style after the layout's.
pub fn td_text(html: &str, extra_style: &str) -> String {
    format!("<td style=\"{TEXT_STYLE}{}\">{html}</td>", sep(extra_style))
}

/// `<td>` of a long text given as HTML (already escaped).
pub fn td_long(html: &str) -> String {
    format!("<td style=\"{LONG_TEXT_STYLE}\">{html}</td>")
}

/// `<td>` of a number given as HTML (already escaped), with extra inline style after the layout's.
pub fn td_num(html: &str, extra_style: &str) -> String {
    format!("<td class=\"num\" style=\"{NUM_STYLE}{}\">{html}</td>", sep(extra_style))
}

fn sep(extra: &str) -> String {
    if extra.is_empty() { String::new() } else { format!(";{extra}") }
}

/// A detail line under a row, spanning its `columns`: `label value · label value`, each value
/// breakable at `/`, `:` and spaces. Empty values are left out; no pair, no line.
pub fn detail_row(columns: usize, pairs: &[(&str, String)]) -> String {
    let items: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(label, v)| format!("<span style=\"white-space:nowrap\">{}</span> {}", escape(label), breakable(v)))
        .collect();
    if items.is_empty() {
        return String::new();
    }
    format!(
        "<tr class=\"gpushare-detail\"><td colspan=\"{columns}\" style=\"{DETAIL_STYLE}\">{}</td></tr>",
        items.join(" · ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_strings_break_only_at_slashes_and_colons() {
        assert_eq!(
            breakable("/job:localhost/replica:0"),
            "/<wbr>job:<wbr>localhost/<wbr>replica:<wbr>0"
        );
        assert_eq!(breakable("a<b & c"), "a&lt;b &amp; c");
    }

    #[test]
    fn alignment_and_widths_are_inline_in_em() {
        assert!(td_text("x", "").contains("text-align:left") && td_text("x", "").contains(TEXT_MIN));
        assert!(td_num("1", "").contains("text-align:right"));
        assert!(th_num("t").starts_with("<th class=\"num\" style=\"text-align:right"));
        // The untrusted sanitiser drops these, so nothing may rely on them.
        for style in [TEXT_STYLE, LONG_TEXT_STYLE, NUM_STYLE, NUM_HEAD_STYLE, DETAIL_STYLE] {
            assert!(!style.contains("ch;") && !style.contains("anywhere"), "{style}");
        }
    }

    #[test]
    fn a_detail_row_leaves_out_empty_values() {
        assert_eq!(detail_row(8, &[("memory", String::new())]), "");
        let row = detail_row(8, &[("devices", "cpu → /job:x".into()), ("memory", String::new())]);
        assert!(row.contains("colspan=\"8\"") && row.contains("/<wbr>job:<wbr>x") && !row.contains("memory"));
    }
}
