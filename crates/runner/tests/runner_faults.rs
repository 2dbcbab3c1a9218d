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
            code("import time\nprint('started', flush=True)\ntime.sleep(120)"),
            code("print('never')"),
        ]),
    );
    let child = sb.binary(&["run", input.to_str().unwrap()]).spawn().expect("starting gpushare");
    sb.wait_for_kernel();
    std::thread::sleep(Duration::from_secs(3));
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
