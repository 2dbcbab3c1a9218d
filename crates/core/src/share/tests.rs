//! The pipeline against a framework made of plain Rust values: what it calls, in which order, and
//! what it reports, without Python.

use std::cell::{Cell, RefCell};

use super::*;
use crate::explain::TargetFacts;

/// An array: an address, a length in elements of `dtype` (`float32` or `float64`), strides, and on
/// which device.
#[derive(Debug, Clone)]
struct Buf {
    ptr: u64,
    len: i64,
    strides: Vec<i64>,
    device: (u32, i32),
    dtype: &'static str,
    /// Held by every result of a route, so the route can count the results still alive (held,
    /// never read: its Rc's count is the point).
    #[allow(dead_code)]
    result_of: Option<std::rc::Rc<()>>,
}

/// Two arrays are equal when they describe the same memory, whichever route made them.
impl PartialEq for Buf {
    fn eq(&self, other: &Buf) -> bool {
        (self.ptr, self.len, &self.strides, self.device, self.dtype) == (other.ptr, other.len, &other.strides, other.device, other.dtype)
    }
}

fn buf(ptr: u64, len: i64) -> Buf {
    Buf { ptr, len, strides: vec![1], device: (1, 0), dtype: "float32", result_of: None }
}

struct Fake {
    name: &'static str,
    log: RefCell<Vec<String>>,
    refuse_export: bool,
    /// As gpushare's adapters say: JAX's import can fail only when waited on.
    settles_later: bool,
}

fn fake(name: &'static str) -> Fake {
    Fake { name, log: RefCell::new(vec![]), refuse_export: false, settles_later: name == "jax" }
}

struct Info(TensorReport);

impl AsRef<TensorReport> for Info {
    fn as_ref(&self) -> &TensorReport {
        &self.0
    }
}

impl From<Info> for TensorReport {
    fn from(info: Info) -> TensorReport {
        info.0
    }
}

impl Framework for Fake {
    type Array = Buf;
    type Info = Info;

    fn name(&self) -> &str {
        self.name
    }
    fn describe(&self, a: &Buf) -> Result<Info> {
        self.log.borrow_mut().push("describe".into());
        let itemsize = if a.dtype == "float64" { 8 } else { 4 };
        let extent = if a.len == 0 { 0 } else { itemsize * (1 + (a.len - 1) * a.strides[0].abs()) as u64 };
        Ok(Info(TensorReport {
            framework: self.name.into(),
            dtype: a.dtype.into(),
            shape: vec![a.len],
            strides: a.strides.clone(),
            device: "cpu".into(),
            dlpack_device: a.device,
            dlpack_device_name: format!("{}:{}", if a.device.0 == 1 { "cpu" } else { "cuda" }, a.device.1),
            data_ptr: a.ptr,
            byte_offset: 0,
            nbytes: extent,
            span: (a.ptr, a.ptr + extent),
            contiguous: a.strides == [1],
            alignment: 64,
            readonly: false,
            dlpack_version: None,
            cuda: None,
        }))
    }
    fn check_source(&self, _a: &Buf, _target: &str, _path: &str) -> Result<()> {
        self.log.borrow_mut().push("check".into());
        if self.refuse_export {
            return Err(Error::Framework { text: "RuntimeError: requires grad".into(), origin: None });
        }
        Ok(())
    }
    fn synchronize(&self, _a: &Buf) -> Result<()> {
        self.log.borrow_mut().push("sync".into());
        Ok(())
    }
    fn import_settles_later(&self) -> bool {
        self.settles_later
    }
}

/// A route that views (`copy = false`) or copies to a new address; one that `narrows` hands back
/// a float32 result at the source's own address, as JAX reported a pending narrowing of a
/// misaligned 64-bit buffer on an H200.
struct Via {
    path: &'static str,
    copy: bool,
    narrows: bool,
    fail_with: Option<&'static str>,
    calls: Cell<u64>,
    /// How long each conversion takes.
    takes: std::time::Duration,
    /// Every result holds a clone: the count beyond this one is the results alive.
    results: std::rc::Rc<()>,
    /// The most results alive when a conversion began.
    most_alive_at_a_call: Cell<usize>,
}

