//! `auto` as the rules see it: the one [`crate::auto::resolve_auto`], from the facts the adapters
//! declare ([`Endpoints`], read once per pair by the binding): the rules keep no copy of them.

use super::TargetFacts;
use crate::auto::{AutoFacts, auto_size_breaks, resolve_auto};
use crate::paths::{Endpoints, Place};
use crate::report::TensorReport;

/// The path a handoff of `source` to `target` by `target.path` takes: `auto` resolved by the one
/// [`crate::auto::resolve_auto`], from the adapters' facts.
pub fn resolve_path<'a>(source: &TensorReport, target: &'a TargetFacts) -> &'a str {
    if target.path != "auto" {
        return &target.path;
    }
    auto_for_array(source, target).path
}

/// `auto` for one array, and why where the model's pick for arrays like it was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayAuto {
    pub path: &'static str,
    /// Why `auto` took this path where the rules alone would take another (the model predicts it
    /// fastest), or did not take the path the model picks for this kind of source (it would give
    /// this array a worse verdict: a dtype or layout the calibration's float32 arrays did not have).
    pub why: Option<String>,
}

/// THE `auto` for one described array (`target.path` is `auto`). Without a cost model, the rules'
/// choice. With one, as `advise` recommends: the best verdict the rules predict for *this* array
/// among the paths the model may take (sharing, then copying; never one predicted to fail), and
/// among those the one it predicts fastest. The model's sweep measured float32 arrays: `cai` into
/// JAX keeps an int64 that DLPack narrows, and has no typestr for bfloat16, so what a path gives
/// is asked of the array, never of the sweep. Both the route that runs and the prediction shown
/// come from here (the share plan asks it per array), so a row's prediction is always for the
/// path that ran.
pub fn auto_for_array(source: &TensorReport, target: &TargetFacts) -> ArrayAuto {
    if target.auto_model.is_none() {
        let rules = resolve_auto(&share_facts(source, &target.framework, target.endpoints, None, false));
        return ArrayAuto { path: rules.path, why: rules.why };
    }
    if let Some(known) = target.auto_memo.array(source, target) {
        return known;
    }
    let chosen = decide_for_array(source, target);
    target.auto_memo.remember_array(ArrayKey::of(source, target), &chosen);
    chosen
}

/// Whether `auto`'s pick for arrays like `source` changes when the producer's stream has work
/// queued: only then is the driver asked, per share (a microsecond, and a call into the source
/// framework for its stream). Never without a model (the rules' choice does not read the producer)
/// nor for host memory (nothing is queued for it).
pub fn auto_follows_producer(source: &TensorReport, target: &TargetFacts) -> bool {
    let Some(model) = target.auto_model.as_deref() else { return false };
    if target.path != "auto" || target.destination.is_some() || !matches!(Place::of_dlpack(source.dlpack_device), Place::Device(_)) {
        return false;
    }
    let memo = &target.auto_memo;
    memo.path(source, &target.framework, target.endpoints, model, false) != memo.path(source, &target.framework, target.endpoints, model, true)
}

/// [`auto_for_array`] with a model, worked out.
fn decide_for_array(source: &TensorReport, target: &TargetFacts) -> ArrayAuto {
    let rules_choice = resolve_auto(&share_facts(source, &target.framework, target.endpoints, None, false));
    let rules = rules_choice.path;
    let Some(model) = target.auto_model.as_deref() else {
        return ArrayAuto { path: rules, why: rules_choice.why };
    };
    // The model's word costs a microsecond (its fits for the pair, each read and compared); it is
    // asked once per kind of source and range of sizes, and remembered with the facts it was asked
    // with. Where it keeps the rules' choice and that works, nothing is left to weigh.
    let busy = target.settings.producer_busy;
    let picked = target.auto_memo.path(source, &target.framework, target.endpoints, model, busy);
    let verdict_by = |path: &str| super::predict(source, &explicit(target, path)).verdict();
    let picked_verdict = verdict_by(picked);
    if picked == rules && picked_verdict == crate::report::Verdict::Shared {
        return ArrayAuto { path: rules, why: rules_choice.why };
    }
    let facts = share_facts(source, &target.framework, target.endpoints, Some(model), busy);
    for wanted in [2, 1] {
        let shares_by = |path: &str| match verdict_by(path) {
            crate::report::Verdict::Shared => Some(true),
            crate::report::Verdict::Copied => Some(false),
            _ => None,
        };
        let choice = crate::auto::resolve_auto_for_array(&facts, &|path| rank(verdict_by(path)) >= wanted, &shares_by);
        let path = choice.path;
        if rank(verdict_by(path)) >= wanted {
            // The overruling words only where the model's pick would have served this array worse.
            let why = if path != picked && rank(picked_verdict) < rank(verdict_by(path)) {
                Some(format!(
                    "the cost model predicts {picked} fastest for arrays like this one, but the rules predict {picked} \
                     {} this one and {path} {}: auto took {path}",
                    verdict_words(picked_verdict),
                    verdict_words(verdict_by(path)),
                ))
            } else {
                choice.why
            };
            return ArrayAuto { path, why };
        }
    }
    ArrayAuto { path: rules, why: rules_choice.why }
}

