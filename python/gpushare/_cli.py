"""The `gpushare` console script: a thin shim over the Rust command (`gpushare._native.cli_main`)."""

import os
import sys

#: Exit status after Ctrl-C, as shells report SIGINT (the Rust command's EXIT_INTERRUPTED).
EXIT_INTERRUPTED = 130


def main() -> None:
    from gpushare import _native

    # The Rust command launches kernels and installs kernelspecs for *this* Python.
    os.environ.setdefault("GPUSHARE_PYTHON", sys.executable)
    os.environ.setdefault("GPUSHARE_SYS_PREFIX", sys.prefix)
    try:
        # Named `gpushare` in usage lines, as the console script is, also under `python -m gpushare`.
        code = _native.cli_main(["gpushare", *sys.argv[1:]])
    except KeyboardInterrupt:
        # Ctrl-C reaches Python's handler too (the Rust handler chains to it): Python raises
        # KeyboardInterrupt once cli_main returns. The Rust side has already stopped the kernel and
        # said "interrupted"; a traceback here would only be noise.
        code = EXIT_INTERRUPTED
    sys.exit(code)


if __name__ == "__main__":
    main()


def calibrate_command() -> int:
    """``gpushare calibrate``'s Python half, run in the kernel's Python: the arguments (checked by
    the command already) come as JSON in ``$GPUSHARE_CALIBRATE_ARGS``. Prints what the model holds
    and returns the exit status: 1, with one line on stderr, when the calibration failed, fitted no
    path, or could not be saved (the model then serves no later process)."""
    import json

    import gpushare
    from gpushare import advice
    from gpushare.exceptions import GpushareError

    a = json.loads(os.environ["GPUSHARE_CALIBRATE_ARGS"])
    record: list = []
    try:
        m = gpushare.calibrate(
            a["frameworks"] or None, sizes=a["sizes"] or advice.DEFAULT_SIZES, device=a["device"],
            to_device=a["to_device"], processes=a["processes"], worker_device=a["worker_device"],
            across=a.get("across"), repeat=a["repeat"], record=record, progress="lines",
        )
    except GpushareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # the cache, as it is written
        print(f"error: calibrate failed: {e}; nothing was saved", file=sys.stderr)
        return 1
    print(repr(m))
    # The fits this run made: a path of a sweep that measured at least once. A model carried over
    # from an earlier calibration still holds its own fits, which must not make this run look done.
    measured = {
        (r["kind"], p["path"], r["source"], r["target"], r["place"])
        for r in record for p in r["points"]
        if p.get("verdict") != "failed" and p.get("timing") and p.get("path") not in ("auto", "shared")
    }
    fitted = measured & set(m.keys())
    if not fitted:
        what = "no sweep ran" if not record else f"every one of the {len(record)} sweeps failed"
        # The first failure's own words: a sweep that failed for one reason usually failed for all.
        why = next((p.get("reason") for r in record for p in r["points"] if p.get("verdict") == "failed" and p.get("reason")),
                   None)
        print(f"error: calibrate fitted no path ({what}{': ' + why if why else ''}): the model is unchanged",
              file=sys.stderr)
        return 1
    path = advice.cache_file()
    saved = False
    try:
        # Only a regular file of sane size is read back: a FIFO or device there would block or
        # never end, and is not where a model was saved anyway.
        if path.is_file() and path.stat().st_size < 64 << 20:
            saved = json.loads(path.read_text(encoding="utf-8")) == json.loads(m.to_json())
    except (OSError, ValueError):
        saved = False
    if not saved:
        print(f"error: nothing was saved: the model could not be written to {path} (check that its "
              "directory is writable, or set XDG_CACHE_HOME); it served this process only", file=sys.stderr)
        return 1
    print(advice.summary())
    print(f"{len(fitted)} paths fitted by this run")
    if any(key[1] == "remote" for key in fitted):
        print(f"remote (the worker at {a.get('across')}): fitted on the mean of each size's samples, not their "
              "median: a small message's time over the network is bimodal (gpushare.advice.fitted_time)")
    return 0


#: ``doctor_command``'s exit status when its verdict is "not ready" (the command exits 1).
NOT_READY = 3


def doctor_verdict(info: object) -> tuple[bool, str]:
    """Whether gpushare is ready in this Python, and the one line that says so or what is wrong:
    a real share of a small NumPy array on the CPU, whether notebooks can run here (ipykernel),
    what the report says of CUDA, and a version that differs from the command's."""
    import importlib.util

    import gpushare
    from gpushare import lab
    from gpushare.adapters import ADAPTERS

    problems, notes = [], []
    # The framework of host memory (gpushare's one dependency): an installed framework whose
    # arrays never live in device memory.
    host = next((a for a in ADAPTERS.values() if not a.addresses_device and a.installed()), None)
    try:
        if host is None:
            raise RuntimeError("no framework of host memory is installed")
        verdict = gpushare.share(lab.make_array(host, 4, "float32", "cpu"), host.name).verdict
        if verdict == "shared":
            notes.append("sharing works on the CPU")
        else:
            problems.append(f"an array handed to its own framework on the CPU was {verdict}, not shared")
    except Exception as e:  # the verdict names whatever broke, gpushare's or not
        problems.append(f"sharing an array on the CPU failed: {type(e).__name__}: {e}")
    if importlib.util.find_spec("ipykernel") is None:
        problems.append("notebooks cannot run here: ipykernel is not installed "
                        f"({sys.executable} -m pip install 'gpushare-dlpack[kernel]')")
    cuda_available = getattr(info, "cuda_available", False)
    if cuda_available:
        driver = getattr(info, "driver", {})
        count = driver.get("device_count", 0)
        notes.append(f"CUDA driver {driver.get('version_string')}, {count} device{'s' if count != 1 else ''}")
    else:
        notes.append(f"no CUDA ({getattr(info, 'reason', None) or 'no driver'})")
    command = os.environ.get("GPUSHARE_CLI_VERSION")
    if command and command != gpushare.__version__:
        problems.append(f"this Python has gpushare {gpushare.__version__}, the command is {command}: "
                        "install one version in both")
    if problems:
        return False, "not ready: " + "; ".join(problems + notes)
    return True, "ready: " + "; ".join(notes)


def doctor_command(import_frameworks: bool) -> int:
    """``gpushare doctor``'s Python half: the report (as ``%gpuinfo``), then gpushare's version and
    the one-line verdict. Returns 0 when ready, :data:`NOT_READY` when not."""
    import gpushare

    info = gpushare.gpuinfo(import_frameworks=import_frameworks)
    print(repr(info))
    ready, line = doctor_verdict(info)
    print(f"\ngpushare {gpushare.__version__} in {sys.executable}")
    print(line)
    return 0 if ready else NOT_READY
