//! The pyo3 boundary: converts types and errors, nothing else.

mod advice;
mod capsules;
mod ceilings;
mod cuda;
mod declared;
mod describe;
mod entry;
mod errors;
mod explain;
mod forms;
mod frames;
mod ipc;
mod lab;
mod lab_run;
mod own_copy;
mod paths;
mod plan;
mod process;
mod process_timing;
mod process_route;
mod process_rows;
mod process_tables;
mod rows;
mod shared;
mod tensor_info;
mod trace;
mod types;
mod vocabulary;

use pyo3::prelude::*;

/// Entry point of the `gpushare` console script: the command's logic lives in the runner crate.
/// The GIL is released for the whole run so a kernel launched from here is never blocked by us.
/// `argv` arrives as OS strings: Python decodes a file name that is not UTF-8 with
/// surrogateescape, which a `String` refused (UnicodeEncodeError before the command ran).
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> i32 {
    py.detach(|| gpushare_runner::cli::run(argv))
}

/// `gpushare._native` is grouped by what each part is about, one submodule each; the stubs
/// mirror it (python/gpushare/_native/).
const SUBMODULES: [(&str, Register); 8] = [
    // gpushare's exceptions and how a framework's failure is explained.
    ("errors", register_errors),
    // One share: its plan, its result, what an array is, memory owned by gpushare.
    ("share", register_share),
    // The table of paths, `auto` over it, how a path is ordered, its prediction.
    ("paths", register_paths),
    // Every path for one array, and sizes x paths.
    ("lab", register_lab),
    // The cost model, the machine's ceilings and `advise`.
    ("advice", register_advice),
    // The CUDA driver: reports, transfers, contexts, allocations, IPC.
    ("cuda", register_cuda),
    // Handoffs to another process.
    ("processes", register_processes),
    // The one parser or formatter of each kind of word: devices, sizes, bytes, routes, path lists.
    ("text", register_text),
];

type Register = fn(&Bound<'_, PyModule>) -> PyResult<()>;

fn register_errors(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_function(wrap_pyfunction!(types::explain_failure, m)?)
}

fn register_share(m: &Bound<'_, PyModule>) -> PyResult<()> {
    plan::register(m)?;
    errors::register_share(m)?;
    shared::register(m)?;
    capsules::register(m)?;
    trace::register(m)?;
    m.add_class::<tensor_info::TensorInfo>()?;
    m.add_class::<types::PyTiming>()?;
    m.add_class::<types::ShareResult>()?;
    m.add_function(wrap_pyfunction!(entry::share, m)?)?;
    m.add_function(wrap_pyfunction!(types::render_shares, m)?)?;
    m.add_function(wrap_pyfunction!(tensor_info::tensor_info_from_fields, m)?)?;
    m.add_function(wrap_pyfunction!(types::shares_mimebundle, m)?)?;
    m.add_function(wrap_pyfunction!(types::shares_dataframe, m)?)
}

fn register_paths(m: &Bound<'_, PyModule>) -> PyResult<()> {
    paths::register(m)?;
    m.add_function(wrap_pyfunction!(entry::planner_in_use, m)?)?;
    m.add_function(wrap_pyfunction!(entry::use_planner, m)?)?;
    explain::register(m)?;
    advice::register_paths(m)
}

fn register_lab(m: &Bound<'_, PyModule>) -> PyResult<()> {
    lab::register(m)
}

fn register_advice(m: &Bound<'_, PyModule>) -> PyResult<()> {
    advice::register(m)?;
    ceilings::register(m)
}

fn register_cuda(m: &Bound<'_, PyModule>) -> PyResult<()> {
    cuda::register(m)?;
    ipc::register(m)?;
    advice::register_cuda(m)
}

fn register_processes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    process::register(m)
}

fn register_text(m: &Bound<'_, PyModule>) -> PyResult<()> {
    shared::register_text(m)?;
    paths::register_text(m)
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // Importable by their dotted names too (`import gpushare._native.cuda`, the stubs' checker):
    // pyo3 makes a submodule an attribute only.
    let modules = py.import("sys")?.getattr("modules")?;
    for (name, register) in SUBMODULES {
        let submodule = PyModule::new(py, name)?;
        register(&submodule)?;
        // Added under its short name first: pyo3 names the attribute after `__name__`.
        m.add_submodule(&submodule)?;
        let qualified = format!("gpushare._native.{name}");
        submodule.setattr("__name__", &qualified)?;
        modules.set_item(qualified, submodule)?;
    }
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
