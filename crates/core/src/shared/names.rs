//! Devices and dtypes by the names users write (`"cuda:1"`, `"gpu"`, `"bfloat16"`, `"torch.float32"`),
//! and the byte size of a compact array, checked for overflow before anything is allocated.

use super::{Result, SharedError};
use crate::dlpack::DType;

/// Where an allocation lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    Cuda(i32),
}

impl Device {
    /// `"cpu"`, `"cpu:0"` (PyTorch's spelling), `"cuda"` (= `cuda:0`), `"cuda:N"`, `"gpu"`,
    /// `"gpu:N"`; case and spaces ignored. The one parser of device names: `SharedBuffer`, `share`,
    /// the magics and the command line all read them here.
    pub fn parse(text: &str) -> Result<Device> {
        let t = text.trim().to_ascii_lowercase();
        if t == "cpu" {
            return Ok(Device::Cpu);
        }
        if let Some(n) = t.strip_prefix("cpu:") {
            return match n.parse::<u64>() {
                Ok(0) => Ok(Device::Cpu),
                Ok(_) => Err(SharedError::NoSuchHost(text.to_owned())),
                Err(_) => Err(SharedError::BadDevice(text.to_owned())),
            };
        }
        for prefix in ["cuda", "gpu"] {
            if let Some(rest) = t.strip_prefix(prefix) {
                if rest.is_empty() {
                    return Ok(Device::Cuda(0));
                }
                if let Some(n) = rest.strip_prefix(':').and_then(|n| n.parse::<i32>().ok())
                    && n >= 0
                {
                    return Ok(Device::Cuda(n));
                }
            }
        }
        Err(SharedError::BadDevice(text.to_owned()))
    }

    /// From a DLPack `(device_type, device_id)`: CPU and page-locked host memory are host memory.
    pub fn from_dlpack(device_type: u32, device_id: i32) -> Result<Device> {
        match device_type {
            1 | 3 => Ok(Device::Cpu),
            2 => Ok(Device::Cuda(device_id)),
            other => Err(SharedError::NotApplicable(format!(
                "gpushare copies host and CUDA device memory; this array is in {} memory",
                crate::dlpack::device_type_name(other)
            ))),
        }
    }

    /// DLPack `(device_type, device_id)`.
    pub fn dlpack(self) -> (u32, i32) {
        match self {
            Device::Cpu => (1, 0),
            Device::Cuda(n) => (2, n),
        }
    }

    pub fn name(self) -> String {
        match self {
            Device::Cpu => "cpu".to_owned(),
            Device::Cuda(n) => format!("cuda:{n}"),
        }
    }
}

/// A dtype by the names NumPy, PyTorch and JAX use (`float32`, `bfloat16`, `bool`, `complex64`),
/// plus the short aliases `float`, `double`, `half`, `int`, `long`.
pub fn parse_dtype(name: &str) -> Result<DType> {
    let n = name.trim().to_ascii_lowercase();
    let n = n.strip_prefix("torch.").or_else(|| n.strip_prefix("np.")).unwrap_or(&n);
    let (code, bits) = match n {
        "bool" => (6, 8),
        "float" => (2, 32),
        "double" => (2, 64),
        "half" => (2, 16),
        "int" => (0, 32),
        "long" => (0, 64),
        "bfloat16" => (4, 16),
        other => {
            let (code, digits) = if let Some(d) = other.strip_prefix("float") {
                (2, d)
            } else if let Some(d) = other.strip_prefix("uint") {
                (1, d)
            } else if let Some(d) = other.strip_prefix("int") {
                (0, d)
            } else if let Some(d) = other.strip_prefix("complex") {
                (5, d)
            } else {
                return Err(SharedError::BadDtype(name.to_owned()));
            };
            let bits: u8 = digits.parse().map_err(|_| SharedError::BadDtype(name.to_owned()))?;
            let valid = match code {
                2 => matches!(bits, 16 | 32 | 64),
                5 => matches!(bits, 64 | 128),
                _ => matches!(bits, 8 | 16 | 32 | 64),
            };
            if !valid {
                return Err(SharedError::BadDtype(name.to_owned()));
            }
            (code, bits)
        }
    };
    Ok(DType { code, bits, lanes: 1 })
}

/// Bytes of a compact array of `shape` with items of `itemsize` bytes, checked for overflow.
pub fn compact_nbytes(shape: &[i64], itemsize: u64) -> Result<usize> {
    let mut n: u64 = itemsize;
    for (dim, &size) in shape.iter().enumerate() {
        if size < 0 {
            return Err(SharedError::BadShape(format!("dimension {dim} has negative size {size}")));
        }
        n = n.checked_mul(size as u64).ok_or_else(|| SharedError::BadShape("the size overflows 64 bits".into()))?;
    }
    usize::try_from(n).map_err(|_| SharedError::BadShape("the size does not fit in memory".into()))
}
