//! What gpushare knows of this machine's speed, to tell which path is fastest truthfully.
//!
//! [`ceilings`]: the resources a path's copy crosses (host memory, a GPU's memory, the host link
//! each way, a GPU pair's link) and how fast each can go, measured with the CUDA driver.
//! [`model`]: each path's `fixed + bytes / bandwidth`, fitted from a calibration sweep, that predicts
//! every path before it runs and lets `auto` take the fastest correct one.
//! [`segments`]: a copying path's line per range of sizes, where its cost per byte changes with size.
//! [`crossings`]: the sizes at which the fastest of a pair's paths can change, so `auto` is decided per range of sizes.
//! [`advise`]: every applicable path's prediction for one array, and which to take.
//! [`producer`]: whether the producer is busy, and which paths make the host wait for its queue.

pub mod advise;
pub mod ceilings;
pub mod crossings;
pub mod model;
pub mod producer;
pub mod segments;
