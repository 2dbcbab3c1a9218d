//! Running a whole notebook in a fresh kernel, the way nbclient and papermill do.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::KernelError;
use super::env::Environment;
use super::kernelspec::KernelSpec;
use super::notebook::{
    DEFAULT_OUTPUT_LIMIT, Notebook, OutputRecorder, cell_source, cell_tags, cell_type,
};
use super::params::{Injected, Parameter, inject};
use super::session::{Cancel, Failure, Kernel, StartOptions};

/// nbclient's tag for cells that are not run.
pub const SKIP_TAG: &str = "skip-execution";
/// nbclient's and nbmake's tag for cells that are expected to raise; the run goes on.
pub const RAISES_TAG: &str = "raises-exception";

/// How to run a notebook.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Per-cell limit (`None`: no limit).
    pub timeout: Option<Duration>,
    pub startup_timeout: Duration,
    pub params: Vec<Parameter>,
    /// Bytes of output one cell may hold; the rest is dropped and the notebook says so.
    pub output_limit: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            timeout: None,
            startup_timeout: Duration::from_secs(60),
            params: Vec::new(),
            output_limit: DEFAULT_OUTPUT_LIMIT,
        }
    }
}

/// The cell a run stopped at, and why.
#[derive(Clone, Debug)]
pub struct CellFailure {
    /// Index in the notebook's `cells` (0-based, markdown cells included).
    pub cell_index: usize,
    pub execution_count: Option<i64>,
    pub source: String,
    pub failure: Failure,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// Code cells that will run (non-empty, not tagged `skip-execution`).
    pub cells_total: usize,
    pub cells_run: usize,
    pub failure: Option<CellFailure>,
    /// Where parameters went, when there were any.
    pub injected: Option<Injected>,
}

/// Indices of the code cells a run executes: empty cells are skipped as in nbclient.
pub fn cells_to_run(nb: &Notebook) -> Vec<usize> {
    nb.cells()
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            cell_type(c) == Some("code")
                && !cell_source(c).trim().is_empty()
                && !cell_tags(c).contains(&SKIP_TAG)
        })
        .map(|(i, _)| i)
        .collect()
}

/// Run every code cell of `nb` in order in a fresh kernel from `spec`, recording outputs and
/// execution counts into `nb`; stop at the first failure. The kernel is shut down before this
/// returns, whatever happened; `nb` holds everything that ran even when an error is returned.
///
/// `progress(done, total)` is called once the kernel is ready and after every cell.
pub async fn run_notebook(
    nb: &mut Notebook,
    notebook_dir: Option<&Path>,
    spec: &KernelSpec,
    env: &Environment,
    options: &RunOptions,
    cancel: &mut Option<Cancel>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RunSummary, KernelError> {
    nb.clear_outputs();
    let mut summary = RunSummary::default();
    if !options.params.is_empty() {
        summary.injected = Some(inject(nb, &options.params));
    }
    let cells = cells_to_run(nb);
    summary.cells_total = cells.len();

    let start = StartOptions {
        startup_timeout: options.startup_timeout,
        cwd: notebook_dir,
        extra_env: &[],
    };
    let mut kernel = Kernel::start(spec, env, &start, cancel).await?;
    record_kernel_metadata(nb, spec, &kernel.kernel_info);
    progress(0, cells.len());

    let mut recorder = OutputRecorder::with_limit(options.output_limit);
    let result = run_cells(
        nb,
        &cells,
        &mut kernel,
        &mut recorder,
        options,
        cancel,
        &mut summary,
        progress,
    )
    .await;
    kernel.shutdown().await;
    // As nbclient: the state of the widgets this run made replaces the input's (whose model ids
    // no output refers to any more); a run that made none leaves `metadata.widgets` alone.
    if let Some(widgets) = recorder.widgets.metadata() {
        nb.metadata_mut().insert("widgets".into(), widgets);
    }
    result.map(|()| summary)
}

#[allow(clippy::too_many_arguments)]
async fn run_cells(
    nb: &mut Notebook,
    cells: &[usize],
    kernel: &mut Kernel,
    recorder: &mut OutputRecorder,
    options: &RunOptions,
    cancel: &mut Option<Cancel>,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(), KernelError> {
    for &index in cells {
        let source = cell_source(&nb.cells()[index]);
        let expect_error = cell_tags(&nb.cells()[index]).contains(&RAISES_TAG);
        recorder.start_cell();
        let all_cells = nb.cells_mut();
        let mut outcome = kernel
            .execute(&source, options.timeout, cancel, |m| {
                recorder.record(all_cells, index, m);
            })
            .await?;
        // Tell the kernel what its output widgets now hold, as a front end does.
        let updates = recorder.widgets.take_updates();
        if !matches!(outcome.failure, Some(Failure::KernelDied { .. })) {
            for (comm_id, data) in updates {
                // Best effort, and bounded: the notebook is right whether the kernel hears it or not.
                let _ =
                    tokio::time::timeout(Duration::from_secs(2), kernel.send_comm(comm_id, data))
                        .await;
            }
        }
        if let Some(why) = recorder.take_invalid()
            && matches!(
                outcome.failure,
                None | Some(Failure::Error { .. } | Failure::NoReply)
            )
        {
            // nbclient stops at the invalid output with a NotebookValidationError, whatever
            // the cell did next (and whatever its tags allow).
            outcome.failure = Some(Failure::InvalidOutput(why));
        }
        if let Some(n) = outcome.execution_count {
            nb.cells_mut()[index]["execution_count"] = Value::from(n);
        }
        // As nbclient (record_timing): each executed cell's timing replaces what it had.
        nb.cells_mut()[index]["metadata"]["execution"] = outcome.timing.to_metadata();
        summary.cells_run += 1;
        progress(summary.cells_run, cells.len());
        match outcome.failure {
            None => {}
            Some(Failure::Error { .. }) if expect_error => {}
            Some(failure) => {
                summary.failure = Some(CellFailure {
                    cell_index: index,
                    execution_count: outcome.execution_count,
                    source,
                    failure,
                });
                return Ok(());
            }
        }
    }
    Ok(())
}

/// nbclient records the kernel's `language_info`; the kernelspec is filled in only when the
/// notebook names none, so a notebook keeps asking for the kernel it was written for.
fn record_kernel_metadata(nb: &mut Notebook, spec: &KernelSpec, kernel_info: &Value) {
    let metadata = nb.metadata_mut();
    if let Some(info) = kernel_info.get("language_info").filter(|v| v.is_object()) {
        metadata.insert("language_info".into(), info.clone());
    }
    if !metadata.get("kernelspec").is_some_and(Value::is_object) {
        metadata.insert(
            "kernelspec".into(),
            serde_json::json!({"name": spec.name, "display_name": spec.display_name, "language": spec.language}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_and_skipped_cells_are_not_run() {
        let nb = Notebook::parse(
            &json!({"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
                {"cell_type": "markdown", "source": "x", "metadata": {}},
                {"cell_type": "code", "source": "  \n", "metadata": {}, "outputs": [], "execution_count": null},
                {"cell_type": "code", "source": ["a = ", "1"], "metadata": {}, "outputs": [], "execution_count": null},
                {"cell_type": "code", "source": "b", "metadata": {"tags": ["skip-execution"]}, "outputs": [], "execution_count": null},
            ]})
            .to_string(),
        )
        .unwrap();
        assert_eq!(cells_to_run(&nb), vec![2]);
    }
}
