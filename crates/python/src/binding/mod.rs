//! The pyo3 boundary: converts types and errors, nothing else.

mod advice;
mod capsules;
mod ceilings;
mod cuda;
mod declared;
mod describe;
mod errors;
mod explain;
mod forms;
mod frames;
mod from_python;
mod ipc;
mod json;
mod lab;
mod lab_run;
mod measure;
mod own_copy;
mod paths;
mod plan;
mod process;
mod process_timing;
mod process_route;
mod process_tables;
mod shared;
mod tensor_info;
mod trace;
mod types;

use pyo3::prelude::*;

/// Entry point of the `gpushare` console script: the command's logic lives in the runner crate.
/// The GIL is released for the whole run so a kernel launched from here is never blocked by us.
/// `argv` arrives as OS strings: Python decodes a file name that is not UTF-8 with
/// surrogateescape, which a `String` refused (UnicodeEncodeError before the command ran).
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> i32 {
    py.detach(|| gpushare_runner::cli::run(argv))
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    explain::register(m)?;
    plan::register(m)?;
    lab::register(m)?;
    paths::register(m)?;
    cuda::register(m)?;
    shared::register(m)?;
    capsules::register(m)?;
    ipc::register(m)?;
    process::register(m)?;
    ceilings::register(m)?;
    advice::register(m)?;
    trace::register(m)?;
    m.add_class::<tensor_info::TensorInfo>()?;
    m.add_class::<types::PyTiming>()?;
    m.add_class::<types::ShareResult>()?;
    m.add_function(wrap_pyfunction!(types::render_shares, m)?)?;
    m.add_function(wrap_pyfunction!(tensor_info::tensor_info_from_fields, m)?)?;
    m.add_function(wrap_pyfunction!(types::shares_mimebundle, m)?)?;
    m.add_function(wrap_pyfunction!(types::explain_failure, m)?)?;
    m.add_function(wrap_pyfunction!(types::shares_dataframe, m)?)?;
    m.add_function(wrap_pyfunction!(types::json_schema, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    // The inline styles of every table cell, for the tables Python renders (gpushare.html_cells):
    // one definition, in crates/core/src/render/cells.rs.
    let styles = pyo3::types::PyDict::new(m.py());
    use crate::render::cells;
    for (name, style) in [
        ("table", cells::TABLE_STYLE),
        ("text", cells::TEXT_STYLE),
        ("num", cells::NUM_STYLE),
        ("num_head", cells::NUM_HEAD_STYLE),
        ("detail", cells::DETAIL_STYLE),
    ] {
        styles.set_item(name, style)?;
    }
    m.add("CELL_STYLES", styles)?;
    Ok(())
}
