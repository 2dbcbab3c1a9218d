//! THE share pipeline: one for `share`, `%share`, `compare` and `bench`.
//!
//! describe → check → predict → refuse → (observe) → convert under a timing policy → describe the
//! target → judge → report.
//!
//! Plain Rust: the frameworks are reached through [`Framework`] and the conversion through
//! [`Route`], which the Python binding implements once over its adapters (as tokenizers'
//! `CustomNormalizer` implements its core's `Normalizer`). Everything framework-specific lives in
//! those adapters; every rule lives in [`crate::explain`]. The lab (`compare`, `bench`) is this
//! pipeline run once per path and size.
//!
//! Once its source is prepared, a handoff is carried by a [`transport::Transport`] through the one
//! [`transport::carry`]: [`InProcess`] into a framework of this process, or
//! [`process::ToWorker`] to a worker process on this host or another.

pub mod error;
pub mod lab;
pub mod process;
pub mod process_lab;
pub mod timing;
pub mod transport;

use std::time::Instant;

pub use error::{Error, Foreign, Result, ShareError, Stage};
pub use timing::{Measured, Repeat, Sampler, TimingPolicy};

use crate::explain::{self, PredictedOutcome};
use crate::report::{MemoryLedger, MemorySnapshot, ShareReport, StreamReport, StreamRequest, TensorReport, Verdict};
use crate::stats::Timing;
use crate::trace::Kind::{self as Whose, Conversion, Own, Wait};

use crate::dlpack::{DEVICE_CPU as DL_CPU, DEVICE_CUDA as DL_CUDA};

/// One framework, as the pipeline needs it.
pub trait Framework {
    /// An array of any framework (the pipeline never looks inside).
    type Array;
    /// A description of an array, as the binding keeps it until the report takes it over (moved,
    /// not copied: every share describes two arrays, and copying each report into the result cost
    /// a dozen allocations).
    type Info: AsRef<TensorReport> + Into<TensorReport>;

    /// gpushare's name of the framework: `torch`, `tf`, `jax`, `numpy`, `cupy`, `numba`, `paddle`.
    fn name(&self) -> &str;
    /// What an array of this framework is, read without consuming it.
    fn describe(&self, array: &Self::Array) -> Result<Self::Info>;
    /// Refuses sources this framework will not export by this handoff: `target` (the target
    /// framework's name) and `path` (the route's) because whether an export refuses can depend on
    /// the call that makes it (torch's `__dlpack__` refuses a tensor that requires grad, its
    /// `to_dlpack` exports it).
    fn check_source(&self, _array: &Self::Array, _target: &str, _path: &str) -> Result<()> {
        Ok(())
    }
    /// Waits for the work queued on the array's device.
    fn synchronize(&self, array: &Self::Array) -> Result<()>;
    /// Whether this framework's import can queue device work that fails only when waited on
    /// (JAX's narrowing kernel): a share into it waits for a result that is not a view of the
    /// source as it is before reporting it. Imports that view memory, or fail at once, are never
    /// waited for: a wait would block on whatever else the user queued on the device, and be
    /// counted in the share's time.
    fn import_settles_later(&self) -> bool {
        false
    }
    /// Whether a call of this framework can return while its work on host memory is still queued
    /// (JAX's CPU client copies a NumPy array it cannot view after `from_dlpack` has returned: a
    /// 200 MiB copy returned in 0.6 ms and landed 150 ms later). A timed sample of a handoff in host
    /// memory from or into it then waits for that work at its edges, as one on a device does.
    fn queues_host_work(&self) -> bool {
        false
    }
    /// Whether its import of a buffer of gpushare's own (a `copy`, `pinned` or `p2p` result) views
    /// that memory and queues no device work of its own (a stream wait at most): the end of a
    /// sample then waits for gpushare's copy alone (`timing::Edges`).
    fn views_gpushare_buffers(&self) -> bool {
        false
    }
    /// Whether its `from_dlpack(x, device=…, copy=True)` asks the producer's `__dlpack__` for the
    /// copy (PyTorch's, NumPy's, MLX's): a move by `dlpack` into it then receives a compact copy,
    /// never the source's own layout, so the layouts its import refuses (negative strides into
    /// PyTorch) are no reason to refuse that move.
    fn copy_by_producer(&self) -> bool {
        false
    }
    /// The handle of this framework's current CUDA stream on the array's device, if it has one.
    fn current_stream(&self, _array: &Self::Array) -> Result<Option<u64>> {
        Ok(None)
    }
}

