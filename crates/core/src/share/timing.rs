//! How a share is timed: the one timing loop of gpushare (the API, the magics, the lab, the
//! calibration and process handoffs all run it).
//!
//! Where it changes the figure the method is `torch.utils.benchmark.Timer`'s: warm-up runs first;
//! every framework is synchronised at the edges of a sample and never between its calls; the
//! garbage collector is paused during a sample (as `timeit` does); with no fixed number of calls
//! per sample, the number grows until a sample lasts long enough that its fixed cost is at most
//! 0.1 % of it. A budget in seconds bounds how many samples are taken, the way `%timeit` bounds its
//! runs, so a cell of several arrays answers quickly.

use std::time::Instant;

use super::error::Result;
use crate::paths::PathKind;

/// Most calls per sample that auto-ranging chooses.
pub const MAX_AUTO_NUMBER: u64 = 100_000;
/// torch.utils.benchmark's documented goal: a sample's fixed cost at most 0.1 % of it.
pub const MAX_OVERHEAD: f64 = 1e-3;

/// How many samples to take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Repeat {
    /// Exactly this many (`-r`).
    Exactly(usize),
    /// Samples until `budget` seconds have been spent on them and at least `at_least` were taken,
    /// at most `at_most`; never past `5 × budget` once one sample exists (a slow copy).
    Within { budget: f64, at_least: usize, at_most: usize },
}

/// How a handoff is timed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimingPolicy {
    /// Untimed runs first: they pay one-time costs (imports, allocator pools, page-locking).
    pub warmup: usize,
    /// Calls per sample (`-n`); `None` chooses it (auto-ranging).
    pub number: Option<u64>,
    pub repeat: Repeat,
    /// With `number: None`, a sample lasts at least this long.
    pub min_sample_time: f64,
    /// With `number: None`, the largest share of a sample its fixed cost may take.
    pub max_overhead: f64,
    /// Pause the garbage collector during a sample.
    pub pause_collector: bool,
}

impl TimingPolicy {
    /// One conversion, reported as one sample: what `gpushare.share()` does unless asked.
    pub const fn once() -> TimingPolicy {
        TimingPolicy {
            warmup: 0,
            number: Some(1),
            repeat: Repeat::Exactly(1),
            min_sample_time: 0.0,
            max_overhead: MAX_OVERHEAD,
            pause_collector: false,
        }
    }

    /// `repeat` samples of `number` calls after `warmup` runs (`%timeit -n N -r R`).
    pub const fn fixed(repeat: usize, number: u64, warmup: usize) -> TimingPolicy {
        TimingPolicy { warmup, number: Some(number), repeat: Repeat::Exactly(repeat), min_sample_time: 0.0, max_overhead: MAX_OVERHEAD, pause_collector: true }
    }

    /// `%timeit`'s way within a budget: one warm-up, calls per sample auto-ranged so a sample lasts
    /// about a tenth of the budget, samples until the budget is spent (at least 3, at most 1000).
    pub fn within(budget: f64) -> TimingPolicy {
        TimingPolicy {
            warmup: 1,
            number: None,
            repeat: Repeat::Within { budget, at_least: 3, at_most: 1000 },
            min_sample_time: (budget / 10.0).max(1e-4),
            max_overhead: MAX_OVERHEAD,
            pause_collector: true,
        }
    }

    /// True when the result is one call, measured once.
    pub fn is_once(&self) -> bool {
        self.warmup == 0 && self.number == Some(1) && self.repeat == Repeat::Exactly(1)
    }

    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.number == Some(0) {
            return Err("number (-n) must be at least 1".into());
        }
        match self.repeat {
            Repeat::Exactly(0) => Err("repeat (-r) must be at least 1".into()),
            Repeat::Within { budget, .. } if !(budget.is_finite() && budget > 0.0) => {
                Err(format!("the time budget must be a positive number of seconds, got {budget}"))
            }
            _ => Ok(()),
        }
    }
}

