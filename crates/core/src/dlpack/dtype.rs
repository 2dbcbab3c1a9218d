//! DLPack data types and their names (the names NumPy, PyTorch and JAX use: `float32`, `bfloat16`, `bool`).

use serde::{Deserialize, Serialize};

/// A `DLDataType`: type code, bits per lane, lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

impl DType {
    /// Bytes per element, rounded up (sub-byte types such as packed fp4 occupy a byte per pair).
    pub fn itemsize(&self) -> u64 {
        (u64::from(self.bits) * u64::from(self.lanes)).div_ceil(8)
    }

    pub fn name(&self) -> String {
        dtype_name(self.code, self.bits, self.lanes)
    }
}

/// The DLPack-style name of a dtype; unknown codes read `code<N>`, lanes > 1 add `x<lanes>`.
pub fn dtype_name(code: u8, bits: u8, lanes: u16) -> String {
    let base = match (code, bits) {
        // The common dtypes without the formatting machinery: every share names two dtypes.
        (0, 8) => "int8".to_string(),
        (0, 16) => "int16".to_string(),
        (0, 32) => "int32".to_string(),
        (0, 64) => "int64".to_string(),
        (1, 8) => "uint8".to_string(),
        (2, 16) => "float16".to_string(),
        (2, 32) => "float32".to_string(),
        (2, 64) => "float64".to_string(),
        (5, 64) => "complex64".to_string(),
        (5, 128) => "complex128".to_string(),
        (0, b) => format!("int{b}"),
        (1, b) => format!("uint{b}"),
        (2, b) => format!("float{b}"),
        (3, b) => format!("opaque{b}"),
        (4, 16) => "bfloat16".to_string(),
        (4, b) => format!("bfloat{b}"),
        (5, b) => format!("complex{b}"),
        (6, 8) => "bool".to_string(),
        (6, b) => format!("bool{b}"),
        (7, _) => "float8_e3m4".to_string(),
        (8, _) => "float8_e4m3".to_string(),
        (9, _) => "float8_e4m3b11fnuz".to_string(),
        (10, _) => "float8_e4m3fn".to_string(),
        (11, _) => "float8_e4m3fnuz".to_string(),
        (12, _) => "float8_e5m2".to_string(),
        (13, _) => "float8_e5m2fnuz".to_string(),
        (14, _) => "float8_e8m0fnu".to_string(),
        (15, _) => "float6_e2m3fn".to_string(),
        (16, _) => "float6_e3m2fn".to_string(),
        (17, _) => "float4_e2m1fn".to_string(),
        (c, b) => format!("code{c}_{b}bit"),
    };
    if lanes == 1 { base } else { format!("{base}x{lanes}") }
}
