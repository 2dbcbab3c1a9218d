//! Notebook parameters (`-p key=value`), injected papermill-style as Python literals.
//!
//! A value never reaches the kernel as raw code: it becomes an `int`, `float`, `bool` or `None`
//! literal when it reads exactly like one, and otherwise a string literal with every quote,
//! backslash, control character and invisible or bidirectional code point escaped.

use serde_json::{Value, json};

use super::KernelError;
use super::notebook::{Notebook, cell_tags};

/// The tag of the cell whose defaults the parameters override.
pub const PARAMETERS_TAG: &str = "parameters";
/// The tag of the cell gpushare (and papermill) inserts.
pub const INJECTED_TAG: &str = "injected-parameters";

/// A Python literal.
#[derive(Clone, Debug, PartialEq)]
pub enum PyLiteral {
    /// Decimal digits as written (Python ints have no size limit, so they are never parsed).
    Int(String),
    /// A float literal as written, or `inf`/`nan` spelled through `float(...)`.
    Float(String),
    Bool(bool),
    None,
    Str(String),
}

impl PyLiteral {
    /// Read a command-line value: `True`/`False`/`None`, a decimal int, a float, else a string.
    ///
    /// Ints with leading zeros (`007`, `01234`) stay strings: Python rejects them as literals
    /// and they are usually identifiers such as postcodes. `inf`, `-inf` and `nan` become floats,
    /// as in papermill.
    pub fn parse(value: &str) -> Self {
        match value {
            "True" => return Self::Bool(true),
            "False" => return Self::Bool(false),
            "None" => return Self::None,
            _ => {}
        }
        let unsigned = value.strip_prefix(['-', '+']).unwrap_or(value);
        let sign = if value.starts_with('-') { "-" } else { "" };
        if is_digits(unsigned) && (unsigned == "0" || !unsigned.starts_with('0')) {
            return Self::Int(format!("{sign}{unsigned}"));
        }
        if is_float_literal(unsigned) {
            return Self::Float(format!("{sign}{unsigned}"));
        }
        match unsigned.to_ascii_lowercase().as_str() {
            "inf" | "infinity" => Self::Float(format!("float('{sign}inf')")),
            "nan" => Self::Float("float('nan')".into()),
            _ => Self::Str(value.to_string()),
        }
    }

    /// Python source for this value.
    pub fn render(&self) -> String {
        match self {
            Self::Int(s) | Self::Float(s) => s.clone(),
            Self::Bool(true) => "True".into(),
            Self::Bool(false) => "False".into(),
            Self::None => "None".into(),
            Self::Str(s) => python_str_literal(s),
        }
    }
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `digits.digits`, `digits.`, `.digits`, each with an optional exponent, or `digits` + exponent.
fn is_float_literal(s: &str) -> bool {
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (int.is_empty() || is_digits(int))
                && (frac.is_empty() || is_digits(frac))
                && !(int.is_empty() && frac.is_empty())
        }
        None => is_digits(mantissa) && exponent.is_some(),
    };
    let exponent_ok = exponent.is_none_or(|e| is_digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

/// A Python string literal for `s` that means exactly `s`.
///
/// Printable text (accents, CJK, emoji) is kept readable; what could change how the cell reads
/// or runs is escaped: quotes, backslashes, C0/C1 controls, line and paragraph separators, the
/// BOM, zero-width characters and bidirectional overrides ("Trojan Source", CVE-2021-42574).
pub fn python_str_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0'..='\x1f' | '\x7f'..='\u{9f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Whether `name` can be assigned to in Python (an identifier that is not a keyword): a letter
/// or `_`, then letters, digits and `_`, by Unicode's XID classes as Python's tokenizer reads
/// them. `char::is_alphanumeric` let `x²` through (² is numeric but no identifier character),
/// and the kernel raised a SyntaxError on the injected cell.
pub fn is_python_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first == '_' || unicode_ident::is_xid_start(first))
        && chars.all(unicode_ident::is_xid_continue)
        && !PYTHON_KEYWORDS.contains(&name)
}

/// One `name = value` parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Parameter {
    pub name: String,
    pub value: PyLiteral,
}

