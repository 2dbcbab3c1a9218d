//! Inputs refused before a framework is called: only those known to crash the target.

use crate::dlpack::has_negative_stride;
use crate::report::TensorReport;

/// A conversion gpushare will not attempt, with the fix to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
    pub fix: String,
}

/// Stops inputs that would crash the target framework, before calling it. Only crash-class inputs
/// belong here: an input the framework rejects with an exception is handed to it, so that the user
/// sees the framework's real answer (and [`predict`](super::predict) has already said it will fail).
///
/// Negative strides into PyTorch: `torch.from_dlpack` aborted the whole process on them in 2.12
/// (SIGABRT, pytorch#188023); later versions raise "Storage size calculation overflowed" (#188047).
/// gpushare refuses them on every version, because a kernel that dies loses the user's work.
///
/// Negative strides into PaddlePaddle: `paddle.from_dlpack` (and `paddle.utils.dlpack`) keep the
/// strides but not the start, so the tensor reads memory outside the source (garbage values seen
/// with Paddle 3.3 on the CPU); a read outside the allocation can crash the process.
///
/// `path` is the transfer path the route runs (`auto` already resolved: a route is made for one
/// concrete path): the routes that hand the target a fresh copy (`host`, and `copy` and `pinned`,
/// whose copy is compact) never show it the source's layout, so nothing is refused there.
pub fn refuse(src: &TensorReport, target: &str, path: &str) -> Option<Refusal> {
    if matches!(path, "host" | "copy" | "pinned") {
        return None;
    }
    if let Some(r) = super::targets::refusal(src, path) {
        return Some(r);
    }
    let (shape, strides) = (&src.shape, &src.strides);
    match target {
        "torch" if has_negative_stride(shape, strides) => Some(Refusal {
            reason: format!(
                "negative strides {strides:?}: torch.from_dlpack aborted the process on them (pytorch#188023, torch 2.12; later versions raise)"
            ),
            fix: "make a contiguous copy first, e.g. numpy.ascontiguousarray(x) or x.copy()".into(),
        }),
        "paddle" if has_negative_stride(shape, strides) => Some(Refusal {
            reason: format!(
                "negative strides {strides:?}: paddle's DLPack import keeps them but views the wrong memory, reading outside the source (Paddle 3.3)"
            ),
            fix: "make a contiguous copy first, e.g. numpy.ascontiguousarray(x) or x.copy()".into(),
        }),
        // A DLPack byte_offset is part of where the data starts (MLX exports its slices with one):
        // Paddle 3.3 and Warp 1.19 take `data` alone (Warp: `array(ptr=dlt.data, …)`), so their
        // tensor starts before the source's first element and reads bytes that are not its values.
        "paddle" | "warp" if src.byte_offset != 0 => Some(Refusal {
            reason: format!(
                "a DLPack byte_offset of {}: {target}'s DLPack import ignores it and would view the memory before the source's first element (Paddle 3.3, Warp 1.19)",
                src.byte_offset
            ),
            fix: "make a contiguous copy first (mx: mx.array(x) or x + 0; NumPy: numpy.ascontiguousarray(x)), or use path='copy'".into(),
        }),
        _ => None,
    }
}