/// A transfer path for one pair: how the target gets an array from the source.
pub trait Route<A> {
    /// The path's name (`dlpack`, `capsule`, `cai`, `host`, `pinned`, `copy`, `shared`).
    fn path(&self) -> &str;
    /// The path's kind in the path table (a move's `dlpack` copies by design, a share's does not).
    fn kind(&self) -> crate::paths::PathKind {
        crate::paths::PathKind::Share
    }
    fn convert(&self, array: &A) -> Result<A>;
    /// One conversion of an array that `source` describes: what the timed loop calls. A route may
    /// take a shorter way that holds for this source (the binding skips its current-device guard
    /// while the source's device is current).
    fn convert_described(&self, array: &A, _source: &TensorReport) -> Result<A> {
        self.convert(array)
    }
    /// One conversion of an array that `source` describes that also records what the consumer
    /// asked the producer's `__dlpack__` for; routes that carry no stream record nothing. It may
    /// take the same shorter way as [`Route::convert_described`].
    fn convert_recorded(&self, array: &A, _source: &TensorReport) -> Result<(A, Vec<StreamRequest>)> {
        Ok((self.convert(array)?, Vec::new()))
    }
    /// How this route orders the two sides' work where the DLPack stream argument does not
    /// (TensorFlow takes no stream either way), in words for the stream report.
    fn ordering(&self) -> Option<&str> {
        None
    }
    /// What the route did around the framework's calls that the result must say (it made the
    /// source's device current for the handoff, because another device was current): taken once
    /// per share, after its conversions.
    fn take_notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// What the process around the pipeline provides: interruption, the garbage collector and the
/// allocators' memory figures.
pub trait Host {
    /// Ctrl-C between conversions, as a loop in the host language would allow.
    fn check_interrupt(&self) -> Result<()>;
    /// Pauses the garbage collector during a sample; returns whether it was running.
    fn pause_collector(&self) -> bool {
        false
    }
    fn resume_collector(&self) {}
    /// Each imported framework allocator's figures on CUDA device `ordinal`, in its own terms.
    fn allocator_memory(&self, _ordinal: i32) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, i64>> {
        Default::default()
    }
}

/// A prediction for a source: `explain::predict` over the target's facts and settings.
pub type Predict<'a> = dyn Fn(&TensorReport) -> Result<Option<PredictedOutcome>> + 'a;

/// One kind of handoff: source and target frameworks, the route, and what to predict from.
pub struct Handoff<'a, F: Framework> {
    pub source: &'a F,
    pub target: &'a F,
    pub route: &'a dyn Route<F::Array>,
    /// What the rules of [`crate::explain`] predict for a source; `None`: no prediction (a path the
    /// rules do not model). The binding reads the frameworks' settings a rule needs (JAX's x64
    /// flag, PyTorch's current device) when it is called.
    pub predictor: Option<&'a Predict<'a>>,
    /// Whether the source framework checks its arrays before export.
    pub check_source: bool,
}

/// How one share runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub timing: TimingPolicy,
    /// Collect the memory ledger and the stream report of a handoff of device memory (one
    /// extra, untimed handoff).
    pub observe: bool,
    /// The variable's name, from a magic.
    pub name: Option<String>,
    /// In a chain, the first source: the report says whether this hop still shares its memory.
    pub origin: Option<TensorReport>,
}

impl Default for Options {
    fn default() -> Options {
        Options { timing: TimingPolicy::once(), observe: false, name: None, origin: None }
    }
}

/// A share that worked: the target's array and the report, which holds both descriptions.
pub struct Outcome<F: Framework> {
    pub value: F::Array,
    pub report: ShareReport,
}

