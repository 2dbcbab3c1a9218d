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
