//! What an adapter declares about its arrays, and the one generic implementation of each
//! declaration: how they are described (`Adapter.describe_by`: the DLPack C exchange API, a
//! versioned capsule, an attribute recipe, a strided recipe, the capsule of the framework's own
//! exporter, or the adapter's own `inspect`) and which flags its `check_source` looks at
//! (`Adapter.source_flags`).
//!
//! Describing runs on every share, twice (source and target), so these routes are why a share
//! costs microseconds: each is a call into the framework's C or a few attribute reads, where
//! `inspect()` costs a microsecond or two of Python. No framework is named here: an adapter
//! (python/gpushare/adapters/<name>.py) says which route fits its arrays, and adding a framework
//! never touches this file.

use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyInt, PyString, PyTuple};

use super::describe::{
    Fields, attach_cuda, exchange_api_versioned_layout, layout_from_capsule, report_from_fields, report_in_dlpack_words,
    versioned_capsule_layout,
};
use super::errors::to_pyerr;
use super::tensor_info::TensorInfo;
use crate::report::TensorReport;
use gpushare_core::Error;

/// The route an adapter declares (`describe_by`).
enum Route {
    /// `type(x).__dlpack_c_exchange_api__` (DLPack 1.3): one C call, no capsule.
    ExchangeApi,
    /// `x.__dlpack__(max_version=(1, 0))`, read in Rust.
    Capsule,
    /// An `Attributes` recipe (python/gpushare/adapters/description.py).
    Attributes(Box<AttributeRecipe>),
    /// A `Strided` recipe: shape, strides in bytes, dtype and address read by name, the device
    /// the driver's.
    Strided(Box<StridedRecipe>),
    /// An `ExportedCapsule` recipe: the framework's own exporter, called from here.
    Exported(Box<ExportedCapsule>),
    /// `adapter.inspect(x)` alone.
    Inspect,
}

/// One of `source_flags`: an attribute, or a method called with no arguments (declared as `"name()"`).
struct SourceFlag {
    name: Py<PyString>,
    call: bool,
}

/// An adapter's declarations, read once per adapter.
#[pyclass(module = "gpushare", frozen)]
pub struct Declared {
    route: Route,
    framework: String,
    /// The adapter's `immutable`: its arrays are reported read-only.
    immutable: bool,
    source_flags: Vec<SourceFlag>,
}

// Adapter → its declarations, read once: the attribute recipe's caches live in them, shared by
// every plan of that adapter.
static DECLARED: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

impl Declared {
    /// The declarations of `adapter`, read on first use.
    pub fn of(adapter: &Bound<'_, PyAny>) -> PyResult<Py<Declared>> {
        let py = adapter.py();
        let known = DECLARED.get_or_init(py, || PyDict::new(py).unbind()).bind(py);
        if let Some(found) = known.get_item(adapter)? {
            return Ok(found.cast_into::<Declared>()?.unbind());
        }
        let declared = Py::new(py, Declared::read(adapter)?)?;
        known.set_item(adapter, &declared)?;
        Ok(declared)
    }

    fn read(adapter: &Bound<'_, PyAny>) -> PyResult<Declared> {
        let py = adapter.py();
        let framework: String = adapter.getattr(intern!(py, "name"))?.extract()?;
        let by = adapter.getattr(intern!(py, "describe_by"))?;
        let route = match by.extract::<String>() {
            Ok(word) => match word.as_str() {
                "exchange_api" => Route::ExchangeApi,
                "capsule" => Route::Capsule,
                "inspect" => Route::Inspect,
                other => {
                    return Err(to_pyerr(Error::Usage(format!(
                        "{framework}'s adapter declares describe_by = {other:?}: expected \"exchange_api\", \"capsule\", \
                         \"inspect\" or an Attributes or ExportedCapsule recipe (gpushare.adapters.description)"
                    ))));
                }
            },
            Err(_) if by.hasattr(intern!(py, "exporter"))? => Route::Exported(Box::new(ExportedCapsule::read(&by)?)),
            Err(_) if by.hasattr(intern!(py, "strides"))? => {
                Route::Strided(Box::new(StridedRecipe::read(&by, adapter, &framework)?))
            }
            Err(_) => Route::Attributes(Box::new(AttributeRecipe::read(&by)?)),
        };
        let source_flags = adapter
            .getattr(intern!(py, "source_flags"))?
            .extract::<Vec<String>>()?
            .into_iter()
            .map(|flag| match flag.strip_suffix("()") {
                Some(method) => SourceFlag { name: PyString::intern(py, method).unbind(), call: true },
                None => SourceFlag { name: PyString::intern(py, &flag).unbind(), call: false },
            })
            .collect();
        Ok(Declared { route, immutable: adapter.getattr(intern!(py, "immutable"))?.is_truthy()?, framework, source_flags })
    }

