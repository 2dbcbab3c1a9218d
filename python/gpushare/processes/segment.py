"""The POSIX shared-memory segments the ``shm`` process path makes in the parent."""

from __future__ import annotations

import errno
import os

from gpushare.processes import rules as process_rules


class Segment:
    """A POSIX shared-memory segment the parent makes for one handoff. Its pages are reserved when
    it is made (posix_fallocate), so a full /dev/shm is an error here, not a SIGBUS on the copy.
    Releasing it unlinks its name and never unmaps it: NumPy views of the mapping
    (``result.local``) hold no buffer export, so an unmap would leave them reading unmapped
    memory (SIGSEGV); the mapping goes when the last view does."""

    def __init__(self, size: int, path: str):
        import mmap
        import secrets
        from multiprocessing import resource_tracker

        self.name = f"gpushare_{os.getpid()}_{secrets.token_hex(8)}"
        try:
            fd = os.open(self.file, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except OSError as e:
            raise process_rules.unwritable_error(path, e) from None
        try:
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    raise process_rules.no_space_error(path, size, e) from e
                os.ftruncate(fd, size)  # no fallocate on this filesystem: the space check stands alone
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.unlink(self.file)
            raise
        finally:
            os.close(fd)
        # Unlinked by Python's resource tracker should this process die first.
        resource_tracker.register("/" + self.name, "shared_memory")
        self._linked = True

    @property
    def file(self) -> str:
        return f"{process_rules.SHM_DIR}/{self.name}"

    def close(self) -> None:
        self.mm = None  # unmapped by the last view that goes, not here

    def unlink(self) -> None:
        if not self._linked:
            return
        self._linked = False
        from multiprocessing import resource_tracker

        try:
            os.unlink(self.file)
        except FileNotFoundError:
            pass
        resource_tracker.unregister("/" + self.name, "shared_memory")
