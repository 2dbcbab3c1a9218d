//! THE `auto`: the policy that picks a path of the table ([`crate::paths`]) for a handoff, from what
//! the adapters declare ([`Endpoints`]), where the array lies and goes ([`Place`]) and the cost
//! model where there is one. `auto` is [`resolve_auto`] and nothing else, so `share`, `compare`,
//! `bench`, `%share`, the predictor and `gpushare bench` cannot disagree on it.

use crate::paths::{find, Endpoints, PathKind, Place};
use PathKind::{Move, Process, Share};

/// The facts `auto` decides from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoFacts<'a> {
    pub endpoints: Endpoints,
    /// Where the source lies.
    pub source: Place,
    /// Where the array is asked to go (`device=`); `None`: where it lies.
    pub destination: Option<Place>,
    /// Whether the source's GPU can reach the destination GPU's memory (`cuDeviceCanAccessPeer`):
    /// asked only for a move between two GPUs; `None` when unknown (then no peer copy).
    pub peer_access: Option<bool>,
    /// Target framework's name, for the words only.
    pub target_name: &'a str,
    /// The array goes to another process (`across=`): a process path.
    pub across_processes: bool,
    /// The source framework's own transport hands host memory to another process by moving it
    /// into shared memory once, values kept, so the worker maps the source itself (PyTorch's
    /// torch.multiprocessing; the adapter's `shares_host_memory_across_processes`).
    pub source_shares_host_across: bool,
    /// The array's host memory already lies in memory another process can map (torch's
    /// `x.is_shared()`): the source framework's transport then hands it over as it is. Where it does
    /// not, that transport would move the storage, and the memory every existing view of the array
    /// reads (a NumPy array, a DLPack import, an earlier share) would be freed under it.
    pub source_host_shared: bool,
    /// The calibrated cost model of this machine, when there is one: among the paths whose sweep
    /// gave the rules' choice's verdict, `auto` takes the one it predicts fastest.
    pub model: Option<&'a crate::advice::model::CostModel>,
    /// Source framework's name (the model's key).
    pub source_name: &'a str,
    /// Bytes of the array, where known (the model's prediction for moves and copies depends on it).
    pub nbytes: Option<u64>,
    /// The producer's stream has work queued (the driver said so: `cuStreamQuery`): a path whose
    /// host waits for it ([`crate::advice::producer::host_waits`]) costs at least all of that work,
    /// so among the calibrated paths of the same verdict `auto` takes one ordered on the device.
    pub producer_busy: bool,
    /// Whether the source array is read-only, where the caller knows it (`None`: not known): a
    /// legacy capsule replaces DLPack for a source that refuses to export read-only arrays by one
    /// only when this is `Some(false)`.
    pub source_readonly: Option<bool>,
}

/// The size `auto` predicts at when the caller does not say the array's (the rules' own word, a
/// pair's `auto` asked without an array): zero-copy paths cost the same at any size, and a copy's
/// choice is made where both terms count. A share, `compare`, a sweep and `advise` pass the size.
pub const AUTO_REFERENCE_BYTES: u64 = 1 << 20;

/// What `auto` takes, and why where the choice is not the plain one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoChoice {
    pub path: &'static str,
    pub kind: PathKind,
    /// Why `auto` took this path, where it is not the plain handoff (the host route, a move).
    pub why: Option<String>,
}

/// THE `auto`: the fastest correct path for these facts.
///
/// Correct first: a handoff the target can take. Between devices (`destination` set): nothing to
/// move when the array is already there (the framework's own move is then none, and the usual
/// handoff follows); a peer copy between two GPUs that reach each other; otherwise the framework's
/// own move. Within a device: the host route when the source is in device memory and the target
/// cannot address device memory (a copy is the only correct handoff, and it says so); a capsule into
/// a target that imports capsules only (TensorFlow); `__cuda_array_interface__` where one side has no
/// DLPack object import or export (Numba); DLPack otherwise.
pub fn resolve_auto(facts: &AutoFacts<'_>) -> AutoChoice {
    resolve_auto_admitting(facts, &|_| true)
}

