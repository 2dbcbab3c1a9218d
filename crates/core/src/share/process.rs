//! Handoffs to another process: a transport ([`ToWorker`]) of the one pipeline
//! ([`super::transport::carry`]): refuse → set up → hand over under the one timing loop → describe
//! both sides by memory identity → judge → report.
//!
//! A process path is a [`ProcessRoute`]: its conversion hands the array to a worker process and
//! returns the worker's reply. The worker's side is described by memory identity (an IPC handle +
//! offset, a segment + offset), never by a pointer, which means nothing in another process. The
//! binding implements the trait once over a Python transport (crates/python/src/binding/
//! process_route.rs; python/gpushare/processes/routes.py keeps the pipes and the framework's steps);
//! everything decided here — whether the path applies, the timing, the verdict, the bytes moved,
//! the typed row — is decided once for every path.

use super::error::{Error, Result};
use super::timing::{self, Sampler, TimingPolicy};
use crate::explain::{self, ProcessFacts, ProcessProbe};
use crate::paths::{self, PathKind};
use crate::report::Verdict;
use crate::report::process::{
    MemoryIdentity, ProcessContext, ProcessSource, ProcessTarget, RemoteLink, Segment, WorkerHandoff, WorkerRun,
};

/// What is known of the array, the path and the worker before anything runs: the facts of the
/// refusal rule ([`crate::explain::refuse_process`]), owned by the route.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteFacts {
    /// The source array's framework.
    pub framework: String,
    /// The framework the worker is asked to hold the array in; `None`: the source's.
    pub to: Option<String>,
    /// The frameworks the worker can hold an array handed by this path in (sorted).
    pub targets: Vec<String>,
    /// The framework whose own library implements the path.
    pub library: Option<String>,
    pub on_device: bool,
    pub source_device: Option<i64>,
    pub worker_device: Option<i64>,
    /// Not non-overlapping and dense (see [`ProcessFacts::strided`]).
    pub strided: bool,
}

/// The parent's side of a handoff, read after the handoffs (a path may move the source's storage
/// on its first handoff, as torch.multiprocessing does with a CPU tensor).
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSide {
    pub framework: String,
    /// Bytes of the source array.
    pub nbytes: u64,
    /// The memory handed over; `None` when unknown.
    pub identity: Option<MemoryIdentity>,
    pub context: Option<ProcessContext>,
}

/// The segment a path hands over (`shm`), and the bytes gpushare copied into it first (0 where the
/// source already lay in it): a staged copy makes the handoff "copied" even though the worker maps
/// the segment the parent's view lies in.
#[derive(Debug, Clone, PartialEq)]
pub struct Staging {
    pub segment: Segment,
    pub staged_bytes: u64,
}

/// One process path: the transport's side of a handoff. The pipeline ([`hand_to_worker`], then
/// [`ToWorker`]'s steps) calls these in order: the refusal's facts (and the costly ones only when the rule reaches
/// them), `set_up`, then `hand_over`/`release` under the timing loop (or
/// `hand_over_timed_by_worker`), then `sides`, `staging`, `mechanism_detail` and `notes`.
pub trait ProcessRoute {
    /// What the worker sends back for one handoff (its slot, its array's identity, framework, context).
    type Reply;

