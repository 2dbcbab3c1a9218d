//! The prediction rules of a move (`share(x, to, device=…)`): what the target will hold once the
//! array is on the destination. A move to another device copies by design; whether the target can
//! take what arrives there is the share rules' question, asked of the array as the move makes it.

use super::{PredictedOutcome, TargetFacts, predict};
use crate::auto::import_path;
use crate::paths::{self, Endpoints, PathKind, Place};
use crate::report::TensorReport;

/// The array a move makes on `destination`: a fresh, compact allocation of the same dtype and
/// shape, held by `framework` (the source's own move) or by gpushare (its copies).
fn arrived(source: &TensorReport, framework: &str, destination: Place) -> TensorReport {
    let dlpack_device = match destination {
        Place::Host => (1, 0),
        Place::Device(n) => (2, n),
    };
    let name = destination.name();
    // A new allocation: 256-byte aligned, like every framework's device allocator and gpushare's.
    let data_ptr = 0x1_0000_0000;
    TensorReport {
        framework: framework.to_string(),
        device: name.clone(),
        dlpack_device,
        dlpack_device_name: name,
        strides: crate::dlpack::compact_strides(&source.shape),
        byte_offset: 0,
        data_ptr,
        span: (data_ptr, data_ptr + source.nbytes),
        contiguous: true,
        alignment: 256,
        readonly: source.readonly && framework == source.framework,
        cuda: None,
        ..source.clone()
    }
}

/// What a move of `source` to `destination` by `target.path` (a move path) will do.
///
/// Nothing moves when the array is already there: the usual handoff's rules, for `auto`. Otherwise
/// the move copies: `move` by the source framework's own move, after which the usual handoff gives
/// the moved array to the target; `dlpack` by the target's `from_dlpack(…, device, copy=True)`;
/// `p2p` and `pinned` into a gpushare buffer on the destination, which the target then takes as
/// `auto`'s last step says. What the target cannot take there fails as the share rules say.
pub fn predict_move(source: &TensorReport, target: &TargetFacts, destination: Place) -> PredictedOutcome {
    let share = |report: &TensorReport, path: &str| {
        predict(report, &TargetFacts { path: path.to_string(), destination: None, ..target.clone() })
    };
    let path = target.path.as_str();
    if Place::of_dlpack(source.dlpack_device) == destination && path == "move" {
        return share(source, "auto");
    }
    if matches!(path, "p2p" | "pinned") && destination == Place::Host {
        // Both copy into a gpushare buffer on a GPU: the host is no destination of theirs.
        return PredictedOutcome::Failed {
            reason: format!("{path} moves device memory to another GPU; for device='cpu' use path='dlpack' or 'move'"),
            expected_error: None,
            fix: "use path='dlpack' or 'move'".into(),
        };
    }
    if path == "dlpack" && target.settings.target.dlpack_takes_device == Some(false) {
        return PredictedOutcome::Failed {
            reason: format!("{}'s from_dlpack takes no device here", target.framework),
            expected_error: None,
            fix: "use path='move' (the source framework's own move), or move it first and share it".into(),
        };
    }
    if path == "dlpack"
        && let Some(gap) = device_argument_gap(&target.framework, Place::of_dlpack(source.dlpack_device), destination)
    {
        return gap;
    }
    if path == "dlpack"
        && let Some(gap) = copying_export_gap(&source.framework, &target.framework)
    {
        return gap;
    }
    // JAX's from_dlpack(x, device=…, copy=True) imports the source's own layout and copies after
    // it (it does not ask the producer for the copy): a layout its import refuses (negative
    // strides, "Only DLPack tensors with trivial (compact) striding") fails the move too.
    if path == "dlpack"
        && target.framework == "jax"
        && let failed @ PredictedOutcome::Failed { .. } = share(source, "dlpack")
    {
        return failed;
    }
    // JAX's from_dlpack(x, device=cpu, copy=True) of host memory its CPU client can view (64-byte
    // aligned, a dtype it keeps) ignores copy=True and views the source (jax 0.10.2: torch's
    // allocations, NumPy's aligned ones); unaligned memory it copies, as asked.
    if path == "dlpack"
        && target.framework == "jax"
        && destination == Place::Host
        && Place::of_dlpack(source.dlpack_device) == Place::Host
        && let PredictedOutcome::Shared { note } = share(source, "dlpack")
    {
        let ignored = "JAX's from_dlpack ignores copy=True for 64-byte aligned host memory and views the source";
        return PredictedOutcome::Shared { note: Some(note.map_or_else(|| ignored.to_string(), |n| format!("{ignored}; {n}"))) };
    }
    let words = paths::copied_by_design(PathKind::Move, path);
    let (handoff, by_design) = match path {
        "move" => (share(&arrived(source, &source.framework, destination), "auto"), None),
        "dlpack" => (share(&arrived(source, &source.framework, destination), "dlpack"), words),
        "p2p" | "pinned" => {
            let import = import_path(&Endpoints { source_exports_dlpack: true, ..target.endpoints });
            (share(&arrived(source, "gpushare", destination), import), words)
        }
        // Not a move path: the route refuses it before anything runs.
        _ => return share(source, path),
    };
    match handoff {
        PredictedOutcome::Failed { .. } => handoff,
        // A zero-size array has no memory: nothing to share wherever it lies (the judgement's words).
        _ if source.numel() == 0 => PredictedOutcome::Copied { reason: super::judgement::NOTHING_TO_SHARE.into() },
        PredictedOutcome::Copied { reason } if by_design.is_none() => PredictedOutcome::Copied {
            reason: format!("{} → {}, and then {reason}", source.dlpack_device_name, destination.name()),
        },
        _ => PredictedOutcome::Copied {
            reason: by_design.map_or_else(
                || format!("device changed: {} → {} (the source framework's own move copies)", source.dlpack_device_name, destination.name()),
                str::to_string,
            ),
        },
    }
}

