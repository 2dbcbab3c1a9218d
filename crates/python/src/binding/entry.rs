//! `gpushare.share`, entered in native code: the common share (`share(x, "jax")`, `share(x,
//! "torch", device="cuda:1")`, once a share of its kind has run) goes from the caller straight to
//! its plan in the core, with no Python frame of gpushare's around it. A Python function around it
//! costs every share a frame, its keyword defaults and two lookups, about a microsecond on a GPU
//! machine's host, where gpushare's own stages have 5 µs in all (benchmarks/bench_core.py). Every
//! other call (another path, timing asked for, a worker, the first share of its kind, a bad
//! argument) goes to `gpushare.api.plan_and_share`, with its arguments as they were given, which
//! checks them and makes the plan.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};
use std::sync::Mutex;

use super::paths::PyPlanner;
use super::tensor_info::TensorInfo;
use super::types::ShareResult;

/// The planner of the model `auto` consults now: `gpushare.model_cache.planner()` makes it and
/// puts it here, `forget()` takes it away (a new calibration, another cache).
static PLANNER: Mutex<Option<Py<PyPlanner>>> = Mutex::new(None);

/// The planner in use, if one was made since the model was last forgotten.
#[pyfunction]
pub fn planner_in_use(py: Python<'_>) -> Option<Py<PyPlanner>> {
    slot().as_ref().map(|p| p.clone_ref(py))
}

/// The planner's slot. Nothing panics while it is held, so a poisoned lock holds a whole value.
fn slot() -> std::sync::MutexGuard<'static, Option<Py<PyPlanner>>> {
    PLANNER.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes ``planner`` the one every share plans with (None: none until the next is made).
#[pyfunction]
#[pyo3(signature = (planner))]
pub fn use_planner(planner: Option<Py<PyPlanner>>) {
    // The planner it replaces goes after the lock is let go: its plans hold Python objects whose
    // finalizers may share, and so ask for the planner in use.
    let replaced = std::mem::replace(&mut *slot(), planner);
    drop(replaced);
}

