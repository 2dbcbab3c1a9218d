//! Tests of the one `auto` (crates/core/src/auto.rs).

use super::*;
use crate::paths::Endpoints;

fn facts(endpoints: Endpoints, source: Place) -> AutoFacts<'static> {
    AutoFacts {
        endpoints,
        source,
        destination: None,
        peer_access: None,
        target_name: "x",
        across_processes: false,
        source_shares_host_across: false,
        source_host_shared: false,
        model: None,
        source_name: "s",
        nbytes: None,
        producer_busy: false,
        source_readonly: None,
    }
}

/// A model of torch→torch moves from cuda:0 to cuda:1: each `(path, fixed seconds, bytes per
/// second)` an exact line through 1, 16 and 256 MiB (each fit's stated error is then the goal's
/// floor: 30 % below 1 MiB, 15 % from it up).
pub(crate) fn move_model(lines: &[(&str, f64, f64)]) -> crate::advice::model::CostModel {
    use crate::advice::model::{CostKey, CostModel, Observation};
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    for &(path, fixed, bw) in lines {
        let key = CostKey { kind: crate::paths::PathKind::Move, path: path.into(), source: "torch".into(), target: "torch".into(), place: "cuda:0->cuda:1".into() };
        let points: Vec<Observation> =
            [1u64 << 20, 16 << 20, 256 << 20].iter().map(|&n| Observation { bytes: n, seconds: fixed + n as f64 / bw }).collect();
        m.add(&key, points, Some(false));
    }
    m
}

/// A torch→torch move of `nbytes` from cuda:0 to cuda:1, which reach each other, priced by `model`.
pub(crate) fn move_facts(model: Option<&crate::advice::model::CostModel>, nbytes: Option<u64>) -> AutoFacts<'_> {
    AutoFacts {
        destination: Some(Place::Device(1)),
        peer_access: Some(true),
        target_name: "torch",
        source_name: "torch",
        model,
        nbytes,
        ..facts(Endpoints::default(), Place::Device(0))
    }
}

#[test]
fn auto_within_a_device_follows_what_the_endpoints_take() {
    let plain = Endpoints::default();
    assert_eq!(resolve_auto(&facts(plain, Place::Host)).path, "dlpack");
    let tf = Endpoints { target_accepts_objects: false, ..plain };
    assert_eq!(resolve_auto(&facts(tf, Place::Device(0))).path, "capsule");
    let numba_target = Endpoints { target_accepts_objects: false, target_accepts_capsules: false, ..plain };
    assert_eq!(resolve_auto(&facts(numba_target, Place::Device(0))).path, "cai");
    let numba_source = Endpoints { source_exports_dlpack: false, ..plain };
    assert_eq!(resolve_auto(&facts(numba_source, Place::Device(0))).path, "cai");
    // Into TensorFlow from Numba: gpushare makes the capsule.
    assert_eq!(resolve_auto(&facts(Endpoints { source_exports_dlpack: false, ..tf }, Place::Device(0))).path, "capsule");
}

#[test]
fn auto_takes_the_host_route_from_device_memory_into_a_host_only_target() {
    let numpy = Endpoints { target_addresses_device: false, ..Endpoints::default() };
    let on_gpu = AutoFacts { target_name: "numpy", ..facts(numpy, Place::Device(1)) };
    let choice = resolve_auto(&on_gpu);
    assert_eq!(choice.path, "host");
    assert!(choice.why.unwrap().contains("numpy cannot address device memory"));
    // On the host NumPy shares as ever.
    assert_eq!(resolve_auto(&facts(numpy, Place::Host)).path, "dlpack");
}

#[test]
fn auto_between_devices() {
    let move_to = |source, destination, peer_access| {
        resolve_auto(&AutoFacts { destination: Some(destination), peer_access, ..facts(Endpoints::default(), source) })
    };
    assert_eq!(move_to(Place::Device(0), Place::Device(1), Some(true)).path, "p2p");
    assert_eq!(move_to(Place::Device(0), Place::Device(1), Some(false)).path, "move");
    assert_eq!(move_to(Place::Device(0), Place::Device(1), None).path, "move");
    // p2p refuses the host either way: a move to or from it is the framework's own.
    assert_eq!(move_to(Place::Device(0), Place::Host, Some(true)).path, "move");
    assert_eq!(move_to(Place::Host, Place::Device(0), Some(true)).path, "move");
    let here = move_to(Place::Host, Place::Host, None);
    assert_eq!((here.path, here.kind), ("move", Move));
    assert!(here.why.unwrap().contains("already on cpu"));
}