fn via(path: &'static str, copy: bool) -> Via {
    Via {
        path,
        copy,
        narrows: false,
        fail_with: None,
        calls: Cell::new(0),
        takes: std::time::Duration::ZERO,
        results: std::rc::Rc::new(()),
        most_alive_at_a_call: Cell::new(0),
    }
}

impl Route<Buf> for Via {
    fn path(&self) -> &str {
        self.path
    }
    fn convert(&self, a: &Buf) -> Result<Buf> {
        self.calls.set(self.calls.get() + 1);
        let alive = std::rc::Rc::strong_count(&self.results) - 1;
        self.most_alive_at_a_call.set(self.most_alive_at_a_call.get().max(alive));
        std::thread::sleep(self.takes);
        if let Some(text) = self.fail_with {
            return Err(Error::Framework { text: text.into(), origin: None });
        }
        let result = if self.copy {
            Buf { ptr: a.ptr + 0x10_0000, strides: vec![1], ..a.clone() }
        } else if self.narrows {
            Buf { dtype: "float32", ..a.clone() }
        } else {
            a.clone()
        };
        Ok(Buf { result_of: Some(self.results.clone()), ..result })
    }
}

struct NoHost;

impl Host for NoHost {
    fn check_interrupt(&self) -> Result<()> {
        Ok(())
    }
}

fn handoff<'a>(src: &'a Fake, dst: &'a Fake, route: &'a Via, predictor: Option<&'a Predict<'a>>) -> Handoff<'a, Fake> {
    Handoff { source: src, target: dst, route, predictor, check_source: true }
}

/// The rules' prediction for a target framework by `path`.
fn rules(target: &'static str, path: &'static str) -> impl Fn(&TensorReport) -> Result<Option<PredictedOutcome>> {
    let facts = TargetFacts::new(target, "", path);
    move |source| Ok(Some(explain::predict(source, &facts)))
}

#[test]
fn a_view_is_shared_and_timed_once_by_default() {
    let (src, dst, route) = (fake("numpy"), fake("torch"), via("dlpack", false));
    let out = handoff(&src, &dst, &route, None).run(&NoHost, &buf(0x1000, 8), &Options::default()).unwrap();
    assert_eq!(out.report.verdict, Verdict::Shared);
    assert!(out.report.timing.is_single());
    assert_eq!(route.calls.get(), 1);
    assert_eq!(out.value, buf(0x1000, 8));
    // Host memory: nothing to synchronise.
    assert_eq!(*src.log.borrow(), ["describe", "check"]);
    assert_eq!(*dst.log.borrow(), ["describe"]);
}

#[test]
fn one_conversion_into_jax_is_waited_for_outside_the_timing_unless_it_views_the_source_as_it_is() {
    // An asynchronous failure (JAX's narrowing kernel on a misaligned buffer) surfaces only when
    // the result is waited on, and JAX can report the pending result at the source's own address,
    // in the narrower dtype: a copy and a changed dtype are waited for. A view of the source's
    // bytes as they are queued nothing that could fail.
    let a = Buf { device: (2, 0), dtype: "float64", ..buf(0x1000, 8) };
    for (route, waited) in [(via("dlpack", true), true), (Via { narrows: true, ..via("dlpack", false) }, true), (via("dlpack", false), false)] {
        let (src, dst) = (fake("cupy"), fake("jax"));
        let out = handoff(&src, &dst, &route, None).run(&NoHost, &a, &Options::default()).unwrap();
        let expected: &[&str] = if waited { &["describe", "sync"] } else { &["describe"] };
        assert_eq!(*dst.log.borrow(), expected, "{:?} {}", out.report.verdict, out.report.target.dtype);
        assert!(!src.log.borrow().contains(&"sync".to_string()), "the source is not waited on for one call");
    }
}