/// Converts ``obj`` to framework ``to`` and reports what happened.
///
/// Parameters
/// ----------
/// obj : an array of PyTorch, TensorFlow, JAX, NumPy, CuPy, Numba, PaddlePaddle, MLX, Warp,
///     cuda.core or PyCUDA.
/// to : the target framework: ``"torch"``, ``"tf"``, ``"jax"``, ``"numpy"``, ``"cupy"``, ``"numba"``, ….
/// path : the transfer path (``"auto"``, ``"dlpack"``, ``"capsule"``, ``"cai"``, …).
/// repeat, number : timing: ``repeat`` samples of ``number`` conversions each (``%timeit``'s -r/-n;
///     None counts as 1 without a ``budget``). By default one conversion, timed once and reported as
///     "1 sample" (its host time, as the raw call's would be); anything more is synchronised at the
///     sample edges.
/// source : the framework ``obj`` must belong to (checked); inferred when None.
/// name : the variable's name, shown in the report.
/// origin : in a chain, the first source's ``TensorInfo``: the report says whether this hop still
///     shares its memory.
/// warmup : untimed conversions before the samples.
/// budget : seconds: time the way ``%timeit`` does within this budget (a warm-up, auto-ranged
///     samples), as the magics do; ``repeat``/``number`` then fix those counts if given.
/// observe : on a GPU, also record the memory ledger (``.memory``) and the DLPack stream report
///     (``.streams``) of one extra, untimed handoff. The magics turn it on.
/// device : ``"cuda:1"``, ``"cpu"`` (or ``"cpu:0"``): move the array there on the way (paths ``p2p``,
///     ``pinned``, ``dlpack`` with ``dl_device``/``copy=True``, ``move``: the framework's own;
///     ``auto``: ``p2p`` between two GPUs that reach each other, else ``move``, which moves nothing
///     where the array already is). A CUDA device on a machine without one raises CudaError. None:
///     stay where the source is (``auto`` then copies through the host into a framework that cannot
///     address the source's device memory, and says so).
/// across : a :class:`gpushare.Worker` (or ``"process"``: one is started for this call): hand
///     ``obj`` to that process instead, by a process path (``ipc``, ``torch_mp``, ``shm``, ``nccl``,
///     ``nccl_socket``, ``gloo``; ``auto`` is ``ipc`` on a GPU, else ``shm``), and return a
///     :class:`ShareResult` whose ``worker`` names that process (see :mod:`gpushare.processes`).
///
/// Returns
/// -------
/// ShareResult with ``value`` (the converted array), ``verdict`` (``"shared"`` only when the
/// target's bytes lie inside the source's memory), ``reason`` (why it copied), ``source``/``target``
/// ``TensorInfo`` and ``timing``.
///
/// Raises
/// ------
/// UnknownFrameworkError, FrameworkNotInstalledError, NotAnArrayError, UnsafeInputError (refused
/// before calling the framework), PathNotApplicableError, ConversionError (the framework failed).
///
/// Examples
/// --------
/// >>> r = gpushare.share(torch.ones(3), "numpy")
/// >>> r.verdict, r.value
/// ('shared', array([1., 1., 1.], dtype=float32))
#[pyfunction]
#[pyo3(
    signature = (obj, to, **options),
    text_signature = "(obj, to, *, path='auto', repeat=None, number=None, source=None, name=None, origin=None, warmup=0, budget=None, observe=False, device=None, across=None)"
)]
pub fn share<'py>(
    py: Python<'py>,
    obj: Bound<'py, PyAny>,
    to: Bound<'py, PyAny>,
    options: Option<Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(common) = Common::of(options.as_ref())
        && let Some(planner) = planner_in_use(py)
        && let Some(result) =
            planner.get().share_planned(py, obj.clone(), to.clone(), common.device, common.name, common.origin, common.observe)?
    {
        let result = Bound::new(py, result)?;
        if result.get().owes_warning() {
            warn(py, &obj, &result)?;
        }
        return Ok(result.into_any());
    }
    if let Some(options) = &options {
        for key in options.keys() {
            let known = key.cast::<PyString>().is_ok_and(|k| k.to_cow().is_ok_and(|k| KEYWORDS.contains(&&*k)));
            if !known {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!("share() got an unexpected keyword argument {}", key.repr()?)));
            }
        }
    }
    static PLAN_AND_SHARE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let full = PLAN_AND_SHARE.import(py, "gpushare.api", "plan_and_share")?;
    full.call((obj, to), options.as_ref())
}

/// `share`'s keyword arguments (its text signature's).
const KEYWORDS: [&str; 11] = ["path", "repeat", "number", "source", "name", "origin", "warmup", "budget", "observe", "device", "across"];

/// The arguments of a common share: `auto`, one timed conversion, within this process.
struct Common<'py> {
    device: Option<Bound<'py, PyAny>>,
    name: Option<String>,
    origin: Option<Py<TensorInfo>>,
    observe: bool,
}