#[test]
fn auto_across_processes_maps_the_source_memory() {
    let across = |source| resolve_auto(&AutoFacts { across_processes: true, ..facts(Endpoints::default(), source) });
    assert_eq!((across(Place::Device(0)).path, across(Place::Device(0)).kind), ("ipc", Process));
    assert_eq!(across(Place::Host).path, "shm");
    // A tensor whose storage torch.multiprocessing would move: its other views would read freed
    // memory, so auto copies it into a segment and says how to share it instead.
    let torch_host = AutoFacts { across_processes: true, source_shares_host_across: true, ..facts(Endpoints::default(), Place::Host) };
    let private = resolve_auto(&torch_host);
    assert_eq!(private.path, "shm");
    assert!(private.why.unwrap().contains("x.share_memory_()"));
    let already_shared = AutoFacts { source_host_shared: true, ..torch_host };
    assert_eq!(resolve_auto(&already_shared).path, "torch_mp");
}

#[test]
fn with_a_model_auto_takes_the_fastest_calibrated_path_of_the_same_verdict() {
    use crate::advice::model::{CostKey, CostModel, Observation};
    let key = |kind: &str, path: &str, place: &str| CostKey {
        kind: crate::paths::PathKind::parse(kind).expect("a kind's word"),
        path: path.into(),
        source: "torch".into(),
        target: "torch".into(),
        place: place.into(),
    };
    let line = |fixed: f64, bw: f64| -> Vec<Observation> {
        [1u64 << 20, 16 << 20, 256 << 20].iter().map(|&n| Observation { bytes: n, seconds: fixed + n as f64 / bw }).collect()
    };
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    // The H200 pair at 256 MiB: the framework's own move 697 µs, gpushare's p2p 717 µs.
    m.add(&key("move", "p2p", "cuda:0->cuda:1"), line(20e-6, 385e9), Some(false));
    m.add(&key("move", "move", "cuda:0->cuda:1"), line(15e-6, 394e9), Some(false));
    let facts = AutoFacts {
        destination: Some(Place::Device(1)),
        peer_access: Some(true),
        target_name: "torch",
        source_name: "torch",
        model: Some(&m),
        nbytes: Some(256 << 20),
        ..facts(Endpoints::default(), Place::Device(0))
    };
    let choice = resolve_auto(&facts);
    assert_eq!(choice.path, "move");
    assert!(choice.why.unwrap().contains("cost model"));
    // Without the model, the rules: a peer copy between GPUs that reach each other.
    assert_eq!(resolve_auto(&AutoFacts { model: None, ..facts }).path, "p2p");
    // A model that knows nothing of this pair changes nothing.
    let other = AutoFacts { source_name: "jax", target_name: "jax", ..facts };
    assert_eq!(resolve_auto(&other).path, "p2p");
}

#[test]
fn auto_never_takes_a_capsule_the_consumer_reads_unordered() {
    use crate::advice::model::{CostKey, CostModel, Observation};
    let key = |path: &str| CostKey { kind: crate::paths::PathKind::Share, path: path.into(), source: "torch".into(), target: "cupy".into(), place: "cuda:0".into() };
    let flat = |s: f64| -> Vec<Observation> { [1u64 << 16, 1 << 20, 1 << 24].iter().map(|&n| Observation { bytes: n, seconds: s }).collect() };
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    m.add(&key("dlpack"), flat(16e-6), Some(true));
    m.add(&key("capsule"), flat(2.3e-6), Some(true));
    m.add(&key("cai"), flat(9.4e-6), Some(true));
    let facts = AutoFacts { target_name: "cupy", source_name: "torch", model: Some(&m), ..facts(Endpoints::default(), Place::Device(0)) };
    // The capsule is fastest but carries no stream into CuPy: the fastest ordered path is cai.
    assert_eq!(resolve_auto(&facts).path, "cai");
    assert!(!orders_finished_values(Share, "capsule", &Endpoints::default(), true));
    assert!(orders_finished_values(Share, "capsule", &Endpoints::default(), false));
    let tf = Endpoints { target_accepts_objects: false, ..Endpoints::default() };
    assert!(orders_finished_values(Share, "capsule", &tf, true));
}