/// What a move's prediction reads of an array that is not yet where the move takes it: the move
/// makes a fresh compact allocation ([`arrived`]), so its address, strides, alignment and driver
/// attributes do not enter the prediction; these fields alone do.
#[derive(Debug)]
struct MoveKey {
    framework: String,
    dtype: String,
    shape: Vec<i64>,
    nbytes: u64,
    readonly: bool,
    dlpack_version: Option<(u32, u32)>,
    dlpack_device: (u32, i32),
    dlpack_device_name: String,
}

impl MoveKey {
    /// Whether `target`'s facts make a move of `source` to elsewhere, the prediction then reading
    /// only a [`MoveKey`]'s fields (not a handoff, a move to where it lies, or a path that is no move).
    fn applies(source: &TensorReport, target: &TargetFacts) -> bool {
        target.destination.is_some_and(|destination| {
            matches!(target.path.as_str(), "p2p" | "pinned" | "move" | "dlpack")
                && Place::of_dlpack(source.dlpack_device) != destination
        })
    }

    fn of(source: &TensorReport) -> MoveKey {
        MoveKey {
            framework: source.framework.clone(),
            dtype: source.dtype.clone(),
            shape: source.shape.clone(),
            nbytes: source.nbytes,
            readonly: source.readonly,
            dlpack_version: source.dlpack_version,
            dlpack_device: source.dlpack_device,
            dlpack_device_name: source.dlpack_device_name.clone(),
        }
    }

    /// Whether `source` has this key, compared in place (a hit allocates nothing).
    fn is_of(&self, source: &TensorReport) -> bool {
        self.framework == source.framework
            && self.dtype == source.dtype
            && self.shape == source.shape
            && self.nbytes == source.nbytes
            && self.readonly == source.readonly
            && self.dlpack_version == source.dlpack_version
            && self.dlpack_device == source.dlpack_device
            && self.dlpack_device_name == source.dlpack_device_name
    }
}