fn verdict_words(verdict: crate::report::Verdict) -> &'static str {
    match verdict {
        crate::report::Verdict::Shared => "shares",
        crate::report::Verdict::Copied => "copies",
        _ => "fails on",
    }
}

/// The same facts, for one named path (no model: nothing left to resolve). The `pinned` path's
/// rule reads whether the CUDA driver is usable, which a prediction of `auto` was not asked.
fn explicit(target: &TargetFacts, path: &str) -> TargetFacts {
    let mut settings = target.settings.clone();
    if path == "pinned" && settings.cuda_available.is_none() {
        settings.cuda_available = Some(matches!(crate::cuda::driver_status(), crate::cuda::DriverStatus::Available { .. }));
    }
    TargetFacts {
        framework: target.framework.clone(),
        version: target.version.clone(),
        path: path.into(),
        settings,
        endpoints: target.endpoints,
        destination: target.destination,
        auto_model: None,
        auto_memo: AutoMemo::default(),
    }
}

/// A verdict's order for `auto`: sharing is better than copying, and anything that works better
/// than failing.
fn rank(verdict: crate::report::Verdict) -> u8 {
    use crate::report::Verdict;
    match verdict {
        Verdict::Shared => 2,
        Verdict::Copied => 1,
        _ => 0,
    }
}

/// `auto`'s path with a cost model, remembered per (source framework, place, read-only) and range
/// of sizes: all that [`resolve_auto_with`] reads of a source besides the facts it sits beside (the
/// target, the endpoints and the model, fixed for one [`TargetFacts`]). The model decides at one
/// size per range ([`crate::advice::crossings`]), so the remembered path is the one it gives any
/// array of the range. A prediction runs on every share.
///
/// Beside it, [`auto_for_array`]'s answers per kind of array (its [`ArrayKey`]): the rules'
/// verdicts it weighs cost a prediction per path, and a share asks on every call.
#[derive(Debug, Default)]
pub struct AutoMemo(Arc<Mutex<Vec<AutoMemoEntry>>>, Arc<Mutex<Vec<(ArrayKey, ArrayAuto)>>>);

use std::sync::{Arc, Mutex};

/// How many kinds of array [`AutoMemo`] keeps the per-array `auto` of (the oldest goes first).
const ARRAYS_REMEMBERED: usize = 64;

/// Everything of a described array and of the frameworks' live settings that a rule reads: two
/// arrays with the same key get the same prediction by every path, so the same `auto`. The address
/// counts only by its alignment (the rules ask whether it is a multiple of 16 or 64 bytes), and
/// the span relative to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayKey {
    framework: String,
    dtype: String,
    shape: Vec<i64>,
    strides: Vec<i64>,
    dlpack_device: (u32, i32),
    readonly: bool,
    dlpack_version: Option<(u32, u32)>,
    byte_offset: u64,
    address_alignment: u64,
    span_from_address: (i128, i128),
    nbytes: u64,
    /// The live settings a rule reads: the target keeps 64-bit types, the source's and the target's
    /// current devices (CuPy's `cai` import copies memory of another device to its current one),
    /// the target has a current context, the CUDA driver is usable, the producer is busy.
    settings: (Option<bool>, Option<i32>, Option<i32>, Option<bool>, Option<bool>, bool),
}