#[test]
fn a_result_whose_making_failed_asynchronously_is_a_failure() {
    struct FailsWhenWaited(Fake);
    impl Framework for FailsWhenWaited {
        type Array = Buf;
        type Info = Info;
        fn name(&self) -> &str {
            self.0.name()
        }
        fn describe(&self, a: &Buf) -> Result<Info> {
            self.0.describe(a)
        }
        fn synchronize(&self, _a: &Buf) -> Result<()> {
            Err(Error::Framework { text: "JaxRuntimeError: INTERNAL: Address of buffer 0 must be a multiple of 10".into(), origin: None })
        }
        fn import_settles_later(&self) -> bool {
            true
        }
    }
    // JAX reported the pending narrowing at the source's address (H200).
    let (src, dst) = (FailsWhenWaited(fake("cupy")), FailsWhenWaited(fake("jax")));
    let copy = Via { narrows: true, ..via("dlpack", false) };
    let a = Buf { device: (2, 0), dtype: "float64", ..buf(0x1008, 8) };
    let h = Handoff { source: &src, target: &dst, route: &copy, predictor: None, check_source: false };
    let err = h.run(&NoHost, &a, &Options::default()).err().expect("the wait reports the failure");
    let Error::Conversion { framework_error, reason, .. } = &err else { panic!("{err}") };
    assert!(framework_error.as_deref().is_some_and(|t| t.contains("must be a multiple of 10")), "{err}");
    assert!(reason.contains("16-byte"), "explained as the known XLA failure: {reason}");
}

#[test]
fn a_single_share_waits_only_for_imports_that_settle_later() {
    // A single share is the raw call's host time: waiting for a target that viewed the memory at
    // once would block on every kernel the user queued on the device, for nothing.
    let a = Buf { device: (2, 0), ..buf(0x1000, 8) };
    for target in ["torch", "cupy", "numba", "tf"] {
        let (src, dst, route) = (fake("cupy"), fake(target), via("dlpack", false));
        handoff(&src, &dst, &route, None).run(&NoHost, &a, &Options::default()).unwrap();
        assert_eq!(*dst.log.borrow(), ["describe"], "a view into {target} is not waited for");
    }
    let (src, dst, route) = (fake("numpy"), fake("jax"), via("dlpack", false));
    handoff(&src, &dst, &route, None).run(&NoHost, &buf(0x1000, 8), &Options::default()).unwrap();
    assert_eq!(*dst.log.borrow(), ["describe"], "host memory is never waited for");
}

#[test]
fn a_copy_on_device_memory_is_timed_to_its_end_through_the_source_unless_its_context_covers_it() {
    // The fake's memory has no driver report (`cuda: None`), so only the framework's own
    // synchronise can wait for a copy queued on its streams: it must be called.
    let a = Buf { device: (2, 0), ..buf(0x1000, 8) };
    let (src, dst, route) = (fake("torch"), fake("torch"), via("copy", true));
    let out = handoff(&src, &dst, &route, None).run(&NoHost, &a, &Options::default()).unwrap();
    assert!(!timing::context_covers_source(&out.report.source));
    assert_eq!(src.log.borrow().iter().filter(|s| *s == "sync").count(), 1, "{:?}", src.log.borrow());
    // A primary context covers the source's streams only where a driver synchronises it.
    let mut primary = out.report.source.clone();
    primary.cuda = Some(std::sync::Arc::new(serde_json::json!({"context_is_primary": true})));
    assert_eq!(timing::context_covers_source(&primary), crate::cuda::driver_status().is_available());
    primary.dlpack_device = (1, 0);
    assert!(!timing::context_covers_source(&primary), "host memory has no context to synchronise");
}

#[test]
fn a_copying_path_says_it_copies_by_design() {
    let (src, dst, route) = (fake("numpy"), fake("torch"), via("host", true));
    let out = handoff(&src, &dst, &route, None).run(&NoHost, &buf(0x1000, 8), &Options::default()).unwrap();
    assert_eq!(out.report.verdict, Verdict::Copied);
    assert_eq!(out.report.reason.as_deref(), explain::copied_by_design("host"));
}

#[test]
fn a_fixed_policy_times_repeat_samples_and_synchronises_device_memory() {
    let (src, dst, route) = (fake("cupy"), fake("torch"), via("dlpack", false));
    let a = Buf { device: (2, 0), ..buf(0x1000, 8) };
    let options = Options { timing: TimingPolicy::fixed(3, 2, 1), ..Options::default() };
    let out = handoff(&src, &dst, &route, None).run(&NoHost, &a, &options).unwrap();
    assert_eq!(out.report.timing.samples.len(), 3);
    assert_eq!(out.report.timing.loops, 2);
    assert_eq!(out.report.timing.warmup, 1);
    assert_eq!(route.calls.get(), 1 + 3 * 2);
    let syncs = |f: &Fake| f.log.borrow().iter().filter(|s| *s == "sync").count();
    assert_eq!((syncs(&src), syncs(&dst)), (3, 4), "both edges of each of 3 samples, and after the warm-up");
}