    /// The description of `obj` by the declared route; `None` where it does not apply (then the
    /// adapter's `inspect` describes it and says what is wrong with it, if anything).
    pub fn describe(&self, py: Python<'_>, obj: &Bound<'_, PyAny>, adapter: &Bound<'_, PyAny>) -> PyResult<Option<TensorReport>> {
        let layout = match &self.route {
            Route::Inspect => return Ok(None),
            Route::Attributes(recipe) => return recipe.describe(py, obj, adapter, &self.framework, self.immutable),
            Route::Strided(recipe) => return recipe.describe(py, obj, adapter, &self.framework, self.immutable),
            // Anything that goes wrong on the way (a declined dtype, a failed export): the adapter explains.
            Route::Exported(recipe) => return Ok(recipe.describe(py, obj, adapter, &self.framework, self.immutable).ok().flatten()),
            // No exchange API on this type (an older release), or one that fails on this array
            // (PyTorch's sparse, meta and nested tensors): the adapter explains.
            Route::ExchangeApi => match obj.get_type().getattr(intern!(py, "__dlpack_c_exchange_api__")) {
                Ok(api) => exchange_api_versioned_layout(py, obj, &api).ok(),
                Err(_) => None,
            },
            // An old producer without max_version, an export that fails: the adapter explains.
            Route::Capsule => versioned_capsule_layout(py, obj).ok(),
        };
        crate::trace::mark("describe: the framework's layout", crate::trace::Kind::Framework);
        // Host and CUDA device memory only: the adapter names other kinds (managed, pinned) itself.
        Ok(layout
            .filter(|l| matches!(l.device_type, crate::dlpack::DEVICE_CPU | crate::dlpack::DEVICE_CUDA))
            .map(|l| report_in_dlpack_words(l, &self.framework, self.immutable)))
    }

    /// Whether the adapter declares the flags its `check_source` looks at.
    pub fn has_source_flags(&self) -> bool {
        !self.source_flags.is_empty()
    }