/// How a sample's edges wait for the device, for one route.
///
/// `synchronise`: every framework is synchronised at both edges of a sample (anything more than one
/// conversion on device memory, or in host memory where a framework queues host work:
/// `Framework::queues_host_work`), so queued work lands in the sample it belongs to.
/// `settle`: the route copies (the path table says it copies by design, or it is a move), so the
/// sample ends when the copy has landed: the target, the source and the source's CUDA context are
/// waited for inside the timing. A copy queued on the source's stream (gpushare's `copy` on
/// torch's current stream, or on the legacy stream for TensorFlow) is not waited for by the
/// target's synchronise alone (TensorFlow's SyncDevice waits for its own streams): without this an
/// H100 timed a 64 MiB `copy` into TensorFlow at 13.4 µs beside its own 47.6 µs device time.
///
/// `target`: whether the target framework is waited for at a sample's end as well. Not where the
/// route is gpushare's own copy in the source's context (the settle waits for all of it) and the
/// target views gpushare's buffer without device work of its own (`Framework::views_gpushare_buffers`):
/// the target's synchronise would wait a second time, through the framework's Python, for the same
/// copy (across two GPUs, for the event its stream waits on: about 5 µs of `share(device=)` at
/// 256 MiB on an H200 pair, where the goal leaves 21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edges {
    pub synchronise: bool,
    pub settle: bool,
    pub target: bool,
}

impl Edges {
    /// The edges of route `path` of `kind` for an array in device memory (`on_device`), where
    /// work can still be queued when a call returns (`queued`: on a device, or a framework's host
    /// work), under `policy`, into a target that views gpushare's own buffers in place
    /// (`target_views_own_copy`) or not.
    pub fn of(kind: PathKind, path: &str, on_device: bool, queued: bool, policy: &TimingPolicy, target_views_own_copy: bool) -> Edges {
        let copies = kind == PathKind::Move || crate::paths::copied_by_design(kind, path).is_some();
        let settle = on_device && copies;
        let settle_covers_all = settle && target_views_own_copy && crate::paths::copies_in_source_context(kind, path);
        Edges { synchronise: (on_device || queued) && !policy.is_once(), settle, target: !settle_covers_all }
    }

    /// Whether the target is waited for inside the timed part of a sample.
    pub fn waits_for_target(&self) -> bool {
        (self.synchronise || self.settle) && self.target
    }
}

/// Waits for everything queued in the CUDA context of a source in CUDA memory (DLPack device
/// type 2): where a copying route queued its copy on a stream no framework synchronise reaches
/// (gpushare's copy on the legacy stream when the source framework names no stream, as TensorFlow's
/// does not). Nothing to wait for without a driver (the plain core's tests) or off CUDA.
pub fn settle_context(source: &crate::report::TensorReport) -> Result<()> {
    let dlpack_device = source.dlpack_device;
    if dlpack_device.0 != crate::dlpack::DEVICE_CUDA || !crate::cuda::driver_status().is_available() {
        return Ok(());
    }
    // The primary context the source's memory lives in (its description named it), where it is the
    // one current on this thread, as PyTorch keeps it: waited for as it is, without retaining the
    // context and making it current (five driver calls fewer, every sample and every settled copy).
    if let Some(handle) = primary_context_of(source)
        && crate::cuda::synchronize_if_current(handle).map_err(super::Error::from)?
    {
        return Ok(());
    }
    crate::cuda::synchronize_context(dlpack_device.1).map_err(super::Error::from)
}

/// The handle of the primary context `source`'s memory lives in, as its description says.
fn primary_context_of(source: &crate::report::TensorReport) -> Option<u64> {
    let cuda = source.cuda.as_ref()?;
    let primary = cuda.get("context_is_primary").and_then(serde_json::Value::as_bool) == Some(true);
    cuda.get("context").and_then(serde_json::Value::as_u64).filter(|handle| primary && *handle != 0)
}

/// Whether [`settle_context`] waits for everything the source framework queued on its memory's
/// device: the memory lives in that device's primary context (the driver said so when it was
/// described) and a driver is there to synchronise it.
pub fn context_covers_source(source: &crate::report::TensorReport) -> bool {
    source.dlpack_device.0 == crate::dlpack::DEVICE_CUDA
        && source.cuda.as_ref().and_then(|c| c.get("context_is_primary")).and_then(serde_json::Value::as_bool) == Some(true)
        && crate::cuda::driver_status().is_available()
}

