"""Two network namespaces joined by a veth pair, for the tests of a worker on another host.

Made with iproute2's ``ip`` where it is installed, else with pyroute2 (pure-Python netlink); a
command runs in a namespace through ``ip netns exec``, else through a small ``setns()`` wrapper.
Everything is named after this process's pid, so two runs do not meet, and deleted at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

#: Runs argv[2:] in the network namespace named argv[1] (setns on /var/run/netns/NAME).
_SETNS = r"""
import ctypes, os, sys
fd = os.open("/var/run/netns/" + sys.argv[1], os.O_RDONLY)
if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:
    raise OSError(ctypes.get_errno(), "setns " + sys.argv[1])
os.close(fd)
os.execvp(sys.argv[2], sys.argv[2:])
"""


class VethPair:
    """Namespaces ``a`` and ``b``; interfaces ``if_a``/``if_b`` holding ``addr_a``/``addr_b``."""

    def __init__(self, tag: str | None = None):
        tag = tag or str(os.getpid() % 100000)
        self.a, self.b = f"gs{tag}a", f"gs{tag}b"
        self.if_a, self.if_b = f"vgs{tag}a", f"vgs{tag}b"
        self.addr_a, self.addr_b = "198.18.0.1", "198.18.0.2"
        self.ip = shutil.which("ip")

    # -- life cycle --

    def create(self) -> "VethPair":
        try:
            self._create_ip() if self.ip else self._create_pyroute2()
        except Exception:
            self.delete()
            raise
        return self

    def _create_ip(self) -> None:
        for cmd in (f"netns add {self.a}", f"netns add {self.b}",
                    f"link add {self.if_a} type veth peer name {self.if_b}",
                    f"link set {self.if_a} netns {self.a}", f"link set {self.if_b} netns {self.b}",
                    f"-n {self.a} addr add {self.addr_a}/30 dev {self.if_a}",
                    f"-n {self.b} addr add {self.addr_b}/30 dev {self.if_b}",
                    f"-n {self.a} link set lo up", f"-n {self.b} link set lo up",
                    f"-n {self.a} link set {self.if_a} up", f"-n {self.b} link set {self.if_b} up"):
            subprocess.run([self.ip, *cmd.split()], check=True, capture_output=True, text=True)

    def _create_pyroute2(self) -> None:
        from pyroute2 import IPRoute, NetNS, netns

        netns.create(self.a)
        netns.create(self.b)
        with IPRoute() as ipr:
            ipr.link("add", ifname=self.if_a, kind="veth", peer=self.if_b)
            ipr.link("set", index=ipr.link_lookup(ifname=self.if_a)[0], net_ns_fd=self.a)
            ipr.link("set", index=ipr.link_lookup(ifname=self.if_b)[0], net_ns_fd=self.b)
        for ns, ifname, addr in ((self.a, self.if_a, self.addr_a), (self.b, self.if_b, self.addr_b)):
            with NetNS(ns) as n:
                idx = n.link_lookup(ifname=ifname)[0]
                n.addr("add", index=idx, address=addr, prefixlen=30)
                n.link("set", index=n.link_lookup(ifname="lo")[0], state="up")
                n.link("set", index=idx, state="up")

    def delete(self) -> None:
        for ns in (self.a, self.b):  # deleting a namespace deletes its end of the pair, and the pair
            if self.ip:
                subprocess.run([self.ip, "netns", "del", ns], capture_output=True)
            else:
                try:
                    from pyroute2 import netns

                    netns.remove(ns)
                except Exception:
                    pass

    # -- in the namespaces --

    def command(self, ns: str, argv: list[str]) -> list[str]:
        """``argv`` run in namespace ``ns``."""
        if self.ip:
            return [self.ip, "netns", "exec", ns, *argv]
        return [sys.executable, "-c", _SETNS, ns, *argv]

    def set_link(self, side: str, up: bool) -> None:
        """Takes side ``"a"`` or ``"b"``'s interface up or down."""
        ns, ifname = (self.a, self.if_a) if side == "a" else (self.b, self.if_b)
        if self.ip:
            subprocess.run([self.ip, "-n", ns, "link", "set", ifname, "up" if up else "down"], check=True)
            return
        from pyroute2 import NetNS

        with NetNS(ns) as n:
            n.link("set", index=n.link_lookup(ifname=ifname)[0], state="up" if up else "down")

    def route(self, side: str, network: str, via: str) -> None:
        """A route on side ``side`` to ``network`` (``203.0.113.0/24``) through ``via``."""
        ns = self.a if side == "a" else self.b
        if self.ip:
            subprocess.run([self.ip, "-n", ns, "route", "replace", network, "via", via], check=True,
                           capture_output=True)
            return
        from pyroute2 import NetNS

        with NetNS(ns) as n:
            n.route("replace", dst=network, gateway=via)

    def shape(self, side: str, rate: str) -> None:
        """A token-bucket rate limit (``tc qdisc … tbf``) on side ``side``'s interface."""
        ns, ifname = (self.a, self.if_a) if side == "a" else (self.b, self.if_b)
        subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", ifname, "root", "tbf", "rate", rate,
                        "burst", "1mb", "latency", "50ms"], check=True, capture_output=True)


    def unshape(self, side: str) -> None:
        """Removes :meth:`shape`'s rate limit."""
        ns, ifname = (self.a, self.if_a) if side == "a" else (self.b, self.if_b)
        subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", ifname, "root"], capture_output=True)


def cannot_create() -> str | None:
    """Why two namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        try:
            import pyroute2  # noqa: F401
        except ImportError:
            return "neither iproute2 (ip) nor pyroute2 is installed"
    return None


if __name__ == "__main__":  # for a shell: python tests/_netns.py set-link NS-TAG a|b up|down
    cmd, tag, side, state = sys.argv[1:5]
    VethPair(tag).set_link(side, state == "up")