    /// Whether every declared source flag of `obj` is false (then `check_source` has nothing to
    /// say); a flag that cannot be read counts as set, so `check_source` looks.
    pub fn source_flags_clear(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> bool {
        self.source_flags.iter().all(|flag| {
            let name = flag.name.bind(py);
            let value = if flag.call { obj.call_method0(name) } else { obj.getattr(name) };
            value.and_then(|v| v.is_truthy()).is_ok_and(|set| !set)
        })
    }
}

/// A recipe's reading of an array, where an array that lacks an attribute or whose framework
/// refuses one (AttributeError, RuntimeError, ValueError) is declined: the adapter's `inspect()`
/// describes it or says what is wrong with it.
fn declined_if_refused(py: Python<'_>, read: PyResult<Option<TensorReport>>) -> PyResult<Option<TensorReport>> {
    match read {
        Err(e)
            if e.is_instance_of::<PyAttributeError>(py)
                || e.is_instance_of::<PyRuntimeError>(py)
                || e.is_instance_of::<PyValueError>(py) =>
        {
            Ok(None)
        }
        other => other,
    }
}

/// The `Attributes` recipe of an adapter whose arrays carry what DLPack would say as attributes
/// (JAX's: `__dlpack__` costs ~3 µs there and exports legacy capsules only). What needs the
/// framework's own knowledge (which devices, layouts and dtypes the recipe describes) the adapter
/// answers once per device, layout and dtype, cached here by value.
struct AttributeRecipe {
    device: Vec<Py<PyString>>,
    device_words: Py<PyString>,
    layout: Py<PyString>,
    layout_order: Py<PyString>,
    dtype: Py<PyString>,
    dtype_code_bits: Py<PyString>,
    shape: Py<PyString>,
    pointer: Py<PyString>,
    freed: Option<Py<PyString>>,
    ready: Option<Py<PyString>>,
    wait: Option<Py<PyString>>,
    devices: Py<PyDict>,
    layouts: Py<PyDict>,
    dtypes: Py<PyDict>,
}

/// A recipe's field naming an attribute or method, as an interned string; `None` where it is None.
fn optional_name(recipe: &Bound<'_, PyAny>, field: &str) -> PyResult<Option<Py<PyString>>> {
    let value: Option<String> = recipe.getattr(field)?.extract()?;
    Ok(value.map(|v| PyString::intern(recipe.py(), &v).unbind()))
}

/// A recipe's field that must name something.
fn required_name(recipe: &Bound<'_, PyAny>, kind: &str, field: &str) -> PyResult<Py<PyString>> {
    optional_name(recipe, field)?.ok_or_else(|| PyValueError::new_err(format!("{kind}.{field} is required")))
}

impl AttributeRecipe {
    fn read(recipe: &Bound<'_, PyAny>) -> PyResult<AttributeRecipe> {
        let py = recipe.py();
        let name = |field: &str| required_name(recipe, "Attributes", field);
        let optional = |field: &str| optional_name(recipe, field);
        let path: String = recipe.getattr("device")?.extract()?;
        Ok(AttributeRecipe {
            device: path.split('.').map(|part| PyString::intern(py, part).unbind()).collect(),
            device_words: name("device_words")?,
            layout: name("layout")?,
            layout_order: name("layout_order")?,
            dtype: name("dtype")?,
            dtype_code_bits: name("dtype_code_bits")?,
            shape: name("shape")?,
            pointer: name("pointer")?,
            freed: optional("freed")?,
            ready: optional("ready")?,
            wait: optional("wait")?,
            devices: PyDict::new(py).unbind(),
            layouts: PyDict::new(py).unbind(),
            dtypes: PyDict::new(py).unbind(),
        })
    }

    /// `None` for anything the adapter's answers decline (sharded arrays, tiled or sub-byte
    /// layouts, other platforms, extended dtypes), and for an array that lacks an attribute or
    /// whose framework refuses one (AttributeError, RuntimeError, ValueError): the adapter's route.
    fn describe(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        adapter: &Bound<'_, PyAny>,
        framework: &str,
        immutable: bool,
    ) -> PyResult<Option<TensorReport>> {
        declined_if_refused(py, self.read_fields(py, obj, adapter, framework, immutable))
    }