    /// The process path's name (`ipc`, `torch_mp`, `shm`, `nccl`, `nccl_socket`, `gloo`, `remote`).
    fn path(&self) -> &str;
    /// The facts the refusal rule reads, known without asking anything costly.
    fn facts(&mut self) -> Result<RouteFacts>;
    /// Why the path's library cannot run in this process, asked only when the rule needs it.
    fn library_unavailable(&mut self) -> Result<Option<String>> {
        Ok(None)
    }
    /// Why NCCL cannot run here, asked only when the rule needs it.
    fn nccl_unavailable(&mut self) -> Result<Option<String>> {
        Ok(None)
    }
    /// Why legacy CUDA IPC cannot export the array's allocation, asked only when the rule needs it.
    fn ipc_refusal(&mut self) -> Result<Option<String>> {
        Ok(None)
    }
    /// The path's one-off work before the first handoff (checks, a segment's copy, a process group):
    /// returns the seconds of it that the first call reports (the copy, the group's set-up).
    fn set_up(&mut self) -> Result<f64>;
    /// One handoff: the worker gets the array; its reply.
    fn hand_over(&mut self) -> Result<Self::Reply>;
    /// Releases a handoff's array in the worker: untimed, before the next handoff is timed.
    fn release(&mut self, reply: Self::Reply) -> Result<()>;
    /// `repeat + 1` handoffs timed where they happen (NCCL's sender times each acknowledged send,
    /// with the core's loop in that process): the last reply and the seconds of each handoff, the
    /// first first. `None`: the parent times `hand_over` itself.
    fn hand_over_timed_by_worker(&mut self, _repeat: usize) -> Option<Result<(Self::Reply, Vec<f64>)>> {
        None
    }
    /// Both sides of the last handoff, each described by memory identity in its own process (the
    /// worker's side is the report's, from its reply).
    fn sides(&mut self, reply: &Self::Reply) -> Result<(SourceSide, ProcessTarget)>;
    /// The segment handed over and what was copied into it first, for a path that hands a segment.
    fn staging(&mut self) -> Result<Option<Staging>> {
        Ok(None)
    }
    /// How this handoff went, beyond the path table's description (torch's strategy).
    fn mechanism_detail(&mut self) -> Result<Option<String>> {
        Ok(None)
    }
    /// What the row must say of this handoff (set-up costs, what the path did to the source).
    fn notes(&mut self, reply: &Self::Reply) -> Result<Vec<String>>;
    /// The network link of a handoff to a worker on another host, read after the handoffs (the
    /// engine says which transport it took only once it has connected).
    fn link(&mut self) -> Result<Option<RemoteLink>> {
        Ok(None)
    }
}

/// A handoff's result: its typed row, and the worker's reply to the last handoff (what the
/// binding makes the remote array of).
pub struct Handed<Reply> {
    pub report: crate::render::lab::PathRow,
    pub reply: Reply,
}

/// Hands an array to a worker by `route`: refuses a path that does not apply (`PathNotApplicable`,
/// before anything crosses), then [`super::transport::carry`] runs the pipeline every handoff
/// takes over [`ToWorker`]: the first handoff and `repeat` timed ones, both sides judged by
/// memory identity, the typed row. `predicted`: what the cost model predicts for the handoff,
/// asked before it runs and kept in the row beside the measurement.
pub fn hand_to_worker<R: ProcessRoute>(
    route: &mut R,
    repeat: usize,
    predicted: Option<crate::advice::model::Prediction>,
) -> Result<Handed<R::Reply>> {
    if let Some(reason) = refusal(route)? {
        let path = route.path();
        return Err(Error::PathNotApplicable {
            message: crate::error::explained_message(path, &reason, None),
            reason: Some(reason),
            fix: None,
            framework_error: None,
            predicted: None,
        });
    }
    let (reply, report) = super::transport::carry(ToWorker { route, repeat, predicted })?;
    Ok(Handed { report, reply })
}

/// The transport of a handoff to a worker process, on this host or another: the route sets up
/// and hands the array over under the one timing loop of handoffs (or the worker's own, where the
/// sender times), and each side is described by memory identity in its own process.
pub struct ToWorker<'r, R: ProcessRoute> {
    pub route: &'r mut R,
    /// Timed handoffs after the first.
    pub repeat: usize,
    pub predicted: Option<crate::advice::model::Prediction>,
}

/// Both sides of a handoff to a worker, and the segment a staged copy went through.
pub struct WorkerSides {
    pub source: SourceSide,
    pub target: ProcessTarget,
    pub staging: Option<Staging>,
}

