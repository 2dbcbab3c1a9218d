import json,sys,statistics
from collections import defaultdict
K=1024; M=K*K
def lin(knots,n):
    for (n0,t0),(n1,t1) in zip(knots,knots[1:]):
        if n<=n1: break
    s=(t1-t0)/(n1-n0)
    return max(t0+s*(n-n0), t0*n/n0 if n<n0 else 0)
d=json.load(open(sys.argv[1]))
T=defaultdict(dict)
for x in d: T[(x['pair'],x['path'],x['r'])][x['size']]=x['t']
rounds=sorted({x['r'] for x in d})
series=sorted({(x['pair'],x['path']) for x in d})
ev=[16*K,256*K,4*M,32*M]
grids={'now 64K,1M,16M,64M':[64*K,M,16*M,64*M],
       '64K,512K,1M,8M,16M,64M':[64*K,512*K,M,8*M,16*M,64*M],
       '64K,512K,8M,16M,64M':[64*K,512*K,8*M,16*M,64*M],
       '64K,512K,2M,8M,16M,48M,64M':[64*K,512*K,2*M,8*M,16*M,48*M,64*M],
       '64K,128K,512K,1M,2M,8M,16M,24M,48M,64M':[64*K,128*K,512*K,M,2*M,8*M,16*M,24*M,48*M,64*M],
       '64K,1M,8M,16M,64M':[64*K,M,8*M,16*M,64*M],
       '64K,512K,1M,16M,64M':[64*K,512*K,M,16*M,64*M],
       '64K,1M,16M,48M,64M':[64*K,M,16*M,48*M,64*M],
       }
for name,g in grids.items():
    errs=defaultdict(list)
    for s in series:
        for rc in rounds:
            for re_ in rounds:
                if rc==re_: continue
                cal=T[s+(rc,)]; evl=T[s+(re_,)]
                if any(k not in cal for k in g): continue
                knots=[(k,cal[k]) for k in g]
                for n in ev:
                    if n in evl: errs[n].append(abs(lin(knots,n)-evl[n])/evl[n])
    big=[e for n in ev if n>=M for e in errs[n]]; small=[e for n in ev if n<M for e in errs[n]]
    print(f"{name:42}", " ".join(f"{n>>10}K:{statistics.median(errs[n])*100:5.1f}" for n in ev), f"| >=1M {statistics.median(big)*100:.1f} <1M {statistics.median(small)*100:.1f}")