impl<F: Framework> Handoff<'_, F> {
    fn path(&self) -> &str {
        self.route.path()
    }

    fn explained<'s>(&'s self, stage: Stage, predicted: Option<&'s PredictedOutcome>) -> impl Fn(Error) -> Error + 's {
        move |e| e.explain(stage, self.source.name(), self.target.name(), self.path(), predicted)
    }

    /// What this handoff of `source` is predicted to do; `None` where gpushare makes no prediction.
    pub fn predict(&self, source: &TensorReport) -> Result<Option<PredictedOutcome>> {
        self.predictor.map_or(Ok(None), |predict| predict(source))
    }

    /// Describes, checks and predicts `array`, and refuses what would crash the target: what
    /// the pipeline does before converting.
    pub fn prepare(&self, array: &F::Array) -> Result<(F::Info, Option<PredictedOutcome>)> {
        let source = self.describe(array)?;
        crate::trace::mark("describe the source", Own);
        self.prepare_described(array, source)
    }

    /// The source's description, a failure explained as this handoff's.
    pub fn describe(&self, array: &F::Array) -> Result<F::Info> {
        self.source.describe(array).map_err(self.explained(Stage::Inspect, None))
    }

    /// [`Handoff::prepare`] of a source described already: the lab describes its array once and
    /// checks, predicts and refuses it for each path.
    pub fn prepare_described(&self, array: &F::Array, source: F::Info) -> Result<(F::Info, Option<PredictedOutcome>)> {
        let inspect = self.explained(Stage::Inspect, None);
        if self.check_source {
            self.source.check_source(array, self.target.name(), self.path()).map_err(&inspect)?;
        }
        crate::trace::mark("check the source", Whose::Framework);
        let predicted = self.predict(source.as_ref()).map_err(&inspect)?;
        crate::trace::mark("predict", Own);
        let report = source.as_ref();
        let producer_copies =
            self.route.kind() == crate::paths::PathKind::Move && self.path() == "dlpack" && self.target.copy_by_producer();
        if let Some(r) = explain::refuse(report, self.target.name(), self.path()).filter(|_| !producer_copies) {
            return Err(Error::UnsafeInput {
                subject: crate::route::label(&report.framework, self.target.name()),
                reason: r.reason,
                fix: r.fix,
                framework_error: None,
                predicted,
            });
        }
        Ok((source, predicted))
    }

    /// Shares `array` (see the module's doc).
    pub fn run(&self, host: &dyn Host, array: &F::Array, options: &Options) -> Result<Outcome<F>> {
        options.timing.validate().map_err(Error::Usage)?;
        let (source, predicted) = self.prepare(array)?;
        self.convert_prepared(host, array, source, predicted, options)
    }

    /// The pipeline after [`Handoff::prepare`]: the route carries the array within this process
    /// ([`InProcess`], through [`transport::carry`], the steps every handoff takes).
    pub fn convert_prepared(
        &self,
        host: &dyn Host,
        array: &F::Array,
        source: F::Info,
        predicted: Option<PredictedOutcome>,
        options: &Options,
    ) -> Result<Outcome<F>> {
        crate::trace::mark("refuse", Own);
        let (value, report) = transport::carry(InProcess::new(self, host, array, source, predicted, options))?;
        Ok(Outcome { value, report })
    }

    /// One handoff outside the timing: it pays one-time costs (it stands for the policy's first
    /// warm-up), records the streams the consumer asked for, and is the one the memory ledger
    /// measures. Also returns the host seconds of the handoff itself (the synchronise before it,
    /// the conversion and the target's synchronise), without the ledger's readings.
    fn observe(&self, host: &dyn Host, array: &F::Array, source: &TensorReport) -> Result<(Option<MemoryLedger>, StreamReport, f64)> {
        let ordinal = source.dlpack_device.1;
        let synchronising = Instant::now();
        self.source.synchronize(array)?;
        let synchronised = synchronising.elapsed().as_secs_f64();
        let before = snapshot(host, ordinal);
        let t0 = Instant::now();
        let (value, requests) = self.route.convert_recorded(array, source)?;
        self.target.synchronize(&value)?;
        let handoff = t0.elapsed().as_secs_f64();
        let after = snapshot(host, ordinal);
        let seconds = t0.elapsed().as_secs_f64();
        drop(value);
        let producer = self.source.current_stream(array)?;
        let ledger = MemoryLedger::between(&before, &after, seconds);
        let streams = StreamReport::of(self.path(), producer, &requests).ordered_by(self.route.ordering());
        Ok((Some(ledger), streams, synchronised + handoff))
    }

    /// CUDA events on the source framework's current stream, where it has one.
    fn device_clock(&self, array: &F::Array, source: &TensorReport) -> Result<Option<DeviceClock>> {
        if source.dlpack_device.0 != DL_CUDA {
            return Ok(None);
        }
        let Some(stream) = self.source.current_stream(array)? else { return Ok(None) };
        let ordinal = source.dlpack_device.1;
        // No device clock is an answer ("n/a"), not a failure of the measurement.
        Ok(crate::cuda::EventTimer::new(ordinal)
            .ok()
            .map(|timer| DeviceClock { timer, stream: crate::cuda::Stream::external(stream, ordinal) }))
    }
}

