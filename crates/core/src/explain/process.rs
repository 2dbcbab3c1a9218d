//! Whether a process path applies to an array handed to a worker, decided before anything runs:
//! the refusals of the process routes (crates/core/src/share/process.rs asks them of each path's transport).
//!
//! A path refused here is a row of a comparison with its reason, or `PathNotApplicableError` from
//! `share(..., across=…)`. The facts that cost something to learn (importing a framework's
//! distributed package, asking the driver whether legacy IPC can export an allocation) are asked
//! through [`ProcessProbe`] only when the rule reaches them.

/// What is known of the array, the path and the worker without asking anything.
#[derive(Debug, Clone, Copy)]
pub struct ProcessFacts<'a> {
    pub path: &'a str,
    /// The source array's framework.
    pub framework: &'a str,
    /// The framework the worker is asked to hold the array in; `None`: the source's.
    pub to: Option<&'a str>,
    /// The frameworks the worker can hold an array handed by this path in (sorted).
    pub targets: &'a [String],
    /// The framework whose own library implements the path (torch for `torch_mp`, `gloo`, `nccl`).
    pub library: Option<&'a str>,
    /// The array lies in device memory.
    pub on_device: bool,
    /// The device of the array, and the device the worker works on.
    pub source_device: Option<i64>,
    pub worker_device: Option<i64>,
    /// The array's elements do not fill its extent once each (a step, `x[::2]`, or a broadcast):
    /// not "non-overlapping and dense", which torch.distributed's send takes only.
    pub strided: bool,
}

/// The facts that cost something to learn, asked only when a rule needs them.
pub trait ProcessProbe {
    /// Why the path's library cannot run in this process (its distributed package missing).
    fn library_unavailable(&mut self) -> Option<String>;
    /// Why NCCL cannot run here (the library built without it).
    fn nccl_unavailable(&mut self) -> Option<String>;
    /// Why legacy CUDA IPC cannot export the array's allocation.
    fn ipc_refusal(&mut self) -> Option<String>;
}

