#!/usr/bin/env bash
# Prints the oldest usable CPython from 3.9 to 3.12 (the ones NumPy 1.26 has wheels for) on PATH
# or under pyenv, for the oldest-NumPy environment of `make test`; prints nothing if there is none.
# A pyenv shim of a version that is not active fails when run, so every candidate is run once.
for v in 3.9 3.10 3.11 3.12; do
  candidates="python$v"
  root=${PYENV_ROOT:-$HOME/.pyenv}
  for p in $(ls -d "$root"/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V -r); do candidates="$candidates $p"; done
  for c in $candidates; do
    if "$c" -c 'import sys, venv, ensurepip; assert sys.version_info[:2] == tuple(map(int, "'"$v"'".split(".")))' >/dev/null 2>&1; then
      command -v "$c"
      exit 0
    fi
  done
done