impl<R: ProcessRoute> super::transport::Transport for ToWorker<'_, R> {
    type Delivered = R::Reply;
    type Sides = WorkerSides;
    type Report = crate::render::lab::PathRow;

    fn kind(&self) -> PathKind {
        PathKind::Process
    }

    fn path(&self) -> &str {
        self.route.path()
    }

    fn hand_over(&mut self) -> Result<(R::Reply, crate::stats::Timing)> {
        let set_up = self.route.set_up()?;
        match self.route.hand_over_timed_by_worker(self.repeat) {
            Some(timed) => {
                let (reply, seconds) = timed?;
                let Some((first, rest)) = seconds.split_first() else {
                    return Err(Error::Other(format!("{}: the worker timed no handoff", self.route.path())));
                };
                Ok((reply, process_timing(set_up + first, rest.to_vec())))
            }
            None => time_handoffs(&mut HandoffCalls(&mut *self.route), self.repeat, set_up),
        }
    }

    fn describe(&mut self, reply: &R::Reply) -> Result<WorkerSides> {
        let (source, target) = self.route.sides(reply)?;
        Ok(WorkerSides { source, target, staging: self.route.staging()? })
    }

    fn judged(sides: &WorkerSides) -> explain::Sides<'_> {
        let staged = sides.staging.as_ref().filter(|s| s.staged_bytes > 0).map(|s| &s.segment);
        explain::Sides::Apart { source: sides.source.identity.as_ref(), target: sides.target.identity.as_ref(), staged }
    }

    fn report(self, reply: &R::Reply, sides: WorkerSides, judgement: explain::Judgement, timing: crate::stats::Timing) -> Result<Self::Report> {
        let path = self.route.path().to_string();
        let WorkerSides { source, target, staging } = sides;
        let (verdict, reason) = (judgement.verdict, judgement.reason);
        let by_design = paths::copied_by_design(PathKind::Process, &path).is_some();
        let bytes_moved = match &staging {
            Some(s) => s.staged_bytes,
            None if by_design || verdict != Verdict::Shared => source.nbytes,
            None => 0,
        };
        let described = paths::find(PathKind::Process, &path).map_or(path.as_str(), |p| p.description);
        let mechanism = match self.route.mechanism_detail()? {
            Some(detail) => format!("{described}: {detail}"),
            None => described.to_string(),
        };
        Ok(crate::render::lab::PathRow::of_worker(WorkerRun {
            verdict,
            reason,
            applicable: true,
            bytes_moved,
            timing: Some(timing),
            notes: self.route.notes(reply)?,
            predicted: self.predicted,
            worker: WorkerHandoff {
                mechanism,
                nbytes: source.nbytes,
                // What each timed handoff after the first moves: a send copies every time, a staged
                // segment only in the first call.
                bytes_per_handoff: if by_design { bytes_moved } else { 0 },
                source: ProcessSource {
                    pid: std::process::id(),
                    framework: source.framework,
                    identity: source.identity,
                    context: source.context,
                },
                target: Some(target),
                segment: staging.map(|s| s.segment),
                link: self.route.link()?,
            },
            path,
        }))
    }
}

/// The row of a path that does not apply (`applicable: false`, the refusal's reason) or that
/// failed while it ran (the error's words): the same columns as a handoff's, with no timing and no
/// worker side.
pub fn failed_report(path: &str, framework: &str, nbytes: u64, reason: String, applicable: bool) -> crate::render::lab::PathRow {
    crate::render::lab::PathRow::of_worker(WorkerRun {
        path: path.to_string(),
        verdict: Verdict::Failed,
        reason: Some(reason),
        applicable,
        bytes_moved: 0,
        timing: None,
        notes: Vec::new(),
        predicted: None,
        worker: WorkerHandoff {
            mechanism: paths::find(PathKind::Process, path).map_or(path, |p| p.description).to_string(),
            nbytes,
            bytes_per_handoff: 0,
            source: ProcessSource { pid: std::process::id(), framework: framework.to_string(), identity: None, context: None },
            target: None,
            segment: None,
            link: None,
        },
    })
}

/// Why the route does not apply: the core's rule over its facts, the costly ones asked through
/// the route only when the rule reaches them (the first error a probe met wins). What `run` refuses
/// by, and what `advise` predicts with before anything runs.
pub fn refusal<R: ProcessRoute>(route: &mut R) -> Result<Option<String>> {
    let f = route.facts()?;
    let path = route.path().to_string();
    let facts = ProcessFacts {
        path: &path,
        framework: &f.framework,
        to: f.to.as_deref(),
        targets: &f.targets,
        library: f.library.as_deref(),
        on_device: f.on_device,
        source_device: f.source_device,
        worker_device: f.worker_device,
        strided: f.strided,
    };
    let mut probe = Probe { route, error: None };
    let refused = explain::refuse_process(&facts, &mut probe);
    match probe.error {
        Some(e) => Err(e),
        None => Ok(refused),
    }
}