/// [`resolve_auto`] where the model may replace the rules' choice only by a path `admits`: the
/// planner's word for one array, whose verdict by each path the rules predict
/// ([`crate::explain::auto_for_array`]). The sweep that fitted the model measured float32 arrays
/// only, so its verdicts say nothing of this array's dtype or layout.
pub fn resolve_auto_admitting(facts: &AutoFacts<'_>, admits: &dyn Fn(&str) -> bool) -> AutoChoice {
    let rules = rules_auto(facts);
    match facts.model {
        Some(model) => by_model(facts, model, rules, admits, None),
        None => rules,
    }
}

/// [`resolve_auto_admitting`] for one described array, where `admits` holds the rules' verdict of
/// each path for it: every calibrated path of the pair is a candidate, whatever its sweep's
/// verdict (an int64 array into JAX without x64 is copied by DLPack as by the host route), where
/// its fit prices this array's verdict by it (`shares_by`: whether the rules say that path shares
/// it; a fit of copies does not price a share, nor one of shares a copy:
/// [`crate::advice::model::CostModel::predict_for_array`], whose rows `advise` ranks the same way).
pub fn resolve_auto_for_array(facts: &AutoFacts<'_>, admits: &dyn Fn(&str) -> bool, shares_by: &dyn Fn(&str) -> Option<bool>) -> AutoChoice {
    let rules = rules_auto(facts);
    match facts.model {
        Some(model) => by_model(facts, model, rules, admits, Some(shares_by)),
        None => rules,
    }
}

/// The model's word on the rules' choice: the fastest calibrated path with the same verdict, when
/// it is another path. Process paths stay the rules' (the worker maps the source's own memory).
/// `for_array`: one array's verdict by each path, where known: then every calibrated path whose
/// fit prices that verdict is a candidate, whatever its sweep's verdict.
fn by_model(
    facts: &AutoFacts<'_>,
    model: &crate::advice::model::CostModel,
    rules: AutoChoice,
    admits: &dyn Fn(&str) -> bool,
    for_array: Option<&dyn Fn(&str) -> Option<bool>>,
) -> AutoChoice {
    let Some(place) = model_place(facts, &rules) else {
        return rules;
    };
    let bytes = facts.nbytes.unwrap_or(AUTO_REFERENCE_BYTES);
    let kind = rules.kind;
    // Decided at one size of the range of sizes `bytes` lies in, inside which the paths' order does
    // not change: the same choice for every array of the range, whoever asks.
    // Past the largest size the sweep measured, at that size (crate::advice::crossings).
    let (breaks, ceiling) = model.size_breaks_and_ceiling(kind, facts.source_name, facts.target_name, &place, rules.path);
    let decided_at = crate::advice::crossings::decision_size_within(&breaks, bytes, ceiling);
    let general = |path: &str| admits(path) && (path == rules.path || may_replace(facts, &rules, path));
    // A busy producer: a path whose host waits for its queued work costs at least all of it (an
    // amount the driver cannot tell), so one ordered on the device is taken where one is calibrated.
    let waits = |path: &str| crate::advice::producer::host_waits(kind, path, &wait_facts(facts));
    let calm = |path: &str| general(path) && !waits(path);
    let fastest_among = |allowed: &dyn Fn(&str) -> bool| {
        if let Some(shares_by) = for_array {
            model
                .pair_fits(kind, facts.source_name, facts.target_name, &place)
                .into_iter()
                .filter(|(path, fit)| allowed(path) && shares_by(path).is_none_or(|shares| fit.prices(shares)))
                .map(|(path, fit)| (path, fit.seconds(decided_at)))
                .filter(|(_, seconds)| seconds.is_finite())
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(path, seconds)| (path.to_string(), seconds))
        } else {
            model.fastest_like(kind, facts.source_name, facts.target_name, &place, rules.path, decided_at, allowed)
        }
    };
    // For one array: where the rules' own path is calibrated but its fit was measured with another
    // verdict than this array's by it, the model has no word on it and does not overrule it (a
    // faster-looking path is only one the model could price, not one it knows to be faster).
    if let Some(shares_by) = for_array
        && general(rules.path)
        && let Some(shares) = shares_by(rules.path)
    {
        let key = crate::advice::model::CostKey {
            kind,
            path: rules.path.into(),
            source: facts.source_name.into(),
            target: facts.target_name.into(),
            place: place.clone(),
        };
        if model.fit(&key).is_some_and(|fit| !fit.prices(shares)) {
            return rules;
        }
    }
    let busy_pick = if facts.producer_busy { fastest_among(&calm) } else { None };
    let avoided_waiting = busy_pick.is_some() && waits(rules.path);
    let Some((fastest, _)) = busy_pick.or_else(|| fastest_among(&general)) else {
        return rules;
    };
    match find(rules.kind, &fastest) {
        Some(spec) if spec.name != rules.path => {
            // The words give both predictions where the choice was made, and the range of sizes
            // it holds for (a share keeps its route, and these words, for the whole range).
            let predicted = |path: &str| {
                let key = crate::advice::model::CostKey {
                    kind,
                    path: path.into(),
                    source: facts.source_name.into(),
                    target: facts.target_name.into(),
                    place: place.clone(),
                };
                model.fit(&key).map(|f| crate::render::units::time(f.seconds(decided_at))).unwrap_or_default()
            };
            let (ours, theirs) = (predicted(spec.name), predicted(rules.path));
            let (size, theirs_name) = (crate::render::units::bytes(decided_at), rules.path);
            let arrays = crate::advice::crossings::range_words(&breaks, bytes).map(|r| format!(" for arrays {r}")).unwrap_or_default();
            let why = if avoided_waiting {
                format!(
                    "the producer is busy (its stream has queued work): {theirs_name} waits on the host for all of it, {} is \
                     ordered on the device{arrays} ({ours} predicted, at {size}, idle {theirs_name} {theirs}); the rules alone take {theirs_name}",
                    spec.name
                )
            } else {
                format!(
                    "the cost model of this machine predicts {} fastest{arrays} ({ours} against {theirs} for {theirs_name}, at {size}); \
                     the rules alone take {theirs_name}",
                    spec.name
                )
            };
            let why = match rules.why {
                Some(first) => format!("{first}; {why}"),
                None => why,
            };
            AutoChoice { path: spec.name, kind: rules.kind, why: Some(why) }
        }
        _ => rules,
    }
}