#[test]
fn each_result_is_dropped_before_the_next_conversion_in_warm_ups_and_samples_alike() {
    // As timeit does: holding a result alive across the next call would change what an allocator
    // hands out, and each call's time is a call and the release of the result before it.
    let (src, dst) = (fake("numpy"), fake("torch"));
    for copy in [false, true] {
        let route = via("dlpack", copy);
        let options = Options { timing: TimingPolicy::fixed(3, 4, 3), ..Options::default() };
        let out = handoff(&src, &dst, &route, None).run(&NoHost, &buf(0x1000, 8), &options).unwrap();
        assert_eq!(route.calls.get(), 3 + 3 * 4);
        assert_eq!(route.most_alive_at_a_call.get(), 0, "copy={copy}: a result was alive at the next call");
        drop(out);
    }
}

#[test]
fn the_prediction_is_made_before_and_kept_beside_the_outcome() {
    let (src, dst, route) = (fake("numpy"), fake("torch"), via("dlpack", false));
    let rules = rules("torch", "dlpack");
    let out = handoff(&src, &dst, &route, Some(&rules)).run(&NoHost, &buf(0x1000, 8), &Options::default()).unwrap();
    let predicted = out.report.predicted.clone().unwrap();
    assert_eq!(predicted.verdict, Verdict::Shared);
    assert!(!out.report.unexpected());
}

#[test]
fn crash_class_inputs_are_refused_before_the_framework_is_called() {
    let (src, dst, route) = (fake("numpy"), fake("torch"), via("dlpack", false));
    let reversed = Buf { ptr: 0x1000 + 28, strides: vec![-1], ..buf(0, 8) };
    let rules = rules("torch", "dlpack");
    let err = handoff(&src, &dst, &route, Some(&rules)).run(&NoHost, &reversed, &Options::default()).err().unwrap();
    assert!(matches!(err, Error::UnsafeInput { .. }), "{err}");
    assert_eq!(err.predicted().map(|p| p.verdict()), Some(Verdict::Failed));
    assert_eq!(route.calls.get(), 0, "never called");
    // The host route hands torch a fresh compact copy: nothing to refuse.
    let host = via("host", true);
    assert!(handoff(&src, &dst, &host, None).run(&NoHost, &reversed, &Options::default()).is_ok());
}

#[test]
fn a_framework_failure_is_explained_with_the_prediction() {
    let (src, dst) = (fake("numpy"), fake("torch"));
    let route = Via { fail_with: Some("BufferError: nope"), ..via("dlpack", false) };
    let rules = rules("torch", "dlpack");
    let err = handoff(&src, &dst, &route, Some(&rules)).run(&NoHost, &buf(0x1000, 8), &Options::default()).err().unwrap();
    let Error::Conversion { message, framework_error, predicted, .. } = &err else { panic!("{err}") };
    assert_eq!(framework_error.as_deref(), Some("BufferError: nope"));
    assert!(message.starts_with("numpy → torch via dlpack failed"), "{message}");
    assert!(message.contains("UNEXPECTED"), "predicted shared, then failed: {message}");
    assert!(predicted.is_some());
}

#[test]
fn a_source_the_framework_will_not_export_fails_at_inspection() {
    let (mut src, dst, route) = (fake("torch"), fake("numpy"), via("dlpack", false));
    src.refuse_export = true;
    let err = handoff(&src, &dst, &route, None).run(&NoHost, &buf(0x1000, 8), &Options::default()).err().unwrap();
    assert!(err.to_string().starts_with("torch → numpy failed describing the torch source"), "{err}");
    assert_eq!(route.calls.get(), 0);
}

#[test]
fn a_chain_hop_says_whether_it_still_shares_the_origin() {
    let (src, dst, route) = (fake("numpy"), fake("torch"), via("dlpack", false));
    let h = handoff(&src, &dst, &route, None);
    let origin = src.describe(&buf(0x1000, 8)).unwrap().0;
    let options = Options { origin: Some(origin), ..Options::default() };
    assert_eq!(h.run(&NoHost, &buf(0x1000, 4), &options).unwrap().report.shares_origin, Some(true));
    assert_eq!(h.run(&NoHost, &buf(0x9000, 4), &options).unwrap().report.shares_origin, Some(false));
}

