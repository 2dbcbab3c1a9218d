//! The pool of the `copy` and `pinned` paths: a buffer whose last consumer let go waits here for the
//! next conversion of the same size on the same device, so that a conversion does not pay for
//! `cuMemAlloc`/`cuMemFree` (or fresh host pages) each time. Bounded by [`POOL_MAX_BYTES`] and
//! [`POOL_MAX_ENTRIES`].

use std::sync::Mutex;

use super::allocation::{Reusable, StreamLedger, Waits, normalize_stream};
use super::{Device, POOL_MAX_BYTES, POOL_MAX_ENTRIES, Result, lock};
use crate::cuda;

struct Pooled {
    device: Device,
    memory: Reusable,
    ledger: StreamLedger,
}

static POOL: Mutex<Vec<Pooled>> = Mutex::new(Vec::new());

pub(super) fn give_to_pool(device: Device, memory: Reusable, ledger: StreamLedger) {
    let len = memory.len();
    if len == 0 || len > POOL_MAX_BYTES {
        settle_foreign_write(&ledger);
        return; // dropped (freed) here
    }
    let evicted: Vec<Pooled> = {
        let mut pool = lock(&POOL);
        let mut evicted = Vec::new();
        while !pool.is_empty()
            && (pool.len() >= POOL_MAX_ENTRIES || pool.iter().map(|p| p.memory.len()).sum::<usize>() + len > POOL_MAX_BYTES)
        {
            evicted.push(pool.remove(0));
        }
        pool.push(Pooled { device, memory, ledger });
        evicted
    };
    for gone in &evicted {
        settle_foreign_write(&gone.ledger);
    }
    drop(evicted); // freed outside the lock: cuMemFree waits for the device
}

/// Waits for a peer copy into memory about to be freed that may still run on another device's
/// stream (cuMemFree waits for the memory's own device, not for a copy queued elsewhere). A failure
/// here can only be a device already lost: the memory is freed either way.
fn settle_foreign_write(ledger: &StreamLedger) {
    if let (Some(stream), Some(on)) = (ledger.pending, ledger.pending_on) {
        let _ = cuda::Stream::external(stream, on).synchronize();
    }
}

/// Pooled memory of exactly `len` bytes on `device`, made safe to write on `stream` (a stream of
/// device `writer_ordinal`): the writer's stream waits on the device for every other stream that
/// used it (a consumer that named none: the device is synchronised). A writer on another device
/// waits for all of them: a peer copy on cuda:0's stream 0 is not ordered after cuda:1's stream 0,
/// where a consumer may still be reading the memory it let go.
pub(super) fn take_pooled(device: Device, len: usize, stream: u64, writer_ordinal: i32) -> Result<Option<(Reusable, StreamLedger)>> {
    let taken = {
        let mut pool = lock(&POOL);
        pool.iter().position(|p| p.device == device && p.memory.len() == len).map(|i| pool.remove(i))
    };
    let Some(Pooled { memory, mut ledger, .. }) = taken else { return Ok(None) };
    if let Device::Cuda(ordinal) = device {
        // A peer copy into this memory may still run on another device's stream: the new writer
        // goes after it too (on the same stream it already does).
        if let (Some(pending), Some(on)) = (ledger.pending, ledger.pending_on)
            && (on, pending) != (writer_ordinal, normalize_stream(stream))
        {
            cuda::order_after(&cuda::Stream::external(stream, writer_ordinal), &cuda::Stream::external(pending, on))?;
        }
        match ledger.waits_before_write(stream, writer_ordinal == ordinal) {
            Waits::None => {}
            Waits::Device => cuda::synchronize_context(ordinal)?,
            Waits::Streams(users) => {
                let writer = cuda::Stream::external(stream, writer_ordinal);
                for user in users {
                    cuda::order_after(&writer, &cuda::Stream::external(user, ordinal))?;
                }
            }
        }
        ledger.users.clear();
    }
    (ledger.pending, ledger.pending_on) = (None, None);
    Ok(Some((memory, ledger)))
}

/// `(buffers, bytes)` in the pool.
pub fn pool_usage() -> (usize, usize) {
    let pool = lock(&POOL);
    (pool.len(), pool.iter().map(|p| p.memory.len()).sum())
}

/// Frees every pooled buffer (waits for the devices).
pub fn clear_pool() {
    let drained: Vec<Pooled> = std::mem::take(&mut *lock(&POOL));
    for gone in &drained {
        settle_foreign_write(&gone.ledger);
    }
    drop(drained);
}