/// Whether the model may put `path` in place of the rules' choice: a path that applies to any
/// array of the pair (not `shared`, which needs a SharedBuffer) and that orders the consumer after
/// the producer's queued work.
fn may_replace(facts: &AutoFacts<'_>, rules: &AutoChoice, path: &str) -> bool {
    let on_device = matches!(facts.source, Place::Device(_));
    // A legacy capsule carries no flags: it replaces another path only where that loses nothing. On
    // a GPU it carries no stream either (`orders_finished_values` keeps it out there); a source that
    // refuses to export read-only arrays by one (NumPy) gets it only for an array known to be
    // writable. Elsewhere it is the same handoff with less protocol around it: tf→torch on a CPU by
    // capsule 2.5 µs against 5.2 by DLPack (benchmarks/bench_advice.py).
    let capsule_loses_nothing = !facts.endpoints.source_capsule_refuses_readonly || facts.source_readonly == Some(false);
    find(rules.kind, path).is_some_and(|spec| spec.modelled)
        && imports_by(rules.kind, path, &facts.endpoints)
        && orders_finished_values(rules.kind, path, &facts.endpoints, on_device)
        && (path != "capsule" || rules.path == "capsule" || capsule_loses_nothing)
}

/// Whether the two frameworks can hand an array over by `path` at all, as their adapters declare:
/// a model's fit for a path is no proof of that (a cache file from another version, or edited).
fn imports_by(kind: PathKind, path: &str, e: &Endpoints) -> bool {
    match (kind, path) {
        (Share, "capsule") => e.target_accepts_capsules,
        (Share, "dlpack") => e.source_exports_dlpack && e.target_accepts_objects,
        _ => true,
    }
}

