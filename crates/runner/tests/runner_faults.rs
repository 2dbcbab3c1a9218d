//! `gpushare run` under what real kernels and real terminals do to it: native output that is
//! not UTF-8, a closed terminal (SIGHUP), a full disk. Each test starts real kernels (the test
//! Python needs ipykernel; see tests/support).

mod support;

use std::time::{Duration, Instant};

use support::{Sandbox, code, notebook, outputs, read, signal_and_wait, text};

#[test]
fn a_kernel_writing_bytes_that_are_not_utf8_to_its_own_stdout_does_not_stall_the_run() {
    let sb = Sandbox::new("native-bytes");
    // C-level output (a library's native logging, Latin-1 from a subprocess) reaches the kernel
    // process's own stdout/stderr, our pipes: an undecodable line, then more than a pipe holds.
    let input = sb.write_notebook(
        "n.ipynb",
        &notebook(vec![
            code("import os\nos.write(1, b'\\xff\\n' + b'a' * 200000)\nos.write(2, b'\\xfe\\n' + b'b' * 200000)"),
            code("import os\nos.write(1, (b'\\xe9' * 1000 + b'\\n') * 400)\nprint('after')"),
        ]),
    );
    let began = Instant::now();
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap(), "--timeout", "60"]);
    assert_eq!(status, 0, "{err}");
    assert!(
        began.elapsed() < Duration::from_secs(45),
        "the run stalled: {:?}",
        began.elapsed()
    );
    let nb = read(&sb.path("n.executed.ipynb"));
    assert!(
        outputs(&nb, 1).iter().any(|o| text(&o["text"]).contains("after")),
        "{:?}",
        outputs(&nb, 1)
    );
    sb.assert_runtime_dir_clean();
}

#[test]
fn a_kernel_that_dies_after_undecodable_output_still_shows_its_last_words() {
    let sb = Sandbox::new("native-tail");
    let input = sb.write_notebook(
        "d.ipynb",
        &notebook(vec![code(
            // ipykernel captures fd 2 through a pipe and a thread that echoes it to the process's
            // stderr: the pause lets that thread pass the bytes on before the process ends (without
            // it the test raced the thread and failed under load).
            "import os, time\nos.write(2, b'caf\\xe9 \\xff\\nlast words\\n')\ntime.sleep(1)\nos._exit(3)",
        )]),
    );
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap(), "--timeout", "60"]);
    assert_eq!(status, 1, "{err}");
    // What was shown is decoded lossily, line by line: nothing after the bad byte is lost.
    assert!(err.contains("caf\u{fffd} \u{fffd}") && err.contains("last words"), "{err}");
    sb.assert_runtime_dir_clean();
}

#[test]
fn sighup_cleans_up_like_sigterm_writes_what_ran_and_exits_129() {
    let sb = Sandbox::new("sighup");
    let input = sb.write_notebook(
        "h.ipynb",
        &notebook(vec![
            code("print('first')"),
            code(&support::sleeping_cell(&sb.path("began"))),
            code("print('never')"),
        ]),
    );
    let child = sb.binary(&["run", input.to_str().unwrap()]).spawn().expect("starting gpushare");
    support::wait_for_cell(&sb.path("began"));
    let began = Instant::now();
    // A closed terminal or SSH session sends SIGHUP.
    let (code, err) = signal_and_wait(child, libc::SIGHUP);
    assert_eq!(code, Some(129), "{err}");
    assert!(began.elapsed() < Duration::from_secs(30), "slow to stop");
    assert!(err.contains("SIGHUP"), "{err}");
    let nb = read(&sb.path("h.executed.ipynb"));
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "first\n");
    assert!(
        outputs(&nb, 1).iter().any(|o| o["ename"] == "KeyboardInterrupt"),
        "{:?}",
        outputs(&nb, 1)
    );
    assert!(outputs(&nb, 2).is_empty());
    sb.assert_runtime_dir_clean();
}