/// What takes one sample: `n` calls, synchronised at both ends, timed on the host and (when a
/// device clock exists) on the device. `n = 0` measures a sample's fixed cost alone.
pub trait Sampler {
    /// Seconds on the host and, where measured, on the device.
    fn sample(&mut self, n: u64, device_clock: bool) -> Result<(f64, Option<f64>)>;
    /// One untimed call, then a synchronisation (a warm-up run).
    fn warm(&mut self) -> Result<()> {
        self.sample(1, false).map(drop)
    }
    /// Pauses the garbage collector; returns whether it was running (to resume it after).
    fn pause_collector(&mut self) -> bool {
        false
    }
    fn resume_collector(&mut self) {}
}

/// Raw timings: seconds per call, one entry per sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub samples: Vec<f64>,
    pub device_samples: Option<Vec<f64>>,
    pub number: u64,
    pub warmup: usize,
    /// Host seconds spent in handoffs that are not samples: the warm-up runs and the runs that
    /// chose the calls per sample. With the samples, every handoff the measurement made: what a
    /// caller's own work is measured against.
    pub untimed: f64,
}

/// Times a sampler under a policy (see the module's doc).
pub fn measure(policy: &TimingPolicy, sampler: &mut dyn Sampler) -> Result<Measured> {
    let started = Instant::now();
    // Warm-up runs with the collector as it was: they are not measured.
    for _ in 0..policy.warmup {
        sampler.warm()?;
    }
    let warming = started.elapsed().as_secs_f64();
    let paused = policy.pause_collector && sampler.pause_collector();
    let result = measure_samples(policy, sampler, started);
    if paused {
        sampler.resume_collector();
    }
    result.map(|mut m| {
        m.untimed += warming;
        m
    })
}

fn measure_samples(policy: &TimingPolicy, sampler: &mut dyn Sampler, started: Instant) -> Result<Measured> {
    let ranging = Instant::now();
    let number = match policy.number {
        Some(n) => n.max(1),
        None => autorange(sampler, policy.min_sample_time, policy.max_overhead)?,
    };
    let untimed = ranging.elapsed().as_secs_f64();
    let timed_from = Instant::now();
    // Grown as it goes: reserving `repeat` up front would abort the process on `-r 10**12`.
    let mut samples = Vec::new();
    let mut device = Vec::new();
    loop {
        let (host, dev) = sampler.sample(number, true)?;
        samples.push(host / number as f64);
        if let Some(d) = dev {
            device.push(d / number as f64);
        }
        let done = match policy.repeat {
            Repeat::Exactly(n) => samples.len() >= n,
            Repeat::Within { budget, at_least, at_most } => {
                let spent = timed_from.elapsed().as_secs_f64();
                samples.len() >= at_most
                    || (spent >= budget && samples.len() >= at_least)
                    || started.elapsed().as_secs_f64() >= 5.0 * budget
            }
        };
        if done {
            break;
        }
    }
    let device_samples = (!device.is_empty() && device.len() == samples.len()).then_some(device);
    Ok(Measured { samples, device_samples, number, warmup: policy.warmup, untimed })
}