/// The route's costly facts as the rule's probe.
struct Probe<'r, R> {
    route: &'r mut R,
    error: Option<Error>,
}

impl<R: ProcessRoute> Probe<'_, R> {
    fn keep(&mut self, answer: Result<Option<String>>) -> Option<String> {
        answer.unwrap_or_else(|e| {
            self.error.get_or_insert(e);
            None
        })
    }
}

impl<R: ProcessRoute> ProcessProbe for Probe<'_, R> {
    fn library_unavailable(&mut self) -> Option<String> {
        let answer = self.route.library_unavailable();
        self.keep(answer)
    }
    fn nccl_unavailable(&mut self) -> Option<String> {
        let answer = self.route.nccl_unavailable();
        self.keep(answer)
    }
    fn ipc_refusal(&mut self) -> Option<String> {
        let answer = self.route.ipc_refusal();
        self.keep(answer)
    }
}

/// What the timing loop calls: one handoff, and the release of the last one.
pub trait Handoffs {
    type Reply;
    fn hand_over(&mut self) -> Result<Self::Reply>;
    fn release(&mut self, reply: Self::Reply) -> Result<()>;
}

/// A route's handoffs, for the timing loop.
struct HandoffCalls<'r, R>(&'r mut R);

impl<R: ProcessRoute> Handoffs for HandoffCalls<'_, R> {
    type Reply = R::Reply;
    fn hand_over(&mut self) -> Result<R::Reply> {
        self.0.hand_over()
    }
    fn release(&mut self, reply: R::Reply) -> Result<()> {
        self.0.release(reply)
    }
}

/// One handoff per sample: the last handoff's result is released (untimed) before the next
/// handoff (timed) takes its place.
struct HandoffSampler<'h, H: Handoffs> {
    handoffs: &'h mut H,
    last: Option<H::Reply>,
}

impl<H: Handoffs> Sampler for HandoffSampler<'_, H> {
    fn sample(&mut self, n: u64, _device_clock: bool) -> Result<(f64, Option<f64>)> {
        let mut seconds = 0.0;
        for _ in 0..n {
            if let Some(last) = self.last.take() {
                self.handoffs.release(last)?;
            }
            let t0 = std::time::Instant::now();
            self.last = Some(self.handoffs.hand_over()?);
            seconds += t0.elapsed().as_secs_f64();
        }
        Ok((seconds, None))
    }
}

/// The one timing loop over handoffs: one handoff (the first call, with its one-off costs, plus
/// `first_extra` seconds measured before it), then `repeat` samples of one handoff each, the last
/// handoff released untimed before each. Returns the last handoff's reply (not released) and the
/// timing.
pub fn time_handoffs<H: Handoffs>(handoffs: &mut H, repeat: usize, first_extra: f64) -> Result<(H::Reply, crate::stats::Timing)> {
    let mut sampler = HandoffSampler { handoffs, last: None };
    let first = timing::measure(&TimingPolicy::once(), &mut sampler)?.samples[0];
    let samples = if repeat > 0 {
        let mut policy = TimingPolicy::fixed(repeat, 1, 0);
        policy.pause_collector = false; // a handoff waits on a pipe: the collector is not what is timed
        timing::measure(&policy, &mut sampler)?.samples
    } else {
        Vec::new()
    };
    let last = sampler.last.take().expect("at least one handoff was made");
    Ok((last, process_timing(first + first_extra, samples)))
}

/// The timing of handoffs: the core's statistics of the handoffs after the first, in the order
/// they were made, with the first call (and its one-off costs) apart; a single handoff is its own
/// one sample.
pub fn process_timing(first_call: f64, mut samples: Vec<f64>) -> crate::stats::Timing {
    if samples.is_empty() {
        samples.push(first_call);
    }
    let mut timing = crate::stats::Timing::from_samples(samples, 1);
    timing.first_call = Some(first_call);
    timing
}

#[cfg(test)]
#[path = "process_tests.rs"]
pub(crate) mod tests;
