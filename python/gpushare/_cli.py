"""The `gpushare` console script: a thin shim over the Rust command (`gpushare._native.cli_main`)."""

import os
import sys


def main() -> None:
    from gpushare import _native

    # The Rust command launches kernels and installs kernelspecs for *this* Python.
    os.environ.setdefault("GPUSHARE_PYTHON", sys.executable)
    os.environ.setdefault("GPUSHARE_SYS_PREFIX", sys.prefix)
    sys.exit(_native.cli_main(sys.argv))


if __name__ == "__main__":
    main()
