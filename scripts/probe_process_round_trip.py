"""Whether a worker's round trip (a request that does nothing) tracks what a process handoff costs
as the parent's state changes: fresh, right after TensorFlow and JAX have run in the parent, and two
seconds later. A diagnostic for the cost model's process paths (docs/gpu-results.md, sixth session):
`python3 scripts/probe_process_round_trip.py` (CPU; needs torch, TensorFlow and JAX)."""
import time, statistics, gpushare
def ping(w, n=31):
    s=[]
    for _ in range(n):
        t=time.perf_counter(); w._call("ping"); s.append(time.perf_counter()-t)
    return statistics.median(s)*1e6
def sweep(w, tag):
    p0=ping(w)
    d=gpushare.bench("torch","torch",[16384, 4194304],device="cpu",across=w,repeat=15,paths=["shm","torch_mp"]).to_dict()
    p1=ping(w)
    print(tag, f"ping {p0:.0f}/{p1:.0f}", [(p['path'], p['size']>>10, round(p['timing']['median']*1e6)) for p in d['points'] if p.get('timing')], flush=True)
if __name__=="__main__":
    w=gpushare.Worker().start()
    sweep(w,"fresh"); sweep(w,"fresh2")
    import tensorflow as tf, jax.numpy as jnp, numpy as np, torch
    for i in range(200):
        t=tf.constant(np.ones(1<<16,np.float32)); (t*2).numpy(); jnp.ones(1<<16).block_until_ready()
        gpushare.share(torch.ones(1<<16), "tf"); gpushare.share(torch.ones(1<<16), "jax")
    sweep(w,"after tf/jax"); sweep(w,"after tf/jax 2")
    time.sleep(2)
    sweep(w,"after 2 s sleep")
    w.stop()
