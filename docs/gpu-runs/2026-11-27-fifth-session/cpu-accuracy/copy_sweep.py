import os, sys, time, json, itertools
os.environ.setdefault("JAX_PLATFORMS","cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL","3")
import gpushare
sizes=["16KiB","64KiB","128KiB","256KiB","512KiB","1MiB","2MiB","4MiB","8MiB","16MiB","24MiB","32MiB","48MiB","64MiB"]
def main():
    out=[]
    pairs=list(itertools.permutations(["torch","tf","jax","numpy"],2))
    for rnd in range(int(sys.argv[2])):
        for src,dst in pairs:
            d=gpushare.bench(src,dst,sizes,device="cpu",paths=["copy","host"],repeat=5,progress=False).to_dict()
            for p in d["points"]:
                if p.get("timing"): out.append(dict(r=rnd,pair=f"{src}->{dst}",path=p["path"],size=p["size"],t=p["timing"]["median"],t0=time.time()))
        print("round",rnd,flush=True)
    json.dump(out,open(sys.argv[1],"w"))
if __name__=="__main__": main()