/// The transport of a handoff within this process: the route's conversions into the target
/// framework, timed under the share's policy, both arrays described by address here.
pub struct InProcess<'h, 'a, F: Framework> {
    handoff: &'h Handoff<'a, F>,
    host: &'h dyn Host,
    array: &'h F::Array,
    /// The source's description, until [`Transport::describe`] hands it to the sides.
    source: Option<F::Info>,
    predicted: Option<PredictedOutcome>,
    options: &'h Options,
    /// Where the samples wait, decided when the handoffs are timed.
    edges: Option<timing::Edges>,
    /// The observed handoff's memory ledger and streams, where the share asked for them.
    memory: Option<MemoryLedger>,
    streams: Option<StreamReport>,
}

impl<'h, 'a, F: Framework> InProcess<'h, 'a, F> {
    /// `source` described, checked, predicted and refused by [`Handoff::prepare`].
    pub fn new(
        handoff: &'h Handoff<'a, F>,
        host: &'h dyn Host,
        array: &'h F::Array,
        source: F::Info,
        predicted: Option<PredictedOutcome>,
        options: &'h Options,
    ) -> Self {
        InProcess { handoff, host, array, source: Some(source), predicted, options, edges: None, memory: None, streams: None }
    }

    fn failed(&self) -> impl Fn(Error) -> Error + '_ {
        self.handoff.explained(Stage::Convert, self.predicted.as_ref())
    }
}

impl<F: Framework> transport::Transport for InProcess<'_, '_, F> {
    type Delivered = F::Array;
    type Sides = (TensorReport, TensorReport);
    type Report = ShareReport;

    fn kind(&self) -> crate::paths::PathKind {
        self.handoff.route.kind()
    }

    fn path(&self) -> &str {
        self.handoff.path()
    }

    fn hand_over(&mut self) -> Result<(F::Array, Timing)> {
        let (h, host, array, options) = (self.handoff, self.host, self.array, self.options);
        let failed = h.explained(Stage::Convert, self.predicted.as_ref());
        let source = self.source.as_ref().expect("the source is described until the sides are").as_ref();
        let on_device = source.dlpack_device.0 != DL_CPU;
        let observed_seconds = if on_device && options.observe {
            let (m, s, seconds) = h.observe(host, array, source).map_err(&failed)?;
            // A handoff outside the timing, with its waits and the allocators' figures around it.
            crate::trace::mark("observe: one untimed handoff and the memory ledger", Conversion);
            (self.memory, self.streams) = (m, Some(s));
            seconds
        } else {
            0.0
        };
        // One conversion on its own is the raw call's host time; anything more is synchronised at
        // the sample edges, so queued work (on a device, or a framework's queued host work) lands
        // in the sample it belongs to. A copying
        // route is timed to the end of its copy either way (see `Edges`).
        let queued = on_device || h.source.queues_host_work() || h.target.queues_host_work();
        let edges = timing::Edges::of(h.route.kind(), h.path(), on_device, queued, &options.timing, h.target.views_gpushare_buffers());
        self.edges = Some(edges);
        let clock = if edges.synchronise { h.device_clock(array, source).map_err(&failed)? } else { None };
        // The observed handoff was untimed, paid the one-time costs and was waited for: it is the
        // policy's first warm-up, not one more conversion before it.
        let mut policy = options.timing;
        let observed_as_warmup = self.streams.is_some() && policy.warmup > 0;
        if observed_as_warmup {
            policy.warmup -= 1;
        }
        let mut sampler = HandoffSampler { handoff: h, host, array, described: source, edges, clock, value: None };
        crate::trace::mark("plan the timing", Own);
        let mut measured = timing::measure(&policy, &mut sampler).map_err(&failed)?;
        crate::trace::mark("the timed conversions", Own);
        measured.warmup += usize::from(observed_as_warmup);
        // The observed handoff is a handoff the measurement made outside its samples, as a warm-up
        // is: its conversion and the waits around it are untimed handoff time, not the caller's
        // own work (the ledger's readings around it are).
        measured.untimed += observed_seconds;
        let value = sampler.value.take().expect("every policy makes at least one conversion");
        let mut timing = Timing::from_samples(measured.samples, measured.number);
        timing.warmup = measured.warmup as u64;
        timing.untimed = measured.untimed;
        if let Some(device) = measured.device_samples {
            timing = timing.with_device_samples(device);
        }
        Ok((value, timing))
    }