/// The fields of an [`ArrayKey`] that are not owned (everything but the names, shape and strides).
type KeyScalars = (
    (u32, i32),
    bool,
    Option<(u32, u32)>,
    u64,
    u64,
    (i128, i128),
    u64,
    (Option<bool>, Option<i32>, Option<i32>, Option<bool>, Option<bool>, bool),
);

impl ArrayKey {
    fn of(source: &TensorReport, target: &TargetFacts) -> ArrayKey {
        let (dlpack_device, readonly, dlpack_version, byte_offset, address_alignment, span_from_address, nbytes, settings) =
            Self::scalars(source, target);
        ArrayKey {
            framework: source.framework.clone(),
            dtype: source.dtype.clone(),
            shape: source.shape.clone(),
            strides: source.strides.clone(),
            dlpack_device,
            readonly,
            dlpack_version,
            byte_offset,
            address_alignment,
            span_from_address,
            nbytes,
            settings,
        }
    }

    /// Whether this is the key of `source` under `target`: what [`ArrayKey::of`] would make, compared
    /// without making it (a share of a known kind of array looks its key up on every call, and the
    /// four allocations of a key cost more than the lookup).
    fn is_of(&self, source: &TensorReport, target: &TargetFacts) -> bool {
        self.framework == source.framework
            && self.dtype == source.dtype
            && self.shape == source.shape
            && self.strides == source.strides
            && (
                self.dlpack_device,
                self.readonly,
                self.dlpack_version,
                self.byte_offset,
                self.address_alignment,
                self.span_from_address,
                self.nbytes,
                self.settings,
            ) == Self::scalars(source, target)
    }

    fn scalars(source: &TensorReport, target: &TargetFacts) -> KeyScalars {
        let from = |a: u64| i128::from(a) - i128::from(source.data_ptr);
        (
            source.dlpack_device,
            source.readonly,
            source.dlpack_version,
            source.byte_offset,
            source.data_ptr % 4096,
            (from(source.span.0), from(source.span.1)),
            source.nbytes,
            (
                target.settings.target.keeps_64_bit,
                target.settings.source.current_device,
                target.settings.target.current_device,
                target.settings.target.has_current_context,
                target.settings.cuda_available,
                target.settings.producer_busy,
            ),
        )
    }
}

/// One kind of source: (source framework, DLPack place, read-only, producer busy), the sizes at
/// which the model's choice may change, and the path of each range between them, once asked.
#[derive(Debug, Clone)]
struct AutoMemoEntry {
    framework: String,
    place: (u32, i32),
    readonly: bool,
    busy: bool,
    breaks: Vec<u64>,
    paths: Vec<Option<&'static str>>,
}

impl AutoMemo {
    fn path(
        &self,
        source: &TensorReport,
        target: &str,
        endpoints: Endpoints,
        model: &crate::advice::model::CostModel,
        busy: bool,
    ) -> &'static str {
        let same = |e: &AutoMemoEntry| {
            e.framework == source.framework && e.place == source.dlpack_device && e.readonly == source.readonly && e.busy == busy
        };
        if let Ok(memo) = self.0.lock()
            && let Some(entry) = memo.iter().find(|e| same(e))
            && let Some(Some(path)) = entry.paths.get(crate::advice::crossings::size_class(&entry.breaks, source.payload_bytes()))
        {
            return path;
        }
        let facts = share_facts(source, target, endpoints, Some(model), busy);
        let path = resolve_auto(&facts).path;
        if let Ok(mut memo) = self.0.lock() {
            let index = match memo.iter().position(same) {
                Some(index) => index,
                None => {
                    let breaks = auto_size_breaks(&facts);
                    let paths = vec![None; breaks.len() + 1];
                    memo.push(AutoMemoEntry {
                        framework: source.framework.clone(),
                        place: source.dlpack_device,
                        readonly: source.readonly,
                        busy,
                        breaks,
                        paths,
                    });
                    memo.len() - 1
                }
            };
            let entry = &mut memo[index];
            let class = crate::advice::crossings::size_class(&entry.breaks, source.payload_bytes());
            entry.paths[class] = Some(path);
        }
        path
    }
}