impl Parameter {
    /// Parse `key=value`; `raw` keeps the value a string whatever it looks like (`-r`).
    pub fn parse(assignment: &str, raw: bool) -> Result<Self, KernelError> {
        let (name, value) = assignment.split_once('=').ok_or_else(|| {
            KernelError::InvalidParameter(format!("`{assignment}` is not of the form key=value"))
        })?;
        let name = name.trim();
        if !is_python_identifier(name) {
            return Err(KernelError::InvalidParameter(format!(
                "`{name}` is not a Python variable name"
            )));
        }
        let value = if raw {
            PyLiteral::Str(value.to_string())
        } else {
            PyLiteral::parse(value)
        };
        Ok(Self {
            name: name.to_string(),
            value,
        })
    }
}

/// Source of the injected cell.
pub fn parameters_source(params: &[Parameter]) -> String {
    let mut source = String::from("# Parameters\n");
    for p in params {
        source.push_str(&format!("{} = {}\n", p.name, p.value.render()));
    }
    source
}

/// What `inject` did, for the caller to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injected {
    /// After the cell tagged `parameters` at this index.
    AfterParameters(usize),
    /// In place of the cell tagged `injected-parameters` at this index, which an earlier run left.
    Replaced(usize),
    /// At the top, because no cell is tagged `parameters`.
    AtTop,
}