#[test]
fn bad_timing_is_a_usage_error_before_anything_runs() {
    let (src, dst, route) = (fake("numpy"), fake("torch"), via("dlpack", false));
    let options = Options { timing: TimingPolicy::fixed(0, 1, 0), ..Options::default() };
    let err = handoff(&src, &dst, &route, None).run(&NoHost, &buf(0x1000, 8), &options).err().unwrap();
    assert!(matches!(err, Error::Usage(_)));
    assert!(src.log.borrow().is_empty());
}

#[test]
fn stream_reports_say_what_ordered_the_two_sides() {
    let req = |stream| vec![StreamRequest { stream, max_version: Some((1, 0)) }];
    assert!(StreamReport::of("capsule", Some(7), &req(Some(7))).wait.starts_with("none: this route carries no stream"));
    assert!(StreamReport::of("dlpack", Some(7), &req(Some(7))).wait.contains("same stream"));
    assert!(StreamReport::of("dlpack", Some(7), &req(Some(9))).wait.contains("wait on its stream 7"));
    assert!(StreamReport::of("dlpack", Some(7), &req(Some(-1))).wait.contains("stream=-1"));
    assert!(StreamReport::of("dlpack", Some(7), &req(None)).wait.contains("legacy default stream"));
    // A route that orders the work itself (TensorFlow's) says so in place of the stream argument.
    let ordered = StreamReport::of("dlpack", Some(7), &req(None)).ordered_by(Some("TensorFlow's export waits"));
    assert_eq!(ordered.wait, "TensorFlow's export waits");
    assert!(StreamReport::of("dlpack", Some(7), &req(None)).ordered_by(None).wait.contains("legacy default stream"));
}

#[test]
fn the_ledger_subtracts_figures_present_both_times() {
    use std::collections::BTreeMap;
    let figures = |a: i64| BTreeMap::from([("torch".to_string(), BTreeMap::from([("allocated".to_string(), a)]))]);
    let before = MemorySnapshot { ordinal: 0, driver_free: Some(100 << 20), driver_total: Some(1 << 30), frameworks: figures(0) };
    let after = MemorySnapshot { driver_free: Some(36 << 20), frameworks: figures(64 << 20), ..before.clone() };
    let ledger = MemoryLedger::between(&before, &after, 0.0);
    assert_eq!(ledger.summary, "driver +64 MiB; torch allocated +64 MiB");
    assert_eq!(MemoryLedger::between(&before, &before, 0.0).summary, "driver ±0 B");
    let no_driver = MemorySnapshot { driver_free: None, ..before.clone() };
    assert_eq!(MemoryLedger::between(&no_driver, &no_driver, 0.0).summary, "no change");
    assert_eq!(MemoryLedger::between(&no_driver, &after, 0.0).driver_used, None, "a driver figure missing either time");
    // A framework or a figure asked only afterwards (imported meanwhile) is left out, not counted
    // from zero; the figures of one framework are listed together, each with its sign.
    let mut later = after.clone();
    later.frameworks.get_mut("torch").unwrap().insert("reserved".into(), 64 << 20);
    later.frameworks.insert("cupy".into(), BTreeMap::from([("used".to_string(), 5)]));
    let mut earlier = before.clone();
    earlier.frameworks.get_mut("torch").unwrap().insert("reserved".into(), 128 << 20);
    let ledger = MemoryLedger::between(&earlier, &later, 1.5);
    assert_eq!(ledger.driver_used, Some(64 << 20));
    assert_eq!(ledger.frameworks.keys().collect::<Vec<_>>(), ["torch"]);
    assert_eq!(ledger.summary, "driver +64 MiB; torch allocated +64 MiB, reserved -64 MiB");
    assert_eq!(ledger.seconds, 1.5);
}

