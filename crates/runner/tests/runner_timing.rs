//! `gpushare run` records each executed cell's `metadata.execution` as nbclient does, so tools
//! that read executed notebooks (execution times in JupyterLab, reports of slow cells) find it.

mod support;

use std::process::Command;

use serde_json::Value;
use support::{Sandbox, code, notebook, python, read};

const KEYS: [&str; 4] = ["iopub.status.busy", "iopub.execute_input", "shell.execute_reply", "iopub.status.idle"];

/// nbclient's own run of `input`: the executed notebook.
fn nbclient_run(sb: &Sandbox, input: &std::path::Path) -> Value {
    let script = "import sys, json, nbformat, nbclient\n\
                  nb = nbformat.read(sys.argv[1], as_version=4)\n\
                  nbclient.NotebookClient(nb, kernel_name='python3', iopub_timeout=60).execute()\n\
                  print(json.dumps(nb))\n";
    let out = Command::new(python())
        .args(["-c", script])
        .arg(input)
        .env_clear()
        .envs(sb.env.vars())
        .output()
        .expect("running nbclient");
    assert!(out.status.success(), "nbclient failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("nbclient's notebook is JSON")
}

/// `2026-11-26T13:10:00.123456Z`, nbclient's format.
fn is_nbclient_time(text: &str) -> bool {
    let b = text.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    b.len() == 27
        && [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18].into_iter().all(digit)
        && (20..26).all(digit)
        && &text[4..5] == "-"
        && &text[10..11] == "T"
        && &text[19..20] == "."
        && text.ends_with('Z')
}

#[test]
fn each_executed_cell_records_its_timing_as_nbclient_does() {
    let sb = Sandbox::new("timing");
    let mut cells = vec![
        code("import time\ntime.sleep(0.2)\nprint('a')"),
        serde_json::json!({"cell_type": "markdown", "id": "md", "metadata": {}, "source": "text"}),
        code("1 + 1"),
    ];
    // A stale timing from an earlier run is replaced, not kept.
    cells[2]["metadata"]["execution"] = serde_json::json!({"iopub.status.busy": "1999-01-01T00:00:00.000000Z"});
    let input = sb.write_notebook("t.ipynb", &notebook(cells));
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    let ours = read(&sb.path("t.executed.ipynb"));
    let theirs = nbclient_run(&sb, &input);
    for cell in [0, 2] {
        let timing = ours["cells"][cell]["metadata"]["execution"].as_object().expect("metadata.execution");
        let mut keys: Vec<&str> = timing.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut expected: Vec<&str> = theirs["cells"][cell]["metadata"]["execution"]
            .as_object()
            .expect("nbclient's metadata.execution")
            .keys()
            .map(String::as_str)
            .collect();
        expected.sort_unstable();
        assert_eq!(keys, expected, "cell {cell}");
        let at = |key: &str| timing[key].as_str().unwrap_or_default();
        for key in KEYS {
            assert!(is_nbclient_time(at(key)), "cell {cell} {key}: {:?}", timing[key]);
        }
        // ISO times of one format sort as they happened.
        assert!(at("iopub.status.busy") <= at("iopub.execute_input"), "{timing:?}");
        assert!(at("iopub.execute_input") <= at("iopub.status.idle"), "{timing:?}");
        assert!(!at("iopub.status.busy").starts_with("1999"), "{timing:?}");
    }
    assert!(ours["cells"][1]["metadata"].get("execution").is_none(), "a markdown cell is not timed");
}