/// The path `auto` could have taken instead of its choice for these facts that the model predicts
/// within its stated error of that choice (at the size `auto` decides at): the two are a tie the
/// model cannot break, and which one it predicts faster follows each calibration's noise (between
/// two H200s `move` and `p2p` below about 14 MiB: notebook 08). `None` without a model, where the
/// rules' choice has no fits, or where every other candidate is predicted further off.
pub fn auto_close_second(facts: &AutoFacts<'_>) -> Option<&'static str> {
    let model = facts.model?;
    let rules = rules_auto(facts);
    let place = model_place(facts, &rules)?;
    let choice = resolve_auto(facts);
    let kind = rules.kind;
    let (breaks, ceiling) = model.size_breaks_and_ceiling(kind, facts.source_name, facts.target_name, &place, rules.path);
    let at = crate::advice::crossings::decision_size_within(&breaks, facts.nbytes.unwrap_or(AUTO_REFERENCE_BYTES), ceiling);
    // With a busy producer `auto` weighs only paths ordered on the device where it took one.
    let waits = |path: &str| crate::advice::producer::host_waits(kind, path, &wait_facts(facts));
    let calm_only = facts.producer_busy && !waits(choice.path);
    let candidates = model.same_verdict_fits(kind, facts.source_name, facts.target_name, &place, rules.path);
    let (_, chosen) = candidates.iter().find(|(path, _)| *path == choice.path)?;
    let chosen_s = chosen.seconds(at);
    candidates
        .iter()
        .filter(|(path, _)| *path != choice.path && (may_replace(facts, &rules, path) || *path == rules.path))
        .filter(|(path, _)| !calm_only || !waits(path))
        .map(|(path, fit)| (*path, fit.seconds(at), fit.tolerance(at).max(chosen.tolerance(at))))
        .filter(|(_, seconds, _)| seconds.is_finite() && *seconds >= chosen_s)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .filter(|(_, seconds, tolerance)| *seconds <= chosen_s * (1.0 + tolerance))
        .and_then(|(path, ..)| find(rules.kind, path).map(|spec| spec.name))
}

/// One range of sizes and what THE `auto` takes for arrays in it ([`auto_ranges`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoRange {
    /// Bytes the range starts at (included).
    pub from: u64,
    /// Bytes it ends below; `None`: no end.
    pub below: Option<u64>,
    pub path: &'static str,
    /// A path predicted within the model's error of `path` there ([`auto_close_second`]).
    pub close: Option<&'static str>,
}

/// THE `auto`'s path for each range of sizes of these facts ([`auto_size_breaks`]), neighbours
/// with the same path and the same close second joined; one range where one path serves every size.
pub fn auto_ranges(facts: &AutoFacts<'_>) -> Vec<AutoRange> {
    let breaks = auto_size_breaks(facts);
    let mut ranges: Vec<AutoRange> = Vec::new();
    let starts = std::iter::once(0).chain(breaks.iter().copied());
    let ends = breaks.iter().copied().map(Some).chain(std::iter::once(None));
    for (from, below) in starts.zip(ends) {
        // Each range is asked at its first size, which `auto` decides like every other size of it.
        let at = AutoFacts { nbytes: Some(from), ..*facts };
        let (path, close) = (resolve_auto(&at).path, auto_close_second(&at));
        match ranges.last_mut() {
            Some(last) if last.path == path && last.close == close => last.below = below,
            _ => ranges.push(AutoRange { from, below, path, close }),
        }
    }
    ranges
}

/// Where the model's fits for the rules' choice lie: the source's place for a share, the pair of
/// devices for a move; `None` where the model has no word (a process path, a move to where the
/// array already is).
fn model_place(facts: &AutoFacts<'_>, rules: &AutoChoice) -> Option<String> {
    match (rules.kind, facts.destination) {
        (Share, _) => Some(facts.source.name()),
        (Move, Some(to)) if to != facts.source => Some(format!("{}->{}", facts.source.name(), to.name())),
        _ => None,
    }
}

/// The sizes at which THE `auto`'s choice for these facts may change (empty: the same path at
/// every size). A caller that keeps a choice per kind of array keeps one per range of these
/// ([`crate::advice::crossings::size_class`]): `auto` decides at one size per range.
pub fn auto_size_breaks(facts: &AutoFacts<'_>) -> Vec<u64> {
    let Some(model) = facts.model else {
        return Vec::new();
    };
    let rules = rules_auto(facts);
    match model_place(facts, &rules) {
        Some(place) => model.size_breaks(rules.kind, facts.source_name, facts.target_name, &place, rules.path),
        None => Vec::new(),
    }
}

/// What decides whether a handoff's host waits for the producer's queued work, from the facts.
fn wait_facts(facts: &AutoFacts<'_>) -> crate::advice::producer::WaitFacts {
    crate::advice::producer::WaitFacts {
        on_device: matches!(facts.source, Place::Device(_)),
        target_takes_objects: facts.endpoints.target_accepts_objects,
        target_import_waits: facts.endpoints.target_import_waits,
        to_host: facts.destination == Some(Place::Host),
    }
}

