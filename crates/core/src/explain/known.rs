//! Known framework failure texts, mapped to the reason and the fix.

/// Known framework error texts, the reason they mean and the fix to try, in the frameworks' own words
/// (dlpack-matrix.md §1–§2). Matched by substring against the framework's message.
const KNOWN_FAILURES: &[(&str, &str, &str)] = &[
    ("require gradient", "the torch tensor requires grad", "share x.detach(), which views the same memory"),
    ("conjugate bit", "the torch tensor has its conjugate bit set", "share x.resolve_conj()"),
    ("Storage size calculation overflowed", "PyTorch cannot take negative strides", "make a contiguous copy first, e.g. numpy.ascontiguousarray(x)"),
    ("DLPack only supports signed/unsigned integers", "the source's dtype has no DLPack code in NumPy: NumPy exports only bool, integer, float and complex dtypes, not ml_dtypes' (bfloat16, float8, float4)", "cast to float32 first"),
    ("Invalid strides array from DLPack", "TensorFlow takes only compact row-major tensors", "make it contiguous first"),
    ("trivial (compact) striding", "JAX takes only compact layouts or their transposes", "make it contiguous first"),
    ("Address of buffer", "XLA's GPU kernels take only 16-byte aligned inputs and this array does not start on a 16-byte boundary", "share an aligned copy: x.clone() (torch) or x.copy() (CuPy)"),
    ("Unsupported byte_offset", "TensorFlow refuses a non-zero byte_offset", "make a contiguous copy first"),
    ("Cannot export readonly array", "NumPy will not export a read-only array through a legacy capsule, which cannot say read-only", "use path='dlpack' (versioned) or x.copy()"),
    ("only supports stream=None", "NumPy cannot take a CUDA stream", "move the array to the host first"),
    ("Unsupported device in DLTensor", "NumPy cannot address device memory", "copy to the host first (path='host')"),
    ("CPU arrays cannot be directly imported to CuPy", "CuPy imports device memory only", "cupy.asarray(x) copies to the GPU"),
    ("Unsupported device_type", "the consumer does not support this DLPack device type", "copy to plain device or host memory first"),
    ("unsupported device type", "the consumer does not support this DLPack device type", "copy to plain device or host memory first"),
    ("Unsupported Type Codes", "the consumer has no such dtype", "cast to a dtype both frameworks have"),
    ("Unsupported dtype", "the consumer has no such dtype", "cast to a dtype both frameworks have"),
    ("does not support bfloat16", "the consumer has no bfloat16", "cast to float32, or install ml_dtypes"),
    ("not supported by dlpack", "the dtype has no DLPack code", "cast to a standard dtype"),
    ("different CUDA device index", "the tensor is not on the current CUDA device", "torch.cuda.set_device(x.device) first"),
    ("non-None stream", "TensorFlow's __dlpack__ refuses a stream", "use path='capsule' (tf.experimental.dlpack.to_dlpack)"),
    // TensorFlow's message for any capsule not named "dltensor" ends in "may be consumed at most once"
    // and the name it got: a versioned capsule is not a consumed one.
    ("dltensor_versioned", "TensorFlow takes only legacy capsules (\"dltensor\") and was handed a versioned one", "let gpushare hand it over (it forwards a versioned capsule as a legacy one), or export with __dlpack__() and no max_version"),
    ("consumed", "the DLPack capsule was already consumed", "export a fresh capsule for each import"),
    ("unknown device", "TensorFlow's GPU index is logical and does not match", "check tf.config.get_visible_devices()"),
];

/// Reason and fix for a framework's error text, when gpushare knows it.
pub fn explain_failure(error_text: &str) -> Option<(&'static str, &'static str)> {
    KNOWN_FAILURES
        .iter()
        .find(|(needle, _, _)| error_text.contains(needle))
        .map(|(_, reason, fix)| (*reason, *fix))
}