#[test]
fn an_observed_handoff_is_the_first_warm_up() {
    // The magics time within a budget (one warm-up) with observation on: the observed handoff is
    // untimed and waited for, so a second untimed conversion before the samples would only cost.
    let (src, dst, route) = (fake("cupy"), fake("torch"), via("dlpack", false));
    let a = Buf { device: (2, 0), ..buf(0x1000, 8) };
    let options = Options { timing: TimingPolicy::fixed(2, 3, 1), observe: true, ..Options::default() };
    let out = handoff(&src, &dst, &route, None).run(&NoHost, &a, &options).unwrap();
    assert_eq!(route.calls.get(), 1 + 2 * 3, "the observed handoff, then the samples: no other warm-up");
    assert_eq!(out.report.timing.warmup, 1, "reported as the one warm-up the policy asked for");
    assert!(out.report.streams.is_some());
    // Without observation the warm-up runs as asked; on the host nothing is observed.
    let route = via("dlpack", false);
    let unobserved = Options { observe: false, ..options.clone() };
    handoff(&src, &dst, &route, None).run(&NoHost, &a, &unobserved).unwrap();
    assert_eq!(route.calls.get(), 1 + 2 * 3);
    let route = via("dlpack", false);
    let out = handoff(&src, &dst, &route, None).run(&NoHost, &buf(0x1000, 8), &options).unwrap();
    assert_eq!((route.calls.get(), out.report.timing.warmup), (1 + 2 * 3, 1), "host memory: the warm-up runs");
}

/// A host whose allocators take `reading` to answer (the ledger's readings around an observed handoff).
struct SlowLedger {
    reading: std::time::Duration,
}

impl Host for SlowLedger {
    fn check_interrupt(&self) -> Result<()> {
        Ok(())
    }
    fn allocator_memory(&self, _ordinal: i32) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, i64>> {
        std::thread::sleep(self.reading);
        std::collections::BTreeMap::new()
    }
}

#[test]
fn the_observed_handoff_is_untimed_handoff_time_and_the_ledger_is_not() {
    // What a caller's own work is measured against (the magics' budget): every handoff the
    // measurement made. The observed handoff is one, as the warm-up it stands for would be; the
    // ledger's readings around it are the caller's own work.
    use std::time::Duration;
    let (src, dst) = (fake("cupy"), fake("torch"));
    let route = Via { takes: Duration::from_millis(20), ..via("dlpack", false) };
    let a = Buf { device: (2, 0), ..buf(0x1000, 8) };
    let options = Options { timing: TimingPolicy::fixed(1, 1, 1), observe: true, ..Options::default() };
    let host = SlowLedger { reading: Duration::from_millis(500) };
    let out = handoff(&src, &dst, &route, None).run(&host, &a, &options).unwrap();
    let timing = &out.report.timing;
    assert_eq!(timing.warmup, 1);
    assert!(timing.untimed >= 0.020, "the observed handoff's 20 ms are untimed handoff time: {timing:?}");
    assert!(timing.untimed < 0.5, "the ledger's two 500 ms readings are not: {timing:?}");
}

#[test]
fn a_source_described_once_runs_every_route_without_describing_it_again() {
    // The lab: one description of the array, then each path checked, predicted, refused and converted.
    let (src, dst) = (fake("numpy"), fake("torch"));
    let array = buf(0x1000, 8);
    let (dlpack, host) = (via("dlpack", false), via("host", true));
    let described = handoff(&src, &dst, &dlpack, None).describe(&array).unwrap();
    let mut verdicts = Vec::new();
    for route in [&dlpack, &host] {
        let h = handoff(&src, &dst, route, None);
        let again = Info(described.0.clone());
        let (source, predicted) = h.prepare_described(&array, again).unwrap();
        verdicts.push(h.convert_prepared(&NoHost, &array, source, predicted, &Options::default()).unwrap().report.verdict);
    }
    assert_eq!(verdicts, [Verdict::Shared, Verdict::Copied]);
    assert_eq!(*src.log.borrow(), ["describe", "check", "check"], "described once, checked per path");
    // A reversed view is still refused per path, from the one description.
    let reversed = Buf { ptr: 0x1000 + 28, strides: vec![-1], ..buf(0, 8) };
    let described = handoff(&src, &dst, &dlpack, None).describe(&reversed).unwrap();
    let err = handoff(&src, &dst, &dlpack, None).prepare_described(&reversed, described).err().unwrap();
    assert!(matches!(err, ShareError::UnsafeInput { .. }), "{err}");
}