#[test]
fn on_the_host_a_faster_capsule_replaces_dlpack_where_it_loses_no_flag() {
    use crate::advice::model::{CostKey, CostModel, Observation};
    // tf→torch and numpy→torch on a CPU: capsule 2.5 µs, DLPack 5.2.
    let key = |source: &str, path: &str| CostKey { kind: crate::paths::PathKind::Share, path: path.into(), source: source.into(), target: "torch".into(), place: "cpu".into() };
    let flat = |s: f64| -> Vec<Observation> { [1u64 << 16, 1 << 20, 1 << 24].iter().map(|&n| Observation { bytes: n, seconds: s }).collect() };
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    for source in ["tf", "numpy"] {
        m.add(&key(source, "dlpack"), flat(5.2e-6), Some(true));
        m.add(&key(source, "capsule"), flat(2.5e-6), Some(true));
    }
    let on_host = |source: &'static str| AutoFacts { target_name: "torch", source_name: source, model: Some(&m), ..facts(known_endpoints_for(source), Place::Host) };
    assert_eq!(resolve_auto(&on_host("tf")).path, "capsule");
    // NumPy refuses a read-only array by legacy capsule: the capsule only for an array known writable.
    assert_eq!(resolve_auto(&on_host("numpy")).path, "dlpack");
    assert_eq!(resolve_auto(&AutoFacts { source_readonly: Some(true), ..on_host("numpy") }).path, "dlpack");
    assert_eq!(resolve_auto(&AutoFacts { source_readonly: Some(false), ..on_host("numpy") }).path, "capsule");
}

fn known_endpoints_for(source: &str) -> Endpoints {
    crate::explain::fixtures::endpoints(source, "torch")
}

#[test]
fn a_busy_producer_moves_auto_to_a_calibrated_path_ordered_on_the_device() {
    use crate::advice::model::{CostKey, CostModel, Observation};
    let key = |path: &str| CostKey { kind: crate::paths::PathKind::Share, path: path.into(), source: "torch".into(), target: "jax".into(), place: "cuda:0".into() };
    let flat = |s: f64| -> Vec<Observation> { [1u64 << 16, 1 << 20, 1 << 24].iter().map(|&n| Observation { bytes: n, seconds: s }).collect() };
    let key_tf = |path: &str| CostKey { target: "tf".into(), ..key(path) };
    let mut m = CostModel::new(serde_json::json!({}), 0.0);
    // torch→jax on an idle H200: dlpack is the faster; JAX's DLPack import waits on the host.
    m.add(&key("dlpack"), flat(20e-6), Some(true));
    m.add(&key("cai"), flat(40e-6), Some(true));
    m.add(&key("copy"), flat(10e-6), Some(false));
    m.add(&key_tf("capsule"), flat(8e-6), Some(true));
    m.add(&key_tf("copy"), flat(9e-6), Some(false));
    let jax = Endpoints { target_import_waits: true, ..Endpoints::default() };
    let idle = AutoFacts { target_name: "jax", source_name: "torch", model: Some(&m), ..facts(jax, Place::Device(0)) };
    assert_eq!(resolve_auto(&idle).path, "dlpack");
    let busy = AutoFacts { producer_busy: true, ..idle };
    let choice = resolve_auto(&busy);
    assert_eq!(choice.path, "cai");
    let why = choice.why.unwrap();
    assert!(why.contains("busy") && why.contains("dlpack waits on the host"), "{why}");
    // Without the model the rules stand; from host memory nothing waits.
    assert_eq!(resolve_auto(&AutoFacts { model: None, ..busy }).path, "dlpack");
    assert_eq!(resolve_auto(&AutoFacts { source: Place::Host, ..busy }).path, "dlpack");
    // Into TensorFlow every sharing path waits: the capsule stays (the copy never replaces a share).
    let tf = Endpoints { target_accepts_objects: false, ..Endpoints::default() };
    let into_tf = AutoFacts { target_name: "tf", endpoints: tf, ..busy };
    assert_eq!(resolve_auto(&into_tf).path, "capsule");
}

