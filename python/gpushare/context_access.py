"""Do the primary context's kernels reach memory another context of the same device allocated?

``pycuda.autoinit`` allocates in a context of its own; PyTorch, TensorFlow, JAX and CuPy run their
kernels in the device's primary context. A pointer handed from one to the other is the same number
(one virtual address space per process), so gpushare's verdict by pointer identity says "shared";
whether a kernel of the other context can really read and write those bytes is the driver's
business. :func:`cross_context_access` tries it: gpushare's own kernel, in the primary context,
reads and then writes memory of a context of its own, and a copy in the primary context reads it,
every byte checked.

A kernel that faults leaves the primary context unusable for the rest of its process (a sticky
error), and every framework of the process shares that context. So the trial runs in a child
process (``python -m gpushare.context_access``), and a fault there costs nothing here.
"""

from __future__ import annotations

import argparse
import html
import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from gpushare import _native

#: The child's answer is the last line of its standard output that starts with this.
_MARK = "gpushare-context-access: "
ACCESSES = (
    ("kernel_read", "a kernel in the primary context reads it"),
    ("kernel_write", "a kernel in the primary context writes it"),
    ("copy_read", "a copy queued in the primary context reads it"),
)


@dataclass
class CrossContextAccess:
    """What the child process found (or why it found nothing)."""

    device: int
    outcomes: dict[str, dict] = field(default_factory=dict)  # access → {outcome, detail}
    memory_context: int | None = None
    kernel_context: int | None = None
    nbytes: int = 0
    #: Why there is no answer (no CUDA, the child died), or None.
    problem: str | None = None

    @property
    def kernels_share(self) -> bool | None:
        """True: the primary context's kernels read and write the other context's memory exactly;
        False: they did not; None: not tried (no CUDA, or the child gave no answer)."""
        if self.problem is not None:
            return None
        return all(self.outcomes.get(k, {}).get("outcome") == "exact" for k in ("kernel_read", "kernel_write"))

    @property
    def summary(self) -> str:
        if self.problem is not None:
            return f"not tried: {self.problem}"
        if self.kernels_share:
            return (f"the primary context's kernels read and wrote memory of another context of cuda:{self.device} "
                    "exactly: the bytes are shared across contexts")
        failed = [f"{k}: {v.get('outcome')} ({v.get('detail')})" for k, v in self.outcomes.items() if v.get("outcome") != "exact"]
        return f"the primary context's kernels did NOT share memory of another context: {'; '.join(failed)}"

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "memory_context": self.memory_context, "kernel_context": self.kernel_context,
                "nbytes": self.nbytes, "outcomes": self.outcomes, "kernels_share": self.kernels_share,
                "problem": self.problem, "summary": self.summary}

    def _rows(self) -> list[list[str]]:
        return [[words, self.outcomes.get(key, {}).get("outcome", "n/a"), self.outcomes.get(key, {}).get("detail", "")]
                for key, words in ACCESSES]

    def _head(self) -> str:
        if self.problem is not None:
            return f"cross-context access on cuda:{self.device}: not tried ({self.problem})"
        return (f"memory of context {self.memory_context:#x} (not primary), {self.nbytes} bytes; kernels and copy in "
                f"the primary context {self.kernel_context:#x}; tried in a child process")

    def __repr__(self) -> str:
        lines = [self._head()]
        if self.problem is None:
            lines += [f"  {a}: {o}  {d}" for a, o, d in self._rows()]
        lines.append(self.summary)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "" if self.problem is not None else "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in self._rows()
        )
        table = "" if not rows else (
            '<table class="gpushare"><thead><tr><th>access</th><th>outcome</th><th>detail</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
        )
        return f"<p>{html.escape(self._head())}</p>{table}<p><b>{html.escape(self.summary)}</b></p>"


def cross_context_access(device: int = 0, nbytes: int = 1 << 20, timeout: float = 120.0) -> CrossContextAccess:
    """Tries the primary context's kernels on another context's memory of CUDA device ``device``, in
    a child process (see the module's docstring). Without CUDA the answer says so and nothing runs."""
    status = _native.cuda.driver_status()
    if not status["available"]:
        return CrossContextAccess(device, problem=f"no CUDA: {status.get('reason')}")
    command = [sys.executable, "-m", "gpushare.context_access", "--device", str(device), "--nbytes", str(nbytes)]
    try:
        child = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return CrossContextAccess(device, problem=f"the child process gave no answer within {timeout:.0f} s")
    answers = [line[len(_MARK):] for line in child.stdout.splitlines() if line.startswith(_MARK)]
    if not answers:
        tail = (child.stderr or child.stdout).strip().splitlines()[-3:]
        return CrossContextAccess(device, problem=f"the child process exited with {child.returncode} and no answer: "
                                                  + " | ".join(tail))
    answer = json.loads(answers[-1])
    if "error" in answer:
        return CrossContextAccess(device, problem=answer["error"])
    return CrossContextAccess(
        device,
        outcomes={key: answer[key] for key, _ in ACCESSES},
        memory_context=answer["memory_context"],
        kernel_context=answer["kernel_context"],
        nbytes=answer["bytes"],
    )


def main(argv: list[str] | None = None) -> int:
    """The child: runs the trial in this process and prints the answer as one JSON line."""
    parser = argparse.ArgumentParser(description="try the primary context's kernels on another context's memory")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--nbytes", type=int, default=1 << 20)
    args = parser.parse_args(argv)
    try:
        answer = _native.cuda.cross_context_access(args.device, args.nbytes)
    except Exception as e:  # the driver refused before any access: the parent shows why
        answer = {"error": f"{type(e).__name__}: {e}"}
    print(_MARK + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