/// A file-system node like `/dev/full` inside the sandbox when we may make one (root): a test
/// of the old runner, which renamed a file over the path, then replaces that copy and not the
/// machine's `/dev/full`. Elsewhere `/dev/full` itself, which nobody but root could replace.
fn full_device(sb: &Sandbox) -> std::path::PathBuf {
    let copy = sb.path("full");
    let c_path = std::ffi::CString::new(copy.to_str().unwrap()).unwrap();
    // SAFETY: mknod(2) with a valid NUL-terminated path; (1, 7) is /dev/full's device number.
    let made = unsafe { libc::mknod(c_path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 7)) } == 0;
    if made { copy } else { std::path::PathBuf::from("/dev/full") }
}

#[test]
fn a_notebook_that_cannot_be_written_fails_the_run() {
    use std::os::unix::fs::FileTypeExt as _;
    let sb = Sandbox::new("full");
    let input = sb.write_notebook("f.ipynb", &notebook(vec![code("print('ran')")]));
    let full = full_device(&sb);
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap(), "-o", full.to_str().unwrap()]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains("cannot write the executed notebook") && err.contains("No space left"), "{err}");
    assert!(!err.contains("->"), "no claim that it was written: {err}");
    assert!(
        std::fs::metadata(&full).unwrap().file_type().is_char_device(),
        "the device node was replaced by a file"
    );
    sb.assert_runtime_dir_clean();

    // A named pipe receives the notebook and stays a pipe (`-o /dev/stdout` is the same case).
    let fifo = sb.path("pipe");
    let c_fifo = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap_or_default())
    };
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap(), "-o", fifo.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "the pipe was replaced");
    let received = reader.join().unwrap();
    assert!(received.contains("\"ran\\n\""), "{received}");
}

#[test]
fn sigquit_cleans_up_like_sigterm_writes_what_ran_and_exits_131() {
    let sb = Sandbox::new("sigquit");
    let input = sb.write_notebook(
        "q.ipynb",
        &notebook(vec![
            code("print('first')"),
            code(&support::sleeping_cell(&sb.path("began"))),
        ]),
    );
    let child = sb.binary(&["run", input.to_str().unwrap()]).spawn().expect("starting gpushare");
    support::wait_for_cell(&sb.path("began"));
    // Ctrl-\ sends SIGQUIT, whose default action killed the runner and left the kernel's
    // connection file (with its key) behind.
    let (code, err) = signal_and_wait(child, libc::SIGQUIT);
    assert_eq!(code, Some(131), "{err}");
    assert!(err.contains("SIGQUIT"), "{err}");
    let nb = read(&sb.path("q.executed.ipynb"));
    assert_eq!(text(&outputs(&nb, 0)[0]["text"]), "first\n");
    sb.assert_runtime_dir_clean();
}

/// nbformat's own validator, in the test Python, on a written notebook: `None` when valid.
fn nbformat_problem(path: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new(support::python())
        .args(["-c", "import sys, nbformat; nbformat.validate(nbformat.read(sys.argv[1], as_version=nbformat.NO_CONVERT))"])
        .arg(path)
        .output()
        .expect("running nbformat");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn cell_ids_nbformat_rejects_are_replaced_so_the_notebook_written_is_valid() {
    let sb = Sandbox::new("cell-ids");
    let mut cells = vec![code("print('a')"), code("print('b')"), code("print('c')")];
    cells[0]["id"] = "has spaces: and colons".into();
    cells[2]["id"] = cells[1]["id"].clone();
    let input = sb.write_notebook("ids.ipynb", &notebook(cells));
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 0, "{err}");
    assert!(err.contains("cell 1 had the id \"has spaces: and colons\""), "{err}");
    assert!(err.contains("cell 3 repeated the id"), "{err}");
    let written = sb.path("ids.executed.ipynb");
    assert_eq!(nbformat_problem(&written), None);
    assert_eq!(text(&outputs(&read(&written), 2)[0]["text"]), "c\n");
}