/// Insert a cell tagged `injected-parameters` as papermill's `parameterize_notebook` does: in
/// place of the first injected cell an earlier run left (wherever it stands), else right after
/// the cell tagged `parameters`, else at the top.
pub fn inject(nb: &mut Notebook, params: &[Parameter]) -> Injected {
    let with_ids = nb.minor() >= 5;
    let cells = nb.cells_mut();
    // Any cell can carry either tag, a markdown one too (papermill's
    // `find_first_tagged_cell_index` looks at every cell).
    let first_tagged = |tag: &str| cells.iter().position(|c| cell_tags(c).contains(&tag));
    let stale = first_tagged(INJECTED_TAG);
    let anchor = first_tagged(PARAMETERS_TAG);
    let mut cell = json!({
        "cell_type": "code",
        "execution_count": null,
        "metadata": {"tags": [INJECTED_TAG]},
        "outputs": [],
        "source": parameters_source(params),
    });
    if with_ids {
        // nbformat 4.5 requires ids.
        cell["id"] = Value::String(super::notebook::new_cell_id());
    }
    if let Some(i) = stale {
        cells[i] = cell;
        return Injected::Replaced(i);
    }
    match anchor {
        Some(i) => {
            cells.insert(i + 1, cell);
            Injected::AfterParameters(i)
        }
        None => {
            cells.insert(0, cell);
            Injected::AtTop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_the_literal_they_look_like() {
        assert_eq!(PyLiteral::parse("42").render(), "42");
        assert_eq!(PyLiteral::parse("-7").render(), "-7");
        assert_eq!(PyLiteral::parse("+7").render(), "7");
        assert_eq!(
            PyLiteral::parse("123456789012345678901234567890").render(),
            "123456789012345678901234567890"
        );
        assert_eq!(PyLiteral::parse("2.5").render(), "2.5");
        assert_eq!(PyLiteral::parse("1e-5").render(), "1e-5");
        assert_eq!(PyLiteral::parse(".5").render(), ".5");
        assert_eq!(PyLiteral::parse("-inf").render(), "float('-inf')");
        assert_eq!(PyLiteral::parse("True").render(), "True");
        assert_eq!(PyLiteral::parse("None").render(), "None");
        assert_eq!(PyLiteral::parse("true").render(), "'true'");
        assert_eq!(PyLiteral::parse("007").render(), "'007'");
        assert_eq!(PyLiteral::parse("0").render(), "0");
        assert_eq!(PyLiteral::parse("1.2.3").render(), "'1.2.3'");
        assert_eq!(PyLiteral::parse("e5").render(), "'e5'");
        assert_eq!(PyLiteral::parse(".").render(), "'.'");
        assert_eq!(PyLiteral::parse(" 5").render(), "' 5'");
        assert_eq!(PyLiteral::parse("").render(), "''");
        assert_eq!(PyLiteral::parse("1_000").render(), "'1_000'");
    }

    #[test]
    fn strings_are_escaped_safely() {
        assert_eq!(python_str_literal(r#"it's "x" \ y"#), r#"'it\'s "x" \\ y'"#);
        assert_eq!(python_str_literal("a\nb\r\tc\0"), r"'a\nb\r\tc\x00'");
        assert_eq!(python_str_literal("ünï 日本 🚀"), "'ünï 日本 🚀'");
        assert_eq!(
            python_str_literal("x\u{2028}y\u{202e}z\u{feff}\u{85}"),
            r"'x\u2028y\u202ez\ufeff\x85'"
        );
        // Code disguised as a value stays inside the string.
        assert_eq!(
            python_str_literal("'); import os; ('"),
            r"'\'); import os; (\''"
        );
    }

    #[test]
    fn parameters_need_a_name_and_an_equals_sign() {
        assert_eq!(
            Parameter::parse("n=3", false).unwrap().value,
            PyLiteral::Int("3".into())
        );
        assert_eq!(
            Parameter::parse("n=3", true).unwrap().value,
            PyLiteral::Str("3".into())
        );
        assert_eq!(
            Parameter::parse("s=a=b", false).unwrap().value,
            PyLiteral::Str("a=b".into())
        );
        assert!(Parameter::parse("n", false).is_err());
        assert!(Parameter::parse("1n=3", false).is_err());
        assert!(Parameter::parse("class=3", false).is_err());
        assert!(Parameter::parse("x;import os=3", false).is_err());
        assert!(Parameter::parse("größe=3", false).is_ok());
        for bad in ["x²=1", "½=1", "x-y=1", "=1", "·x=1"] {
            assert!(Parameter::parse(bad, false).is_err(), "{bad}");
        }
        assert!(Parameter::parse("x·y=1", false).is_ok(), "· (U+00B7) continues an identifier in Python");
    }

    fn notebook(cells: Value, minor: u64) -> Notebook {
        Notebook::parse(
            &json!({"nbformat": 4, "nbformat_minor": minor, "metadata": {}, "cells": cells})
                .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn injects_after_the_parameters_cell_and_replaces_an_old_injection() {
        let mut nb = notebook(
            json!([
                {"cell_type": "markdown", "source": "# T", "metadata": {}},
                {"cell_type": "code", "source": "n = 1", "metadata": {"tags": ["parameters"]}, "outputs": [], "execution_count": null},
                {"cell_type": "code", "source": "# old", "metadata": {"tags": ["injected-parameters"]}, "outputs": [], "execution_count": null},
                {"cell_type": "code", "source": "print(n)", "metadata": {}, "outputs": [], "execution_count": null},
            ]),
            4,
        );
        let params = [Parameter::parse("n=2", false).unwrap()];
        assert_eq!(inject(&mut nb, &params), Injected::Replaced(2));
        let cells = nb.cells();
        assert_eq!(cells.len(), 4);
        assert_eq!(cells[2]["source"], "# Parameters\nn = 2\n");
        assert_eq!(cells[2]["metadata"]["tags"], json!(["injected-parameters"]));
        assert!(cells[2].get("id").is_none(), "nbformat 4.4 has no cell ids");
    }

    #[test]
    fn a_stale_injected_cell_is_replaced_where_it_stands_as_papermill_does() {
        let mut nb = notebook(
            json!([
                {"cell_type": "code", "source": "# old", "metadata": {"tags": ["injected-parameters"]}, "outputs": [], "execution_count": null},
                {"cell_type": "code", "source": "n = 1", "metadata": {"tags": ["parameters"]}, "outputs": [], "execution_count": null},
            ]),
            4,
        );
        let params = [Parameter::parse("n=2", false).unwrap()];
        assert_eq!(inject(&mut nb, &params), Injected::Replaced(0));
        let sources: Vec<&str> = nb
            .cells()
            .iter()
            .map(|c| c["source"].as_str().unwrap())
            .collect();
        assert_eq!(sources, ["# Parameters\nn = 2\n", "n = 1"]);
    }

    #[test]
    fn injects_at_the_top_without_a_parameters_cell_with_an_id_on_4_5() {
        let mut nb = notebook(
            json!([{"cell_type": "code", "id": "a", "source": "x", "metadata": {}, "outputs": [], "execution_count": null}]),
            5,
        );
        assert_eq!(
            inject(&mut nb, &[Parameter::parse("s=hi", false).unwrap()]),
            Injected::AtTop
        );
        assert_eq!(nb.cells()[0]["source"], "# Parameters\ns = 'hi'\n");
        assert_eq!(nb.cells()[0]["id"].as_str().map(str::len), Some(8));
    }
}