/// Calls per sample: torch.utils.benchmark's rule (`Timer._estimate_block_size`) with a floor.
/// The fixed cost of a sample is the median of five empty ones; a sample must last
/// `min_sample_time` and that cost must be at most `max_overhead` of it, within ten times
/// `min_sample_time`.
fn autorange(sampler: &mut dyn Sampler, min_sample_time: f64, max_overhead: f64) -> Result<u64> {
    let mut empty = Vec::with_capacity(5);
    for _ in 0..5 {
        empty.push(sampler.sample(0, false)?.0);
    }
    empty.sort_by(f64::total_cmp);
    let overhead = empty[2];
    let goal = min_sample_time.max((overhead / max_overhead.max(1e-12)).min(10.0 * min_sample_time));
    let mut number: u64 = 1;
    while number < MAX_AUTO_NUMBER {
        let (total, _) = sampler.sample(number, false)?;
        if total >= goal {
            break;
        }
        // Aim straight for the goal, at most ×10 per step, so one noisy sample can't make a
        // calibration run last seconds.
        let per_call = (total / number as f64).max(1e-9);
        let want = (goal / per_call) as u64 + 1;
        number = MAX_AUTO_NUMBER.min((number * 2).max(want.min(number * 10)));
    }
    Ok(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sampler whose calls cost `per_call` seconds and whose samples cost `fixed` more.
    struct Fake {
        per_call: f64,
        fixed: f64,
        calls: Vec<(u64, bool)>,
        paused: bool,
    }

    impl Sampler for Fake {
        fn sample(&mut self, n: u64, device_clock: bool) -> Result<(f64, Option<f64>)> {
            self.calls.push((n, device_clock));
            let host = self.fixed + self.per_call * n as f64;
            std::thread::sleep(std::time::Duration::from_secs_f64(host));
            Ok((host, device_clock.then_some(self.per_call * n as f64)))
        }
        fn pause_collector(&mut self) -> bool {
            self.paused = true;
            true
        }
        fn resume_collector(&mut self) {
            self.paused = false;
        }
    }

    fn fake(per_call: f64) -> Fake {
        Fake { per_call, fixed: 0.0, calls: vec![], paused: false }
    }

    #[test]
    fn once_is_one_call_one_sample_and_no_warmup() {
        let mut s = fake(0.0);
        let m = measure(&TimingPolicy::once(), &mut s).unwrap();
        assert_eq!((m.samples.len(), m.number, m.warmup), (1, 1, 0));
        assert_eq!(s.calls, vec![(1, true)]);
        assert!(TimingPolicy::once().is_once());
    }

    #[test]
    fn fixed_takes_exactly_repeat_samples_of_number_after_warmup() {
        let mut s = fake(0.0);
        let m = measure(&TimingPolicy::fixed(4, 3, 2), &mut s).unwrap();
        assert_eq!(m.samples.len(), 4);
        assert_eq!(s.calls, vec![(1, false), (1, false), (3, true), (3, true), (3, true), (3, true)]);
        assert_eq!(m.device_samples.unwrap().len(), 4);
        assert!(!s.paused, "the collector is resumed");
    }

    #[test]
    fn the_untimed_handoffs_are_counted_apart_from_the_samples() {
        // Two warm-up runs of 2 ms each, then one sample of a second: at least 4 ms untimed, and
        // none of the sample (the bounds are that far apart so a busy machine cannot blur them).
        let mut s = Fake { per_call: 2e-3, fixed: 0.0, calls: Vec::new(), paused: false };
        let m = measure(&TimingPolicy::fixed(1, 500, 2), &mut s).unwrap();
        assert!(m.untimed >= 4e-3, "{m:?}");
        assert!(m.untimed < 0.5, "the sample's second is not untimed: {m:?}");
        // No warm-up and a fixed count: nothing untimed but the loop's own bookkeeping.
        let m = measure(&TimingPolicy::fixed(1, 500, 0), &mut s).unwrap();
        assert!(m.untimed < 0.5, "{m:?}");
        // Auto-ranging spends handoffs choosing the count: those are untimed too.
        let m = measure(&TimingPolicy::within(0.02), &mut fake(1e-4)).unwrap();
        assert!(m.untimed > 0.0, "{m:?}");
    }

    #[test]
    fn within_a_budget_auto_ranges_then_stops_once_the_budget_is_spent() {
        let mut s = fake(1e-5);
        let m = measure(&TimingPolicy::within(0.02), &mut s).unwrap();
        assert!(m.number > 1, "a 10 µs call is grouped: {}", m.number);
        assert!(m.samples.len() >= 3);
        // Each sample lasts at least the 2 ms auto-ranging aimed for, and sampling stops by five
        // budgets (0.1 s) at the latest: a slow machine only takes fewer.
        assert!(m.samples.len() <= 50, "{} samples: the budget did not stop it", m.samples.len());
    }

    #[test]
    fn auto_ranging_grows_a_sample_until_its_fixed_cost_is_amortised_as_torch_does() {
        // torch.utils.benchmark grows a block until the timer's own cost is 0.1 % of it, within ten
        // times the minimum sample time. The fake's times are the ones it reports, so the counts
        // below do not depend on how busy the machine is.
        let policy = TimingPolicy { number: None, min_sample_time: 0.002, ..TimingPolicy::fixed(1, 1, 0) };
        let quick = measure(&policy, &mut Fake { fixed: 0.0, ..fake(1e-6) }).unwrap();
        let slow_edges = measure(&policy, &mut Fake { fixed: 0.002, ..fake(1e-6) }).unwrap();
        // Nothing to amortise: a sample of 2 ms is 2,000 calls of 1 µs.
        assert!((2_000..4_000).contains(&quick.number), "{}", quick.number);
        // 2 ms of fixed cost is not 0.1 % of any sample under 20 ms: about 18,000 calls.
        assert!((18_000..36_000).contains(&slow_edges.number), "{}", slow_edges.number);
    }

    #[test]
    fn a_slow_call_stops_within_five_budgets() {
        let mut s = fake(0.03);
        let m = measure(&TimingPolicy::within(0.01), &mut s).unwrap();
        assert_eq!(m.number, 1);
        assert!(!m.samples.is_empty() && m.samples.len() <= 3, "{:?}", m.samples);
    }

    #[test]
    fn a_copying_route_settles_at_every_edge_a_sharing_one_only_when_timed_repeatedly() {
        use PathKind::{Move, Share};
        let (once, fixed) = (TimingPolicy::once(), TimingPolicy::fixed(3, 2, 1));
        for path in ["copy", "pinned", "host"] {
            assert_eq!(Edges::of(Share, path, true, true, &once, false), Edges { synchronise: false, settle: true, target: true }, "{path}");
            assert_eq!(Edges::of(Share, path, true, true, &fixed, false), Edges { synchronise: true, settle: true, target: true }, "{path}");
        }
        for path in ["p2p", "pinned", "dlpack", "move"] {
            assert!(Edges::of(Move, path, true, true, &once, false).settle, "a move copies whenever it moves: {path}");
        }
        for path in ["dlpack", "capsule", "cai", "shared"] {
            assert_eq!(Edges::of(Share, path, true, true, &once, true), Edges { synchronise: false, settle: false, target: true }, "{path}");
            assert_eq!(Edges::of(Share, path, true, true, &fixed, true), Edges { synchronise: true, settle: false, target: true }, "{path}");
        }
        // Host memory: a copy has landed when the call returns, unless a framework queues host work.
        assert_eq!(Edges::of(Share, "copy", false, false, &fixed, true), Edges { synchronise: false, settle: false, target: true });
    }

    #[test]
    fn host_memory_is_waited_for_at_a_samples_edges_where_a_framework_queues_host_work() {
        use PathKind::Share;
        let (once, fixed) = (TimingPolicy::once(), TimingPolicy::fixed(3, 2, 1));
        for path in ["dlpack", "capsule", "host"] {
            let edges = Edges::of(Share, path, false, true, &fixed, false);
            assert!(edges.synchronise && edges.waits_for_target() && !edges.settle, "{path}");
            // One conversion alone stays the raw call's host time.
            assert!(!Edges::of(Share, path, false, true, &once, false).waits_for_target(), "{path}");
            assert!(!Edges::of(Share, path, false, false, &fixed, false).waits_for_target(), "{path}");
        }
    }

    #[test]
    fn the_settle_alone_ends_a_sample_of_gpushares_own_copy_into_a_target_that_views_it() {
        use PathKind::{Move, Share};
        let (once, fixed) = (TimingPolicy::once(), TimingPolicy::fixed(3, 2, 1));
        for (kind, path) in [(Move, "p2p"), (Move, "pinned"), (Share, "copy"), (Share, "pinned")] {
            for policy in [&once, &fixed] {
                let edges = Edges::of(kind, path, true, true, policy, true);
                assert!(edges.settle && !edges.waits_for_target(), "{path}: the settle covers the copy");
                // A target that may work on the import (JAX's narrowing) is still waited for.
                assert!(Edges::of(kind, path, true, true, policy, false).waits_for_target(), "{path}");
            }
        }
        // Copies that are not gpushare's run where the settle may not reach (the consumer's copy
        // on its own device, the framework's move, NumPy on the host): the target is waited for.
        for (kind, path) in [(Move, "dlpack"), (Move, "move"), (Share, "host")] {
            assert!(Edges::of(kind, path, true, true, &once, true).waits_for_target(), "{path}");
        }
    }

    /// The pipeline with a copy the target's synchronise does not wait for: the route queues
    /// `pending` seconds of work on the source's stream, which only the source's synchronise waits
    /// for (as gpushare's `copy` on torch's stream, into TensorFlow).
    mod settled {
        use std::cell::Cell;

        use super::super::super::{Framework, Handoff, Host, Options, Route};
        use super::*;
        use crate::report::TensorReport;

        struct Side {
            name: &'static str,
            pending: std::rc::Rc<Cell<f64>>,
            waits_for_source_stream: bool,
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

        impl Framework for Side {
            type Array = u64;
            type Info = Info;
            fn name(&self) -> &str {
                self.name
            }
            fn describe(&self, ptr: &u64) -> Result<Info> {
                Ok(Info(TensorReport {
                    framework: self.name.into(), dtype: "float32".into(), shape: vec![1024], strides: vec![1],
                    device: "cuda:0".into(), dlpack_device: (2, 0), dlpack_device_name: "cuda:0".into(),
                    data_ptr: *ptr, byte_offset: 0, nbytes: 4096, span: (*ptr, ptr + 4096), contiguous: true,
                    alignment: 256, readonly: false, dlpack_version: None, cuda: None,
                }))
            }
            fn synchronize(&self, _a: &u64) -> Result<()> {
                if self.waits_for_source_stream {
                    std::thread::sleep(std::time::Duration::from_secs_f64(self.pending.replace(0.0)));
                }
                Ok(())
            }
        }

        struct Queues {
            path: &'static str,
            kind: PathKind,
            pending: std::rc::Rc<Cell<f64>>,
        }
        impl Route<u64> for Queues {
            fn path(&self) -> &str {
                self.path
            }
            fn kind(&self) -> PathKind {
                self.kind
            }
            fn convert(&self, ptr: &u64) -> Result<u64> {
                self.pending.set(self.pending.get() + 0.004);
                Ok(ptr + 0x10_0000)
            }
        }

        struct NoHost;
        impl Host for NoHost {
            fn check_interrupt(&self) -> Result<()> {
                Ok(())
            }
        }

        fn timed(path: &'static str, kind: PathKind, policy: TimingPolicy) -> f64 {
            let pending = std::rc::Rc::new(Cell::new(0.0));
            let source = Side { name: "torch", pending: pending.clone(), waits_for_source_stream: true };
            let target = Side { name: "tf", pending: pending.clone(), waits_for_source_stream: false };
            let route = Queues { path, kind, pending };
            let handoff = Handoff { source: &source, target: &target, route: &route, predictor: None, check_source: false };
            let options = Options { timing: policy, ..Options::default() };
            handoff.run(&NoHost, &0x1000, &options).unwrap().report.timing.median
        }

        #[test]
        fn a_copying_routes_timed_sample_includes_the_wait_for_its_copy() {
            for policy in [TimingPolicy::once(), TimingPolicy::fixed(3, 2, 1)] {
                for (path, kind) in [("copy", PathKind::Share), ("pinned", PathKind::Share), ("p2p", PathKind::Move), ("move", PathKind::Move)] {
                    let t = timed(path, kind, policy);
                    assert!(t >= 0.004, "{path} under {policy:?}: {t} s is below the 4 ms its copy takes");
                }
            }
        }
    }

    #[test]
    fn bad_policies_are_refused() {
        assert!(TimingPolicy::fixed(0, 1, 0).validate().is_err());
        assert!(TimingPolicy::fixed(1, 0, 0).validate().is_err());
        assert!(TimingPolicy::within(0.0).validate().is_err());
        assert!(TimingPolicy::within(f64::NAN).validate().is_err());
        assert!(TimingPolicy::within(0.1).validate().is_ok());
    }
}