/// The last move predicted by one predictor, with the facts it was predicted under: a process that
/// moves arrays of one kind again and again (a training loop's `share(x, "torch", device="cuda:1")`)
/// predicts each move once. The rules would rebuild the arrived array and the facts of its handoff
/// each time, microseconds before the copy starts, which `share(device=…)` pays on top of the copy.
#[derive(Debug, Default)]
pub struct MoveMemo(std::sync::Mutex<Option<(MoveKey, TargetFacts, PredictedOutcome)>>);

impl MoveMemo {
    /// [`predict`] of `source` by `target`: what the memo holds when the move and the facts (their
    /// live settings included) are those it was made for.
    pub fn predict(&self, source: &TensorReport, target: &TargetFacts) -> PredictedOutcome {
        if !MoveKey::applies(source, target) {
            return predict(source, target);
        }
        if let Ok(memo) = self.0.lock()
            && let Some((known, facts, outcome)) = memo.as_ref()
            && known.is_of(source)
            && facts == target
        {
            return outcome.clone();
        }
        let outcome = predict(source, target);
        if let Ok(mut memo) = self.0.lock() {
            *memo = Some((MoveKey::of(source), target.clone(), outcome.clone()));
        }
        outcome
    }
}

/// Producers whose `__dlpack__` refuses what a `from_dlpack(x, device=…, copy=True)` asks of it
/// (`dl_device`, `copy=True`): TensorFlow's raises "does not support DLPack export with a non-None
/// dl_device"; cuda.core's StridedMemoryView says "Sorry, not supported", and gpushare refuses it
/// first (its adapter's check_copying_export). JAX asks TensorFlow for a plain export (no stream,
/// no device: jax 0.10.2), so TensorFlow's refusal does not reach it.
fn copying_export_gap(source: &str, target: &str) -> Option<PredictedOutcome> {
    let fix = "use path='move' (the source framework's own move) or path='copy'";
    match source {
        "tf" if target != "jax" => Some(PredictedOutcome::Failed {
            reason: "TensorFlow's __dlpack__ refuses dl_device and copy=True, which from_dlpack(x, device=…, copy=True) passes".into(),
            expected_error: Some("does not support DLPack export".into()),
            fix: fix.into(),
        }),
        "cuda_core" => Some(PredictedOutcome::Failed {
            reason: "StridedMemoryView.__dlpack__ refuses copy=True and dl_device (\"Sorry, not supported\")".into(),
            expected_error: None,
            fix: fix.into(),
        }),
        _ => None,
    }
}

