//! `gpushare calibrate`: fits the cost model in the kernel's Python with a real sweep,
//! caches it in the user's cache directory and prints what it holds; too few sizes is a usage error
//! before any Python starts.

mod support;

use support::{Sandbox, gpushare_has};

#[test]
fn calibrate_fits_and_caches_the_model_of_this_machine() {
    if !gpushare_has("calibrate") {
        eprintln!("skipped: gpushare.calibrate not available in the test Python");
        return;
    }
    let mut sb = Sandbox::new("calibrate");
    let cache = sb.path("cache");
    sb.env = sb.env.clone().with("XDG_CACHE_HOME", &cache).with("CUDA_VISIBLE_DEVICES", "");
    let (code, out, err) = sb.gpushare(&[
        "calibrate", "--kernel", "python3", "-f", "torch,numpy", "--sizes", "16KiB,64KiB,256KiB", "-r", "2", "--device", "cpu",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("cost model of this machine") && out.contains("torch→numpy"), "{out}");
    assert!(out.contains("paths fitted, made"), "{out}");
    let saved = std::fs::read_to_string(cache.join("gpushare/model.json")).expect("the model is cached");
    assert!(saved.contains("share torch->numpy dlpack @cpu"), "{saved}");
    // What it measured, a line per sweep as it went: two ordered pairs at three sizes.
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with("calibrate: ")).filter(|l| l.contains("/6 share ")).collect();
    assert_eq!(progress.len(), 6, "{err}");
    assert!(progress[0].starts_with("calibrate: 1/6 share ") && progress[5].starts_with("calibrate: 6/6 share "), "{err}");
}

#[test]
fn fewer_than_three_sizes_is_a_usage_error() {
    let sb = Sandbox::new("calibrate-sizes");
    let (code, _, err) = sb.gpushare(&["calibrate", "--sizes", "4KiB,1MiB"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at least three different sizes"), "{err}");
}

#[test]
fn a_worker_device_goes_with_the_process_paths_only() {
    let sb = Sandbox::new("calibrate-worker-device");
    let (code, _, err) = sb.gpushare(&["calibrate", "--worker-device", "cuda:1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--processes"), "clap names the flag it needs: {err}");
}

/// Arguments that cannot fit a model: one line, exit 2, no traceback, before any sweep (each of
/// these ended in a Python traceback, or in a run that fitted nothing and exited 0).
#[test]
fn arguments_that_cannot_fit_a_model_are_one_line_usage_errors() {
    if !gpushare_has("adapters.framework") {
        eprintln!("skipped: gpushare not importable by the test Python");
        return;
    }
    let mut sb = Sandbox::new("calibrate-usage");
    let cache = sb.path("cache");
    sb.env = sb.env.clone().with("XDG_CACHE_HOME", &cache);
    let digits = format!("{},1KiB,2KiB", "9".repeat(400));
    let cases: [(&[&str], &str); 9] = [
        (&["--sizes", "0,0,0"], "0 bytes"),
        (&["--sizes", "lots,many,more"], "cannot read size `lots`"),
        (&["--sizes", &digits], "beyond any memory"),
        (&["-f", "torch,bogus"], "unknown framework 'bogus'"),
        (&["-f", "torch,jaxx"], "did you mean 'jax'"),
        (&["--device", "bogus"], "unknown device \"bogus\""),
        // Not a device here, whatever this machine has.
        (&["--to-device", "cuda:99"], "--to-device cuda:99"),
        (&["-f", "numpy"], "one framework makes no pair"),
        (&["-f", "numpy", "--device", "cuda:99"], "--device cuda:99"),
    ];
    for (args, says) in cases {
        let argv: Vec<&str> = ["calibrate", "--kernel", "python3"].iter().chain(args).copied().collect();
        let (code, out, err) = sb.gpushare(&argv);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("Traceback"), "{args:?}: {err}");
    }
    assert!(!cache.exists(), "a model was written");
}

/// A cache that cannot be written: the fit runs, and the command fails saying nothing was saved
/// (it exited 0 and the next process found no model).
#[test]
fn a_model_that_cannot_be_saved_fails_the_command_and_says_so() {
    if !gpushare_has("calibrate") {
        eprintln!("skipped: gpushare.calibrate not available in the test Python");
        return;
    }
    let mut sb = Sandbox::new("calibrate-unsaved");
    // The cache's directory is a file: nothing can be written under it, as root too.
    let cache = sb.path("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("gpushare"), "not a directory").unwrap();
    sb.env = sb.env.clone().with("XDG_CACHE_HOME", &cache).with("CUDA_VISIBLE_DEVICES", "");
    let (code, out, err) = sb.gpushare(&[
        "calibrate", "--kernel", "python3", "-f", "torch,numpy", "--sizes", "16KiB,64KiB,256KiB", "-r", "1", "--device", "cpu",
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("nothing was saved") && err.contains("model.json"), "{err}");
    assert!(!err.contains("Traceback"), "{err}");
}