    fn describe(&mut self, value: &F::Array) -> Result<(TensorReport, TensorReport)> {
        let h = self.handoff;
        let source = self.source.take().expect("the sides are described once");
        // The source is alive: a target inside its allocation is described from its attributes.
        let target =
            crate::cuda::with_known_allocation(source.as_ref().cuda.as_ref(), || h.target.describe(value)).map_err(self.failed())?;
        crate::trace::mark("describe the target", Own);
        let (source, target): (TensorReport, TensorReport) = (source.into(), target.into());
        let on_device = source.dlpack_device.0 != DL_CPU;
        let waited = self.edges.is_some_and(|e| e.waits_for_target());
        if on_device && !waited && h.target.import_settles_later() && !views_as_is(&source, &target) {
            // Outside the timing: a framework that converts asynchronously (JAX's narrowing
            // kernel) reports its failure only when waited on, and a share must not call "copied"
            // an array whose making failed. A view of the source's bytes as they are queued no
            // conversion: waiting for it (tens of µs into JAX on a GPU) could only fail on work
            // the user queued.
            h.target.synchronize(value).map_err(self.failed())?;
            crate::trace::mark("wait for a target that settles later", Wait);
        }
        Ok((source, target))
    }

    fn judged((source, target): &(TensorReport, TensorReport)) -> explain::Sides<'_> {
        explain::Sides::Here { source, target }
    }

    fn report(self, _: &F::Array, (source, target): (TensorReport, TensorReport), judgement: explain::Judgement, timing: Timing) -> Result<ShareReport> {
        let options = self.options;
        let shares_origin = options.origin.as_ref().map(|o| explain::judge(o, &target).verdict == Verdict::Shared);
        let mut notes = judgement.notes;
        notes.extend(self.handoff.route.take_notes());
        let report = ShareReport {
            name: options.name.clone(),
            path: self.handoff.path().to_string(),
            source,
            target,
            verdict: judgement.verdict,
            reason: judgement.reason,
            notes,
            timing,
            shares_origin,
            predicted: self.predicted.map(PredictedOutcome::into_prediction),
            memory: self.memory,
            worker: None,
            predicted_time: None,
            streams: self.streams,
        };
        crate::trace::mark("judge and report", Own);
        Ok(report)
    }
}

/// Whether `target` is `source`'s own bytes read as they are: it lies inside the source's memory
/// with the same dtype, so making it queued no conversion on the device.
fn views_as_is(source: &TensorReport, target: &TensorReport) -> bool {
    source.dtype == target.dtype && source.numel() > 0 && explain::judge(source, target).verdict == Verdict::Shared
}

fn snapshot(host: &dyn Host, ordinal: i32) -> MemorySnapshot {
    let (driver_free, driver_total) = match crate::cuda::mem_info(ordinal, crate::cuda::ContextPolicy::ExistingOnly) {
        Ok(info) => (Some(info.free), Some(info.total)),
        Err(_) => (None, None),
    };
    MemorySnapshot { ordinal, driver_free, driver_total, frameworks: host.allocator_memory(ordinal) }
}