#[test]
fn a_cell_whose_source_is_not_text_is_refused_and_nothing_is_written() {
    let sb = Sandbox::new("source-number");
    let mut cells = vec![code("print('a')"), code("")];
    cells[1]["source"] = 5.into();
    let input = sb.write_notebook("n.ipynb", &notebook(cells));
    let (status, _, err) = sb.gpushare(&["run", input.to_str().unwrap()]);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains("cell 2: `source` is a number"), "{err}");
    assert!(!sb.path("n.executed.ipynb").exists());
    sb.assert_runtime_dir_clean();
}

#[test]
fn usage_errors_of_run_come_before_any_kernel_and_write_nothing() {
    let sb = Sandbox::new("run-usage");
    let a = sb.write_notebook("a.ipynb", &notebook(vec![code("print('a')")]));
    let b = sb.write_notebook("b.ipynb", &notebook(vec![code("print('b')")]));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // Two notebooks and an -o that names one notebook (it became a directory of that name).
    let (status, _, err) = sb.gpushare(&["run", a, b, "-o", "out.ipynb"]);
    assert_eq!(status, 2, "{err}");
    assert!(err.contains("names a notebook") && err.contains("name a directory"), "{err}");
    assert!(!sb.path("out.ipynb").exists());
    // ... or an existing file.
    std::fs::write(sb.path("taken"), "x").unwrap();
    let (status, _, err) = sb.gpushare(&["run", a, b, "-o", sb.path("taken").to_str().unwrap()]);
    assert_eq!(status, 2, "{err}");
    assert!(err.contains("is a file"), "{err}");
    // A parameter name Python cannot assign to: `²` is numeric, but no identifier character.
    let (status, _, err) = sb.gpushare(&["run", a, "-p", "x²=1"]);
    assert_eq!(status, 2, "{err}");
    assert!(err.contains("`x²` is not a Python variable name"), "{err}");
    assert!(!sb.path("runtime").exists(), "a kernel was started");
    assert!(!sb.path("a.executed.ipynb").exists());
}

#[test]
fn arguments_that_are_not_utf8_are_read_or_refused_in_one_line() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;
    let sb = Sandbox::new("not-utf8");
    let nb = serde_json::to_string(&notebook(vec![code("print('ran')")])).unwrap();
    // A file name is bytes: one that is not UTF-8 is run, and its output keeps the name.
    let input = sb.dir.join(OsStr::from_bytes(b"caf\xe9.ipynb"));
    std::fs::write(&input, &nb).unwrap();
    let output = sb.binary(&[]).arg("run").arg(&input).output().expect("running gpushare");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{err}");
    let written = sb.dir.join(OsStr::from_bytes(b"caf\xe9.executed.ipynb"));
    assert!(text(&outputs(&read(&written), 0)[0]["text"]).contains("ran"));
    // A parameter's value is text: one that is not UTF-8 is a usage error, before any kernel.
    let plain = sb.write_notebook("p.ipynb", &notebook(vec![code("print('ran')")]));
    let mut command = sb.binary(&["run", plain.to_str().unwrap(), "-p"]);
    command.arg(OsStr::from_bytes(b"s=\xff"));
    let output = command.output().expect("running gpushare");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("invalid UTF-8") && !err.contains("panicked"), "{err}");
    assert!(!sb.path("p.executed.ipynb").exists());
    // The console script takes the same arguments through Python (which decodes them with
    // surrogateescape): no UnicodeEncodeError traceback.
    if support::gpushare_has("_native.cli_main") {
        let mut command = std::process::Command::new(support::python());
        command
            .args(["-m", "gpushare", "run", plain.to_str().unwrap(), "-p"])
            .arg(OsStr::from_bytes(b"s=\xff"))
            .current_dir(&sb.dir)
            .env_clear()
            .envs(sb.env.vars())
            .stdin(std::process::Stdio::null());
        let output = command.output().expect("running python -m gpushare");
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{err}");
        assert!(!err.contains("Traceback") && err.contains("invalid UTF-8"), "{err}");
    }
    sb.assert_runtime_dir_clean();
}