/// Whether a handoff by `path` guarantees the consumer reads finished values, from `on_device`
/// memory. A legacy capsule carries no stream: a consumer that imports it onto its own stream may
/// read before the producer's queued work lands (measured on 2× H200: torch→cupy by capsule took
/// 51 µs with 10.8 ms of matmuls queued), so only a capsule gpushare waits for first (into a target
/// that takes capsules alone: TensorFlow) is ordered. DLPack passes the consumer's stream, the CUDA
/// array interface carries the producer's, and the copying paths order their own copies.
pub fn orders_finished_values(kind: PathKind, path: &str, e: &Endpoints, on_device: bool) -> bool {
    let unordered = match path {
        "capsule" => e.target_accepts_objects,
        "cai" => e.target_cai_unordered,
        _ => false,
    };
    !(on_device && kind == Share && unordered)
}

/// `auto` by the rules alone: what every machine gets before it is calibrated.
fn rules_auto(facts: &AutoFacts<'_>) -> AutoChoice {
    let e = &facts.endpoints;
    if facts.across_processes {
        // The worker maps the source's own memory: CUDA IPC for device memory, a shared segment
        // for host memory (the copying paths, NCCL and gloo, are for comparison).
        let (path, why) = match facts.source {
            Place::Device(_) => ("ipc", "device memory: the worker maps the allocation by CUDA IPC"),
            Place::Host if facts.source_shares_host_across && facts.source_host_shared => {
                ("torch_mp", "host memory already in shared memory: the source framework's transport hands the worker the array itself")
            }
            // torch.multiprocessing would move the storage into shared memory and free the memory
            // the array's other views read (measured: a NumPy view of a 64 MiB tensor read freed
            // memory and crashed the process): `auto` never does that to the caller's array.
            Place::Host if facts.source_shares_host_across => (
                "shm",
                "host memory: the worker maps a segment gpushare copies the array into (torch_mp would move the tensor's \
                 storage into shared memory and free the memory its other views read, NumPy's and DLPack's among them; \
                 call x.share_memory_() first and auto hands the worker the tensor itself)",
            ),
            Place::Host => ("shm", "host memory: the worker maps a segment gpushare copies the array into"),
        };
        return AutoChoice { path, kind: Process, why: Some(why.into()) };
    }
    if let Some(destination) = facts.destination {
        let (path, why) = match (facts.source, destination) {
            (from, to) if from == to => ("move", format!("the array is already on {}: no move is needed, the usual handoff follows", to.name())),
            (Place::Device(_), Place::Device(_)) if facts.peer_access == Some(true) => {
                ("p2p", "the two GPUs reach each other (peer access): a peer copy by gpushare".to_string())
            }
            (from, to) => ("move", format!("{}: the source framework's own move", crate::route::label(&from.name(), &to.name()))),
        };
        return AutoChoice { path, kind: Move, why: Some(why) };
    }
    let share = |path: &'static str| AutoChoice { path, kind: Share, why: None };
    if matches!(facts.source, Place::Device(_)) && !e.target_addresses_device {
        let target = facts.target_name;
        return AutoChoice {
            path: "host",
            kind: Share,
            why: Some(format!(
                "{target} cannot address device memory: auto took the host route, the one correct handoff, and copied"
            )),
        };
    }
    share(import_path(e))
}

/// How the target takes an array by reference: a capsule into a target that imports capsules only
/// (TensorFlow, Numba's arrays included: gpushare makes the capsule), `__cuda_array_interface__`
/// where one side has no DLPack object import or export (Numba), DLPack otherwise. The last step of
/// `auto`, and how every target takes a gpushare SharedBuffer (which exports DLPack).
pub fn import_path(e: &Endpoints) -> &'static str {
    if !e.target_accepts_objects && e.target_accepts_capsules {
        "capsule"
    } else if !e.source_exports_dlpack || !e.target_accepts_objects {
        "cai"
    } else {
        "dlpack"
    }
}

#[cfg(test)]
#[path = "auto_tests.rs"]
pub(crate) mod tests;