struct DeviceClock {
    timer: crate::cuda::EventTimer,
    stream: crate::cuda::Stream,
}

/// Takes the samples of one handoff for [`timing::measure`].
struct HandoffSampler<'h, 'a, F: Framework> {
    handoff: &'h Handoff<'a, F>,
    host: &'h dyn Host,
    array: &'h F::Array,
    /// The source's description, for [`Route::convert_described`].
    described: &'h TensorReport,
    edges: timing::Edges,
    clock: Option<DeviceClock>,
    /// The latest result: kept for the synchronisation at the sample's end and for the outcome.
    value: Option<F::Array>,
}

impl<F: Framework> HandoffSampler<'_, '_, F> {
    /// The end of a sample: the target's work, and for a copying route the copy itself wherever it
    /// was queued (the source's streams, gpushare's copy on the source's context).
    fn wait_for(&self, value: &F::Array) -> Result<()> {
        let h = self.handoff;
        if self.edges.waits_for_target() {
            h.target.synchronize(value)?;
            crate::trace::mark("wait: the target's synchronise", Wait);
        }
        if self.edges.settle {
            // The context's synchronise waits for every stream in it, the source framework's
            // among them, when the source's memory lives in the device's primary context (every
            // framework but a PyCUDA context of its own): the framework's own synchronise would
            // wait a second time for nothing (about 4 µs of a peer move on an H200).
            if !timing::context_covers_source(self.described) {
                h.source.synchronize(self.array)?;
            }
            timing::settle_context(self.described)?;
            crate::trace::mark("wait: the source context's settle", Wait);
        }
        Ok(())
    }
}

impl<F: Framework> Sampler for HandoffSampler<'_, '_, F> {
    fn sample(&mut self, n: u64, device_clock: bool) -> Result<(f64, Option<f64>)> {
        let h = self.handoff;
        if self.edges.synchronise {
            // Where the context's synchronise covers the source framework's work (its memory is
            // in the device's primary context), the driver's call waits for the same queue without
            // a call into the framework's Python, once a sample.
            if timing::context_covers_source(self.described) {
                timing::settle_context(self.described)?;
            } else {
                h.source.synchronize(self.array)?;
            }
        }
        let clock = if device_clock { self.clock.as_mut() } else { None };
        let clock_started = match clock {
            Some(c) => c.timer.start(&c.stream).is_ok(),
            None => false,
        };
        let t0 = Instant::now();
        // The last result goes before the next call, inside the sample: holding it alive across
        // the call would change what allocators hand out, and every other call of the sample
        // pays the release of the result before it too (each call's time is a call and a release).
        self.value = None;
        crate::trace::mark("sample set-up", Own);
        for i in 0..n {
            let value = h.route.convert_described(self.array, self.described)?;
            if i + 1 == n {
                self.value = Some(value);
            }
            self.host.check_interrupt()?;
        }
        let mut device = None;
        if clock_started && let Some(c) = self.clock.as_mut() {
            device = c.timer.stop(&c.stream).ok().map(|_| ());
        }
        crate::trace::mark("convert", Conversion);
        if let Some(v) = &self.value {
            self.wait_for(v)?;
        }
        let host_seconds = t0.elapsed().as_secs_f64();
        // The waits themselves, where the edges ask for any, are marked as they end (`wait_for`).
        crate::trace::mark("the sample's end", Own);
        let device_seconds = match (device, self.clock.as_ref()) {
            (Some(()), Some(c)) => c.timer.elapsed_ms().ok().map(|ms| ms / 1e3),
            _ => None,
        };
        Ok((host_seconds, device_seconds))
    }

    fn warm(&mut self) -> Result<()> {
        let h = self.handoff;
        self.value = None;
        let value = h.route.convert_described(self.array, self.described)?;
        self.wait_for(&value)?;
        self.value = Some(value);
        self.host.check_interrupt()
    }

    fn pause_collector(&mut self) -> bool {
        self.host.pause_collector()
    }

    fn resume_collector(&mut self) {
        self.host.resume_collector()
    }
}

#[cfg(test)]
mod tests;