impl Clone for AutoMemo {
    /// A copy of the facts shares what is known, and what it learns: the same facts give the same
    /// `auto`, and a copy made to carry a framework's live settings (`Predictor`, each share) keeps
    /// what it works out for the next share (the array's key holds those settings).
    fn clone(&self) -> AutoMemo {
        AutoMemo(Arc::clone(&self.0), Arc::clone(&self.1))
    }
}

impl AutoMemo {
    fn array(&self, source: &TensorReport, target: &TargetFacts) -> Option<ArrayAuto> {
        self.1.lock().ok()?.iter().find(|(k, _)| k.is_of(source, target)).map(|(_, auto)| auto.clone())
    }

    fn remember_array(&self, key: ArrayKey, auto: &ArrayAuto) {
        if let Ok(mut arrays) = self.1.lock() {
            if arrays.len() >= ARRAYS_REMEMBERED {
                arrays.remove(0);
            }
            arrays.push((key, auto.clone()));
        }
    }
}

/// What a plan of `auto` decided per kind of array (its [`ArrayKey`], the live settings included):
/// the path [`auto_for_array`] takes and the prediction for it. The rules give every array of a
/// kind the same answers, and working them out (each path's verdict weighed, the reasons written)
/// cost a plan a microsecond or two of every share on a GPU host; a share of a known kind costs a
/// key and a lookup. One per plan's predictor: its target, path and cost model are fixed.
#[derive(Debug, Default)]
pub struct DecisionMemo(Mutex<Vec<(ArrayKey, Arc<Decision>)>>);

/// What `auto` decided for one kind of array: the path it takes, and the prediction for that path.
/// Shared, not copied, by every share of that kind: its words are written once.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub chosen: ArrayAuto,
    pub predicted: super::PredictedOutcome,
}

impl DecisionMemo {
    /// The path `auto` takes for `source` under `target` and the prediction `decide` gives for it,
    /// remembered per kind of array.
    pub fn decide(&self, source: &TensorReport, target: &TargetFacts, decide: impl FnOnce() -> Decision) -> Arc<Decision> {
        if let Ok(known) = self.0.lock()
            && let Some((_, decision)) = known.iter().find(|(k, _)| k.is_of(source, target))
        {
            return Arc::clone(decision);
        }
        let decision = Arc::new(decide());
        if let Ok(mut known) = self.0.lock() {
            if known.len() >= ARRAYS_REMEMBERED {
                known.remove(0);
            }
            known.push((ArrayKey::of(source, target), Arc::clone(&decision)));
        }
        decision
    }
}

impl PartialEq for AutoMemo {
    /// A memo is not a fact: two facts are equal whatever each has remembered.
    fn eq(&self, _: &AutoMemo) -> bool {
        true
    }
}

/// `auto` within the source's device for the adapters' `endpoints`, with the cost model where
/// there is one, for this array's size.
pub fn resolve_auto_with(
    source: &TensorReport,
    target: &str,
    endpoints: Endpoints,
    model: Option<&crate::advice::model::CostModel>,
) -> &'static str {
    resolve_auto(&share_facts(source, target, endpoints, model, false)).path
}

/// The facts of a handoff of `source` to `target` within its device.
fn share_facts<'a>(
    source: &'a TensorReport,
    target: &'a str,
    endpoints: Endpoints,
    model: Option<&'a crate::advice::model::CostModel>,
    producer_busy: bool,
) -> AutoFacts<'a> {
    AutoFacts {
        endpoints,
        source: Place::of_dlpack(source.dlpack_device),
        destination: None,
        peer_access: None,
        target_name: target,
        across_processes: false,
        source_shares_host_across: false,
        source_host_shared: false,
        model,
        source_name: &source.framework,
        // A copy moves the array's elements, not the span of a strided extent.
        nbytes: Some(source.payload_bytes()),
        // Only the model's pick reads it: the rules' choice is of the handoff itself.
        producer_busy: producer_busy && model.is_some(),
        // The array described: whether it is read-only (an immutable framework's arrays count as
        // read-only, which only matters for a source that refuses those by capsule: NumPy).
        source_readonly: Some(source.readonly),
    }
}
