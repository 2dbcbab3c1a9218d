//! What the rules' tests stand on in place of the adapters.

use crate::paths::Endpoints;

/// The facts each framework's adapter declares about its DLPack import and export
/// (python/gpushare/adapters/), written out for the rules' own tests, which run without Python.
/// gpushare itself reads them from the adapters (`Pair.of`), never from here.
pub fn endpoints(source: &str, target: &str) -> Endpoints {
    Endpoints {
        // Numba's device arrays and PyCUDA's GPUArray have no __dlpack__.
        source_exports_dlpack: !matches!(source, "numba" | "pycuda"),
        // TensorFlow's from_dlpack takes capsules only; Numba and PyCUDA take __cuda_array_interface__ only.
        target_accepts_objects: !matches!(target, "tf" | "numba" | "pycuda"),
        // JAX removed capsule import in 0.7.2; NumPy never had it; cuda.core's StridedMemoryView
        // wants an object with __dlpack_device__.
        target_accepts_capsules: !matches!(target, "numba" | "jax" | "numpy" | "pycuda" | "cuda_core"),
        // NumPy arrays live in host memory only.
        target_addresses_device: target != "numpy",
        // JAX's DLPack import waits on the host for the producer's stream (measured on 2× H200).
        target_import_waits: target == "jax",
        // JAX's __cuda_array_interface__ import ignores the producer's stream (measured on an H100).
        target_cai_unordered: target == "jax",
        // NumPy's legacy __dlpack__() raises BufferError for a read-only array.
        source_capsule_refuses_readonly: source == "numpy",
    }
}