    fn read_fields(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        adapter: &Bound<'_, PyAny>,
        framework: &str,
        immutable: bool,
    ) -> PyResult<Option<TensorReport>> {
        // An array whose memory was freed goes to the adapter, which raises the way the framework's
        // own calls do (reading a deleted JAX array's layout crashes the process).
        if let Some(freed) = &self.freed {
            match obj.call_method0(freed.bind(py)) {
                Ok(gone) if gone.is_truthy()? => return Ok(None),
                Ok(_) => {}
                // A stand-in with the same attributes, without the method: nothing was freed.
                Err(e) if e.is_instance_of::<PyAttributeError>(py) => {}
                Err(e) => return Err(e),
            }
        }
        let mut device = obj.clone();
        for part in &self.device {
            device = device.getattr(part.bind(py))?;
        }
        let words = cached(&self.devices, &device, adapter, &self.device_words, &device)?;
        if words.is_none() {
            return Ok(None);
        }
        let words = words.cast::<PyTuple>()?;
        let (device_code, device_id): (u32, i32) = (words.get_item(1)?.extract()?, words.get_item(2)?.extract()?);
        // The layout attribute is hashable and compares by value; an array without one (or with
        // None, which would stand for every layout) asks the adapter every time.
        let order = match obj.getattr(self.layout.bind(py)) {
            Ok(layout) if !layout.is_none() => cached(&self.layouts, &layout, adapter, &self.layout_order, obj)?,
            Ok(_) => adapter.call_method1(self.layout_order.bind(py), (obj,))?,
            Err(e) if e.is_instance_of::<PyAttributeError>(py) => adapter.call_method1(self.layout_order.bind(py), (obj,))?,
            Err(e) => return Err(e),
        };
        if order.is_none() {
            return Ok(None);
        }
        let dtype = obj.getattr(self.dtype.bind(py))?;
        let code_bits = cached(&self.dtypes, &dtype, adapter, &self.dtype_code_bits, &dtype)?;
        let code_bits = code_bits.cast::<PyTuple>()?;
        if code_bits.is_empty() {
            return Ok(None);
        }
        let (code, bits): (u8, u8) = (code_bits.get_item(0)?.extract()?, code_bits.get_item(1)?.extract()?);
        let shape: Vec<i64> = obj.getattr(self.shape.bind(py))?.extract()?;
        let Some(strides) = strides_of(&shape, &order.extract::<Vec<usize>>()?) else { return Ok(None) };
        self.settle(py, obj)?;
        let ptr: u64 = obj.call_method0(self.pointer.bind(py))?.extract()?;
        let device_words = words.get_item(0)?;
        let device_words = device_words.cast::<PyString>()?.to_cow()?;
        crate::trace::mark("describe: the framework's attributes", crate::trace::Kind::Framework);
        report_from_fields(Fields {
            framework,
            device: &device_words,
            ptr,
            shape,
            strides,
            code,
            bits,
            device_type: device_code,
            device_id,
            readonly: false,
            immutable,
        })
        .map(Some)
    }