#[test]
fn a_busy_producer_takes_the_frameworks_own_move_over_a_peer_copy_that_waits() {
    let m = move_model(&[("p2p", 15e-6, 394e9), ("move", 20e-6, 385e9)]);
    let idle = move_facts(Some(&m), Some(256 << 20));
    assert_eq!(resolve_auto(&idle).path, "p2p");
    assert_eq!(resolve_auto(&AutoFacts { producer_busy: true, ..idle }).path, "move");
}

#[test]
fn auto_decides_for_the_arrays_size_once_per_range_where_the_paths_order_holds() {
    // The framework's own move starts sooner, the peer copy streams faster: equal at 24 MB.
    let m = move_model(&[("p2p", 30e-6, 400e9), ("move", 10e-6, 300e9)]);
    let at = |nbytes: u64| move_facts(Some(&m), Some(nbytes));
    let small = resolve_auto(&at(1 << 20));
    assert_eq!(small.path, "move");
    // The words give the predictions at the array's own size.
    assert!(small.why.as_deref().unwrap().contains("move fastest for arrays below 22.9 MiB ("), "{:?}", small.why);
    assert_eq!(resolve_auto(&at(256 << 20)).path, "p2p");
    let breaks = auto_size_breaks(&at(0));
    let crossing = 24_000_000u64;
    assert!(breaks.iter().any(|b| b.abs_diff(crossing) < 2), "{breaks:?}");
    // Every size of one range gets the same path as the size the range is decided at.
    for n in [1u64, 4096, 1 << 20, 23_000_000, 25_000_000, 1 << 30] {
        let class_size = crate::advice::crossings::decision_size(&breaks, n);
        assert_eq!(resolve_auto(&at(n)).path, resolve_auto(&at(class_size)).path, "{n}");
        assert_eq!(resolve_auto(&at(n)).path, if n < crossing { "move" } else { "p2p" }, "{n}");
    }
    // Without a model, or for a pair it does not know, no ranges.
    assert!(auto_size_breaks(&AutoFacts { model: None, ..at(0) }).is_empty());
    assert!(auto_size_breaks(&AutoFacts { source_name: "jax", target_name: "jax", ..at(0) }).is_empty());
}

#[test]
fn a_range_whose_second_path_is_predicted_within_the_models_error_says_which() {
    // Exact lines: each fit's stated error is the goal's floor (30 % below 1 MiB, 15 % from it up).
    // move starts sooner, p2p streams faster; dlpack far behind at every size.
    let model = |p2p_fixed: f64| move_model(&[("p2p", p2p_fixed, 400e9), ("move", 10e-6, 300e9), ("dlpack", 80e-6, 100e9)]);
    let at = |m: &crate::advice::model::CostModel, nbytes: u64| -> Vec<AutoRange> {
        let f = move_facts(Some(m), Some(nbytes));
        assert_eq!(auto_close_second(&f), auto_ranges(&f).iter().find(|r| r.from <= nbytes && r.below.is_none_or(|b| nbytes < b)).unwrap().close);
        auto_ranges(&f)
    };
    // Lines 2 µs apart that cross at 2.4 MB: each range is decided where the two lie within 8 %
    // of each other, inside the 15 % error each states. dlpack is never the close second.
    let tie = model(12e-6);
    let ranges = at(&tie, 1 << 20);
    assert_eq!(ranges.iter().map(|r| (r.path, r.close)).collect::<Vec<_>>(), vec![("move", Some("p2p")), ("p2p", Some("move"))]);
    assert_eq!(ranges[0].from, 0);
    assert_eq!(ranges[0].below, Some(ranges[1].from));
    assert_eq!(ranges[1].below, None);
    // 20 µs apart (crossing at 24 MB): the range below is decided at 11.4 MiB, move 50 µs against
    // p2p's 60 (20 %): no tie; the one above at 48 MB, p2p 150 µs against move's 170 (13 %): a tie.
    let apart = model(30e-6);
    let ranges = at(&apart, 1 << 20);
    assert_eq!(ranges.iter().map(|r| (r.path, r.close)).collect::<Vec<_>>(), vec![("move", None), ("p2p", Some("move"))]);
    // Without a model: one range, no second.
    let none = AutoFacts { destination: Some(Place::Device(1)), peer_access: Some(true), ..facts(Endpoints::default(), Place::Device(0)) };
    assert_eq!(auto_ranges(&none), vec![AutoRange { from: 0, below: None, path: "p2p", close: None }]);
    assert_eq!(auto_close_second(&none), None);
}
