//! `gpushare calibrate` (issue 26.2): fits the cost model in the kernel's Python with a real sweep,
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
    assert!(err.contains("at least three sizes"), "{err}");
}

#[test]
fn a_worker_device_goes_with_the_process_paths_only() {
    let sb = Sandbox::new("calibrate-worker-device");
    let (code, _, err) = sb.gpushare(&["calibrate", "--worker-device", "cuda:1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--processes"), "clap names the flag it needs: {err}");
}