/// Why the path does not apply (predicted, before anything runs), or `None`.
pub fn refuse_process(f: &ProcessFacts<'_>, probe: &mut dyn ProcessProbe) -> Option<String> {
    let path = f.path;
    let targets = f.targets.join(" or ");
    if let Some(to) = f.to
        && !f.targets.iter().any(|t| t == to)
    {
        return Some(format!("{path} gives the worker {targets} arrays, not {to}"));
    }
    if let Some(library) = f.library {
        if f.framework != library {
            return Some(format!("{path} hands {library} tensors; this is a {} array", f.framework));
        }
        if let Some(why) = probe.library_unavailable() {
            return Some(why);
        }
    }
    match path {
        "shm" if f.on_device => {
            return Some("shm shares host memory; this array lives on the GPU (use ipc, torch_mp or nccl)".into());
        }
        "gloo" if f.on_device => {
            return Some("gloo send/recv is measured here for CPU tensors; on the GPU use nccl".into());
        }
        "ipc" if !f.on_device => {
            return Some("CUDA IPC shares device memory; this array is in host memory (use shm or torch_mp)".into());
        }
        "ipc" => {
            if let Some(why) = probe.ipc_refusal() {
                return Some(why);
            }
        }
        "remote" if f.on_device => {
            if let Some(why) = probe.nccl_unavailable() {
                return Some(why);
            }
        }
        "nccl" | "nccl_socket" if !f.on_device => {
            return Some("NCCL sends device memory; this tensor is in host memory (use gloo)".into());
        }
        "nccl" | "nccl_socket" => {
            if let Some(why) = probe.nccl_unavailable() {
                return Some(why);
            }
            if f.strided {
                return Some(
                    "NCCL send/recv takes only non-overlapping, dense tensors (torch.distributed: \"Tensors for P2P \
                     must be non-overlapping and dense\"), and this one has gaps or overlaps (a step, a broadcast): \
                     send x.contiguous(), a dense copy"
                        .into(),
                );
            }
            if f.source_device == f.worker_device {
                let on = f.source_device.map(|d| d.to_string()).unwrap_or_else(|| "None".into());
                return Some(format!(
                    "NCCL refuses two ranks on one GPU (ncclInvalidUsage 'Duplicate GPU detected', NCCL ≥ 2.5, \
                     NVIDIA/nccl#418): both processes are on cuda:{on}; give the worker another GPU, \
                     Worker(device='cuda:1')"
                ));
            }
        }
        _ => {}
    }
    if f.to.is_none() && !f.targets.iter().any(|t| t == f.framework) {
        // The worker holds the source's framework unless told otherwise: one this path cannot give.
        let first = f.targets.first().map(String::as_str).unwrap_or("");
        return Some(format!("{path} gives the worker {targets} arrays, not {}: pass to='{first}'", f.framework));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Probe {
        asked: Vec<&'static str>,
        ipc: Option<String>,
    }

    impl ProcessProbe for Probe {
        fn library_unavailable(&mut self) -> Option<String> {
            self.asked.push("library");
            None
        }
        fn nccl_unavailable(&mut self) -> Option<String> {
            self.asked.push("nccl");
            None
        }
        fn ipc_refusal(&mut self) -> Option<String> {
            self.asked.push("ipc");
            self.ipc.clone()
        }
    }

    fn facts<'a>(path: &'a str, framework: &'a str, targets: &'a [String], on_device: bool) -> ProcessFacts<'a> {
        let library = matches!(path, "torch_mp" | "gloo" | "nccl" | "nccl_socket" | "remote").then_some("torch");
        ProcessFacts { path, framework, to: None, targets, library, on_device, source_device: None, worker_device: None, strided: false }
    }

    #[test]
    fn each_path_refuses_memory_it_cannot_carry_and_asks_only_what_it_needs() {
        let both = vec!["numpy".to_string(), "torch".to_string()];
        let torch = vec!["torch".to_string()];
        let mut probe = Probe::default();
        assert!(refuse_process(&facts("ipc", "torch", &both, false), &mut probe).unwrap().contains("host memory"));
        assert!(refuse_process(&facts("gloo", "numpy", &torch, false), &mut probe).unwrap().contains("hands torch tensors"));
        assert!(probe.asked.is_empty(), "{:?}", probe.asked);
        assert_eq!(refuse_process(&facts("shm", "numpy", &both, false), &mut probe), None);
        let mut probe = Probe { ipc: Some("legacy IPC cannot export".into()), ..Probe::default() };
        assert_eq!(refuse_process(&facts("ipc", "torch", &both, true), &mut probe).unwrap(), "legacy IPC cannot export");
        let mut one_gpu = facts("nccl", "torch", &torch, true);
        (one_gpu.source_device, one_gpu.worker_device) = (Some(0), Some(0));
        assert!(refuse_process(&one_gpu, &mut probe).unwrap().contains("both processes are on cuda:0"));
        // A strided tensor is refused before it reaches torch.distributed's send, with the fix.
        let mut strided = facts("nccl", "torch", &torch, true);
        (strided.source_device, strided.worker_device, strided.strided) = (Some(0), Some(1), true);
        assert!(refuse_process(&strided, &mut probe).unwrap().contains("x.contiguous()"));
        strided.strided = false;
        assert_eq!(refuse_process(&strided, &mut probe), None);
        let jax = facts("shm", "jax", &both, false);
        assert_eq!(refuse_process(&jax, &mut probe).unwrap(), "shm gives the worker numpy or torch arrays, not jax: pass to='numpy'");
        let asked = ProcessFacts { to: Some("jax"), ..facts("shm", "numpy", &both, false) };
        assert_eq!(refuse_process(&asked, &mut probe).unwrap(), "shm gives the worker numpy or torch arrays, not jax");
    }

    #[test]
    fn remote_asks_about_nccl_for_device_tensors_only() {
        let torch = vec!["torch".to_string()];
        let mut probe = Probe::default();
        assert_eq!(refuse_process(&facts("remote", "torch", &torch, false), &mut probe), None);
        assert_eq!(probe.asked, ["library"]);
        let mut probe = Probe::default();
        assert_eq!(refuse_process(&facts("remote", "torch", &torch, true), &mut probe), None);
        assert_eq!(probe.asked, ["library", "nccl"]);
    }
}