    /// Waits, with the GIL released, for an array still being computed, before reading its buffer
    /// address. JAX's `unsafe_buffer_pointer()` (and `__dlpack__`) wait for the buffer holding the
    /// GIL, while the computation's end can need the GIL: it releases the PyTorch tensor it read,
    /// whose DLPack deleter takes the GIL. That deadlocked `%share i ->jax` on an int64 tensor on
    /// CPU, about one run in three. An array that is ready costs one call of `ready`.
    fn settle(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let (Some(ready), Some(wait)) = (&self.ready, &self.wait) else { return Ok(()) };
        match obj.call_method0(ready.bind(py)) {
            Ok(done) if !done.is_truthy()? => obj.call_method0(wait.bind(py)).map(drop),
            Ok(_) => Ok(()),
            // A stand-in with the same attributes, without the method: nothing to wait for.
            Err(e) if e.is_instance_of::<PyAttributeError>(py) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The `Strided` recipe of an adapter whose CUDA arrays carry their layout as attributes (shape,
/// strides in bytes, dtype, the data's address) and name no device (Numba's device arrays): the
/// device is the one whose memory the address lies in, as the CUDA driver says. Its `inspect()`
/// reads the same attributes in Python, which cost every share into Numba 7 µs of gpushare's own
/// time on an H200 host (benchmarks/bench_core.py); its `__cuda_array_interface__` builds a dict.
struct StridedRecipe {
    shape: Py<PyString>,
    strides: Py<PyString>,
    dtype: Py<PyString>,
    dtype_code_bits: Py<PyString>,
    /// The attribute path to the address: an int or a ctypes integer (None or 0: no memory).
    pointer: Vec<Py<PyString>>,
    dtypes: Py<PyDict>,
}

impl StridedRecipe {
    fn read(recipe: &Bound<'_, PyAny>, adapter: &Bound<'_, PyAny>, framework: &str) -> PyResult<StridedRecipe> {
        let py = recipe.py();
        let name = |field: &str| required_name(recipe, "Strided", field);
        let path: String = recipe.getattr("pointer")?.extract()?;
        // Its answers are asked inside the description, where an AttributeError means an array
        // without the attribute: a method the adapter lacks would decline every array in silence.
        let method = name("dtype_code_bits")?;
        if !adapter.hasattr(method.bind(py))? {
            return Err(to_pyerr(Error::Usage(format!(
                "{framework}'s adapter declares Strided(dtype_code_bits={:?}) but has no such method",
                method.bind(py).to_cow()?
            ))));
        }
        Ok(StridedRecipe {
            shape: name("shape")?,
            strides: name("strides")?,
            dtype: name("dtype")?,
            dtype_code_bits: method,
            pointer: path.split('.').map(|part| PyString::intern(py, part).unbind()).collect(),
            dtypes: PyDict::new(py).unbind(),
        })
    }

    /// `None` for what the adapter's `inspect()` must explain or describe otherwise: a dtype its
    /// answer declines, strides that are not whole elements, no memory (a zero-size array's null
    /// address), memory the driver does not place on a CUDA device (or no driver), and an array
    /// that lacks an attribute or whose framework refuses one.
    fn describe(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        adapter: &Bound<'_, PyAny>,
        framework: &str,
        immutable: bool,
    ) -> PyResult<Option<TensorReport>> {
        declined_if_refused(py, self.read_fields(py, obj, adapter, framework, immutable))
    }

    fn read_fields(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        adapter: &Bound<'_, PyAny>,
        framework: &str,
        immutable: bool,
    ) -> PyResult<Option<TensorReport>> {
        let shape: Vec<i64> = obj.getattr(self.shape.bind(py))?.extract()?;
        let byte_strides: Vec<i64> = obj.getattr(self.strides.bind(py))?.extract()?;
        let dtype = obj.getattr(self.dtype.bind(py))?;
        let code_bits = cached(&self.dtypes, &dtype, adapter, &self.dtype_code_bits, &dtype)?;
        let code_bits = code_bits.cast::<PyTuple>()?;
        let mut pointer = obj.clone();
        for part in &self.pointer {
            pointer = pointer.getattr(part.bind(py))?;
        }
        // A ctypes integer (Numba's `device_ctypes_pointer`) is read by its value, None for NULL;
        // asked by type, not by a failed extraction, whose exception would cost every share.
        let ptr: Option<u64> = if pointer.is_none() || pointer.is_instance_of::<PyInt>() {
            pointer.extract()?
        } else {
            pointer.getattr(intern!(py, "value"))?.extract()?
        };
        crate::trace::mark("describe: the framework's attributes", crate::trace::Kind::Framework);
        if code_bits.is_empty() {
            return Ok(None);
        }
        let (code, bits): (u8, u8) = (code_bits.get_item(0)?.extract()?, code_bits.get_item(1)?.extract()?);
        let itemsize = i64::from(bits / 8);
        let (Some(ptr), true) = (ptr.filter(|p| *p != 0), bits % 8 == 0 && itemsize > 0) else { return Ok(None) };
        if byte_strides.len() != shape.len() || byte_strides.iter().any(|step| step % itemsize != 0) {
            return Ok(None);
        }
        let Some(ordinal) = crate::cuda::device_of(ptr) else { return Ok(None) };
        crate::trace::mark("describe: the driver's attributes", crate::trace::Kind::Driver);
        report_from_fields(Fields {
            framework,
            device: &format!("cuda:{ordinal}"),
            ptr,
            shape,
            strides: Some(byte_strides.iter().map(|step| step / itemsize).collect()),
            code,
            bits,
            device_type: crate::dlpack::DEVICE_CUDA,
            device_id: ordinal,
            readonly: false,
            immutable,
        })
        .map(Some)
    }
}

/// The `ExportedCapsule` recipe of an adapter whose arrays export DLPack capsules only through a
/// function of their framework (TensorFlow's `to_dlpack`): what its `inspect()` does, the calls
/// into its Python (the method, the exporter's lookup, `TensorInfo.from_capsule`'s arguments, the
/// object it returns) left out. They cost every share into or out of TensorFlow about as much as
/// the raw handoff itself.
struct ExportedCapsule {
    /// The adapter's method that returns the exporter, and the exporter, asked on first use.
    exporter: Py<PyString>,
    export: PyOnceLock<Py<PyAny>>,
    device: Py<PyString>,
    /// The array's method whose answers in the adapter's `declines` send it to `inspect()`.
    guard: Option<(Py<PyString>, Py<PyString>)>,
    declines: PyOnceLock<Py<PyAny>>,
}

impl ExportedCapsule {
    fn read(recipe: &Bound<'_, PyAny>) -> PyResult<ExportedCapsule> {
        let name = |field: &str| optional_name(recipe, field);
        let required = |field: &str| required_name(recipe, "ExportedCapsule", field);
        Ok(ExportedCapsule {
            exporter: required("exporter")?,
            export: PyOnceLock::new(),
            device: required("device")?,
            guard: name("guard")?.zip(name("declines")?),
            declines: PyOnceLock::new(),
        })
    }

    /// `None` where the guard declines the array.
    fn describe(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        adapter: &Bound<'_, PyAny>,
        framework: &str,
        immutable: bool,
    ) -> PyResult<Option<TensorReport>> {
        if let Some((guard, declines)) = &self.guard {
            let declines = self.declines.get_or_try_init(py, || adapter.getattr(declines.bind(py)).map(Bound::unbind))?;
            if declines.bind(py).contains(obj.call_method0(guard.bind(py))?)? {
                return Ok(None);
            }
        }
        let export = self.export.get_or_try_init(py, || adapter.call_method0(self.exporter.bind(py)).map(Bound::unbind))?;
        let capsule = export.bind(py).call1((obj,))?;
        let layout = layout_from_capsule(&capsule)?;
        let device = obj.getattr(self.device.bind(py))?;
        crate::trace::mark("describe: the framework's exporter", crate::trace::Kind::Framework);
        let mut report = TensorReport::from_owned_layout(layout, framework, &device.cast::<PyString>()?.to_cow()?, immutable);
        attach_cuda(&mut report);
        Ok(Some(report))
    }
}

/// Strides in elements from a major-to-minor order: `None` (row-major, which the core computes
/// itself) for `()`, `Some(None)` for an order that does not fit the shape (the adapter's route).
fn strides_of(shape: &[i64], major_to_minor: &[usize]) -> Option<Option<Vec<i64>>> {
    if major_to_minor.is_empty() {
        return Some(None);
    }
    if major_to_minor.len() != shape.len() || major_to_minor.iter().any(|&d| d >= shape.len()) {
        return None;
    }
    let mut strides = vec![0i64; shape.len()];
    let mut step = 1i64;
    for &dim in major_to_minor.iter().rev() {
        strides[dim] = step;
        step = step.saturating_mul(shape[dim].max(1));
    }
    Some(Some(strides))
}

/// `cache[key]`, or `adapter.method(arg)` stored there.
fn cached<'py>(
    cache: &Py<PyDict>,
    key: &Bound<'py, PyAny>,
    adapter: &Bound<'py, PyAny>,
    method: &Py<PyString>,
    arg: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = key.py();
    let dict = cache.bind(py);
    if let Some(value) = dict.get_item(key)? {
        return Ok(value);
    }
    let value = adapter.call_method1(method.bind(py), (arg,))?;
    dict.set_item(key, &value)?;
    Ok(value)
}

/// Describes ``obj`` by the route its adapter declares (``Adapter.describe_by``); None where that
/// route does not apply (``inspect()`` then describes it, and explains what it cannot).
#[pyfunction]
pub fn describe_declared(py: Python<'_>, obj: &Bound<'_, PyAny>, adapter: &Bound<'_, PyAny>) -> PyResult<Option<TensorInfo>> {
    let declared = Declared::of(adapter)?;
    Ok(declared.get().describe(py, obj, adapter)?.map(|report| TensorInfo { report }))
}

#[cfg(test)]
mod tests {
    use super::strides_of;

    #[test]
    fn strides_follow_the_major_to_minor_order() {
        assert_eq!(strides_of(&[2, 3], &[]), Some(None));
        assert_eq!(strides_of(&[2, 3], &[1, 0]), Some(Some(vec![1, 2])));
        assert_eq!(strides_of(&[2, 3, 4], &[2, 0, 1]), Some(Some(vec![3, 1, 6])));
        assert_eq!(strides_of(&[2, 3], &[0]), None);
        assert_eq!(strides_of(&[2, 3], &[0, 2]), None);
    }
}
