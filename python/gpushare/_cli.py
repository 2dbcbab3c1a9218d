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
        code = _native.cli_main(sys.argv)
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
            repeat=a["repeat"], record=record,
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
        print(f"error: calibrate fitted no path ({what}): the model is unchanged", file=sys.stderr)
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
    return 0
