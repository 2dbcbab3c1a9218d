import os; os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import torch, jax, jax.numpy as jnp, gpushare
from gpushare import verdicts
from gpushare.adapters import framework
from gpushare.exceptions import PathNotApplicableError
j = jnp.ones(1024, dtype=jnp.float32); j.block_until_ready()
p = verdicts.predict(framework("jax"), framework("torch"), gpushare.inspect(j), "cai")
print("predicted:", p.verdict, "|", p.reason)
try:
    gpushare.share(j, "torch", path="cai")
except PathNotApplicableError as e:
    print("route:", e)
t = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0")
for path in ("p2p", "pinned"):
    r = gpushare.share(t, "jax", device="cuda:1", path=path)
    print(path, r.verdict, r.target.device, bool((jnp.asarray(r.value)[:4] == jnp.arange(4.0)).all()))
c = gpushare.compare(t, "jax")
print(c)