impl<'py> Common<'py> {
    /// The common share's arguments, or None where anything else was asked for (or an argument is
    /// not what it should be: `plan_and_share` then says what is wrong with it).
    fn of(options: Option<&Bound<'py, PyDict>>) -> Option<Common<'py>> {
        let mut common = Common { device: None, name: None, origin: None, observe: false };
        let Some(options) = options else { return Some(common) };
        for (key, value) in options.iter() {
            let key = key.cast_into::<PyString>().ok()?;
            match &*key.to_cow().ok()? {
                "path" => {
                    if value.cast::<PyString>().ok()?.to_cow().ok()? != "auto" {
                        return None;
                    }
                }
                "device" if !value.is_none() => common.device = Some(value),
                "name" if !value.is_none() => common.name = Some(value.cast::<PyString>().ok()?.to_cow().ok()?.into_owned()),
                "origin" if !value.is_none() => common.origin = Some(value.cast_into::<TensorInfo>().ok()?.unbind()),
                "observe" => common.observe = value.cast::<pyo3::types::PyBool>().ok()?.is_true(),
                "device" | "name" | "origin" | "source" | "repeat" | "number" | "budget" | "across" if value.is_none() => {}
                "warmup" if value.is_exact_instance_of::<pyo3::types::PyInt>() && value.extract::<i64>().ok()? == 0 => {}
                _ => return None,
            }
        }
        Some(common)
    }
}

/// The warnings a share owes its caller. The common one (a writable view of read-only memory, as
/// every share of a JAX array into torch is) is given here, pointing at the caller's line, unless
/// the caller is gpushare's own code (a chain's hop); a copy that changed the dtype, whose values
/// are compared in Python, and the warnings of gpushare's own callers are given by
/// `gpushare.api.warn_about`, which finds the user's line.
fn warn(py: Python<'_>, obj: &Bound<'_, PyAny>, result: &Bound<'_, ShareResult>) -> PyResult<()> {
    let readonly_only = !result.get().dtype_changed();
    if readonly_only
        && !called_by_gpushare(py)
        && let Some((source, target, note)) = result.get().readonly_parts()
    {
        static CATEGORY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        static WARN: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let category = CATEGORY.import(py, "gpushare.exceptions", "GpushareWarning")?;
        let message = readonly_message(py, source, target, note);
        // `warnings.warn` (the interpreter's own, in C) with stack level 1: the caller's frame, as
        // this function has none of its own. Given the same str object each time, its hash is
        // reckoned once; a message decoded afresh for each share was hashed again by each lookup
        // of the caller's warning registry (with the decoding, about 0.7 µs of a share of a JAX
        // array into torch on a GPU host).
        WARN.import(py, "warnings", "warn")?.call1((message, category, 1))?;
        return Ok(());
    }
    static WARN_ABOUT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    WARN_ABOUT.import(py, "gpushare.api", "warn_about")?.call1((obj, result))?;
    Ok(())
}

/// The read-only warning's text for a share from `source` to `target` with `note`, as a Python str
/// made once for each (a handful: the pairs whose source is read-only, each with its note).
fn readonly_message<'py>(py: Python<'py>, source: &str, target: &str, note: &str) -> Bound<'py, PyString> {
    type Messages = Vec<([String; 3], Py<PyString>)>;
    const MESSAGES_KEPT: usize = 64;
    static MESSAGES: Mutex<Messages> = Mutex::new(Vec::new());
    let messages = || MESSAGES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, message)) = messages().iter().find(|([s, t, n], _)| s == source && t == target && n == note) {
        return message.bind(py).clone();
    }
    // Made with the lock let go: nothing that runs Python code is called while it is held.
    let message = PyString::new(py, &ShareResult::readonly_text(source, target, note));
    let mut kept = messages();
    // A note is one of a few sentences; should one carry changing words, the cache stops growing.
    if kept.len() < MESSAGES_KEPT && !kept.iter().any(|([s, t, n], _)| s == source && t == target && n == note) {
        kept.push(([source.to_owned(), target.to_owned(), note.to_owned()], message.clone().unbind()));
    }
    message
}

/// Whether the code that called `share` is gpushare's own: its module's globals name a module of
/// the package (`gpushare` or `gpushare.…`).
fn called_by_gpushare(py: Python<'_>) -> bool {
    // SAFETY: the GIL is held (`py`); PyEval_GetGlobals returns a borrowed reference to the
    // globals of the frame running now (the caller's: a native function has no frame), or NULL.
    let globals = unsafe { pyo3::ffi::PyEval_GetGlobals() };
    if globals.is_null() {
        return false;
    }
    // SAFETY: a borrowed reference from the interpreter, alive for the caller's frame.
    let globals = unsafe { Bound::from_borrowed_ptr(py, globals) };
    let Ok(globals) = globals.cast_into::<PyDict>() else { return false };
    let Ok(Some(name)) = globals.get_item(pyo3::intern!(py, "__name__")) else { return false };
    let Ok(name) = name.cast_into::<PyString>() else { return false };
    let package = pyo3::intern!(py, "gpushare");
    let subpackage = pyo3::intern!(py, "gpushare.");
    // Compared in place: reading the name out (a copy under the stable ABI) costs every share that
    // warns. SAFETY: three live str objects; Tailmatch with direction -1 matches at the start.
    unsafe {
        pyo3::ffi::PyUnicode_Compare(name.as_ptr(), package.as_ptr()) == 0
            || pyo3::ffi::PyUnicode_Tailmatch(name.as_ptr(), subpackage.as_ptr(), 0, isize::MAX, -1) == 1
    }
}