/// Consumers whose `from_dlpack(x, device=…, copy=True)` cannot make the copy a move asks for,
/// seen on two H200s: CuPy 14.2 takes no `device` at all; JAX 0.11.2's PJRT refuses a
/// copy from one GPU to another. Both were predicted "copied" and failed.
fn device_argument_gap(target: &str, from: Place, to: Place) -> Option<PredictedOutcome> {
    let fix = "use path='p2p' or 'move' (gpushare's peer copy, or the source framework's own move)";
    match (target, from, to) {
        ("cupy", _, _) => Some(PredictedOutcome::Failed {
            reason: "CuPy's from_dlpack takes no device argument, so it cannot copy the array to another device".into(),
            expected_error: Some("does not support device".into()),
            fix: fix.into(),
        }),
        ("jax", Place::Device(a), Place::Device(b)) if a != b => Some(PredictedOutcome::Failed {
            reason: format!("JAX's from_dlpack cannot copy from cuda:{a} to cuda:{b}: its PJRT client refuses that host-buffer semantics"),
            expected_error: Some("HostBufferSemantics".into()),
            fix: fix.into(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Verdict;

    #[test]
    fn a_dlpack_move_into_a_target_whose_import_takes_no_device_is_predicted_to_fail() {
        let mut target = TargetFacts::new("mlx", "", "dlpack");
        target.settings.target.dlpack_takes_device = Some(false);
        let p = predict_move(&torch_cpu(vec![4], vec![1]), &target, Place::Host);
        assert_eq!(p.verdict(), Verdict::Failed, "{p:?}");
        assert!(p.reason().unwrap().contains("takes no device"));
        target.settings.target.dlpack_takes_device = None;
        assert_ne!(predict_move(&torch_cpu(vec![4], vec![1]), &target, Place::Host).verdict(), Verdict::Failed);
    }

    #[test]
    fn gpushare_s_own_moves_to_the_host_are_predicted_not_to_run() {
        for path in ["p2p", "pinned"] {
            let p = predict_move(&torch_cpu(vec![4], vec![1]), &TargetFacts::new("numpy", "", path), Place::Host);
            assert_eq!(p.verdict(), Verdict::Failed, "{path}: {p:?}");
            assert!(p.reason().unwrap().starts_with(&format!("{path} moves device memory to another GPU")));
        }
    }

    fn torch_cpu(shape: Vec<i64>, strides: Vec<i64>) -> TensorReport {
        TensorReport {
            framework: "torch".into(),
            dtype: "float32".into(),
            shape,
            strides,
            device: "cpu".into(),
            dlpack_device: (1, 0),
            dlpack_device_name: "cpu".into(),
            data_ptr: 0x10000,
            byte_offset: 0,
            nbytes: 96,
            span: (0x10000, 0x10060),
            contiguous: true,
            alignment: 64,
            readonly: false,
            dlpack_version: Some((1, 1)),
            cuda: None,
        }
    }

    fn to(framework: &str, path: &str) -> TargetFacts {
        TargetFacts::new(framework, "", path)
    }

    #[test]
    fn a_move_to_where_the_array_lies_is_the_usual_handoff() {
        let x = torch_cpu(vec![4, 6], vec![6, 1]);
        let p = predict_move(&x, &to("numpy", "move"), Place::Host);
        assert_eq!(p.verdict(), Verdict::Shared);
    }

    #[test]
    fn a_move_across_devices_copies_and_the_target_must_take_what_arrives() {
        let mut gpu = torch_cpu(vec![4, 6], vec![6, 1]);
        gpu.dlpack_device = (2, 0);
        gpu.dlpack_device_name = "cuda:0".into();
        let p = predict_move(&gpu, &to("numpy", "move"), Place::Host);
        assert_eq!(p.verdict(), Verdict::Copied);
        assert!(p.reason().unwrap().contains("cuda:0 → cpu"), "{p:?}");
        // NumPy cannot hold an array on a GPU, however it gets there.
        let x = torch_cpu(vec![4, 6], vec![6, 1]);
        assert_eq!(predict_move(&x, &to("numpy", "dlpack"), Place::Device(0)).verdict(), Verdict::Failed);
        // p2p and pinned stage into a gpushare buffer: copied by design, in the table's words.
        let p = predict_move(&gpu, &to("torch", "p2p"), Place::Device(1));
        assert_eq!(p.reason(), paths::copied_by_design(PathKind::Move, "p2p"));
    }

    #[test]
    fn dlpack_moves_that_cupy_and_jax_cannot_make_are_predicted_to_fail() {
        let mut gpu = torch_cpu(vec![4, 6], vec![6, 1]);
        gpu.dlpack_device = (2, 0);
        gpu.dlpack_device_name = "cuda:0".into();
        for target in ["cupy", "jax"] {
            let p = predict_move(&gpu, &to(target, "dlpack"), Place::Device(1));
            assert_eq!(p.verdict(), Verdict::Failed, "{target}: {p:?}");
            assert!(p.fix().unwrap().contains("p2p"), "{p:?}");
        }
        // PyTorch makes that copy; JAX's own move paths are untouched.
        assert_eq!(predict_move(&gpu, &to("torch", "dlpack"), Place::Device(1)).verdict(), Verdict::Copied);
        assert_eq!(predict_move(&gpu, &to("jax", "p2p"), Place::Device(1)).verdict(), Verdict::Copied);
    }

    #[test]
    fn the_move_memo_answers_as_the_rules_do_and_forgets_what_changed() {
        let mut gpu = torch_cpu(vec![4, 6], vec![6, 1]);
        gpu.dlpack_device = (2, 0);
        gpu.dlpack_device_name = "cuda:0".into();
        let memo = MoveMemo::default();
        let mut p2p = to("numpy", "p2p");
        p2p.destination = Some(Place::Device(1));
        let mut torch_p2p = to("torch", "p2p");
        torch_p2p.destination = Some(Place::Device(1));
        let mut elsewhere = gpu.clone();
        elsewhere.data_ptr = 0x20004; // another array of the same kind: the move reads no address
        let mut wider = gpu.clone();
        wider.shape = vec![4, 7];
        wider.nbytes = 112;
        let mut on_host = gpu.clone();
        on_host.dlpack_device = (1, 0);
        on_host.dlpack_device_name = "cpu".into();
        let mut to_host = to("torch", "move");
        to_host.destination = Some(Place::Host);
        let mut current = torch_p2p.clone();
        current.settings.source.current_device = Some(1);
        // Each answer, asked twice in a row and in turns, is what the rules say without a memo.
        for (source, facts) in [
            (&gpu, &torch_p2p),
            (&gpu, &torch_p2p),
            (&elsewhere, &torch_p2p),
            (&gpu, &p2p),
            (&wider, &torch_p2p),
            (&gpu, &current),
            (&on_host, &to_host),
            (&on_host, &to_host),
            (&gpu, &to_host),
            (&gpu, &torch_p2p),
        ] {
            assert_eq!(memo.predict(source, facts), predict(source, facts), "{source:?} {facts:?}");
        }
        // NumPy cannot hold a GPU array: the memo does not carry torch's answer over to it.
        assert_eq!(memo.predict(&gpu, &p2p).verdict(), Verdict::Failed);
        assert_eq!(memo.predict(&gpu, &torch_p2p).verdict(), Verdict::Copied);
    }

    #[test]
    fn dlpack_copy_true_copies_by_design_even_where_the_array_lies() {
        let x = torch_cpu(vec![4, 6], vec![6, 1]);
        let p = predict_move(&x, &to("numpy", "dlpack"), Place::Host);
        assert_eq!(p.verdict(), Verdict::Copied);
        assert!(p.reason().unwrap().starts_with("copied by design"), "{p:?}");
    }

    #[test]
    fn jax_ignores_copy_true_for_aligned_host_memory() {
        let x = torch_cpu(vec![4, 6], vec![6, 1]);
        let p = predict_move(&x, &to("jax", "dlpack"), Place::Host);
        assert_eq!(p.verdict(), Verdict::Shared, "{p:?}");
        assert!(p.reason().unwrap().contains("ignores copy=True"), "{p:?}");
        // Unaligned host memory it copies, as asked; a 64-bit dtype it narrows into a copy.
        let mut unaligned = x.clone();
        unaligned.data_ptr += 16;
        unaligned.span = (unaligned.data_ptr, unaligned.data_ptr + 96);
        assert_eq!(predict_move(&unaligned, &to("jax", "dlpack"), Place::Host).verdict(), Verdict::Copied);
        let mut wide = x.clone();
        wide.dtype = "float64".into();
        assert_eq!(predict_move(&wide, &to("jax", "dlpack"), Place::Host).verdict(), Verdict::Copied);
    }

    #[test]
    fn producers_that_refuse_a_copying_export_fail_a_dlpack_move() {
        for source in ["tf", "cuda_core"] {
            let mut x = torch_cpu(vec![4, 6], vec![6, 1]);
            x.framework = source.into();
            for target in ["torch", "numpy"] {
                let p = predict_move(&x, &to(target, "dlpack"), Place::Host);
                assert_eq!(p.verdict(), Verdict::Failed, "{source} → {target}: {p:?}");
            }
        }
        // JAX asks TensorFlow for a plain export, and views aligned host memory despite copy=True.
        let mut tf = torch_cpu(vec![4, 6], vec![6, 1]);
        tf.framework = "tf".into();
        assert_eq!(predict_move(&tf, &to("jax", "dlpack"), Place::Host).verdict(), Verdict::Shared);
    }
}
