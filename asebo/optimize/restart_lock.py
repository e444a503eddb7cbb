"""An exclusive lock on a restart file, so that two processes never write the same one.

The lock is an advisory ``flock`` on a sibling file, ``<restart>.lock``, taken without
waiting. The operating system releases it when the process ends, however it ends (a
kill -9 leaves no stale lock); the lock file itself stays, empty of meaning. Within
one process the lock is shared: optimizers built one after the other on the same
restart file (a script that resumes, ASE's restart pattern) take it in turn or
together, and it is released when the last of them is closed or collected.
"""

import contextlib
import fcntl
import os
import threading

from ase.parallel import broadcast

from asebo.optimize.observations import RestartError

_HELD = {}  # lock file's real path -> [open file, holders, pid of the process]
_GUARD = threading.Lock()


class RestartLock:
    """This process's hold on the lock of one restart file (see the module docstring).

    A context manager: leaving it releases the hold, as :meth:`release` does; an
    optimizer hands it to ``closelater``, so that its ``close()`` or its collection
    releases it.
    """

    def __init__(self, key):
        self.key = key

    @classmethod
    def acquire(cls, restart, comm):
        """The hold on the lock of ``restart`` (a file name, or None: no lock).

        Only rank 0 of ``comm`` locks; every rank raises :class:`RestartError` when the
        restart file is in use by another process. Every rank returns once all have
        come here: an optimizer acquires it after each rank has decided whether the
        restart file exists, so that no rank writes it first (a calculator that is not
        parallel, whose calls do not hold rank 0 back, would let it).
        """
        key, problem = None, None
        if restart is not None and comm.rank == 0:
            try:
                key = _take(os.path.realpath(os.fspath(restart) + ".lock"))
            except BlockingIOError:
                problem = (
                    f"restart file {os.fspath(restart)} is in use by another process (pid "
                    f"{_holder(os.fspath(restart) + '.lock')}): wait for it or pass another "
                    "restart file"
                )
        problem = broadcast(problem, root=0, comm=comm)
        if problem is not None:
            raise RestartError(problem)
        comm.barrier()
        return cls(key)

    def release(self):
        """Give up this hold; the lock is released once no hold of this process is left."""
        key, self.key = self.key, None
        if key is None:
            return
        with _GUARD:
            held = _HELD.get(key)
            if held is None or held[2] != os.getpid():
                return
            held[1] -= 1
            if held[1] == 0:
                del _HELD[key]
                held[0].close()  # closing the file releases the flock

    @contextlib.contextmanager
    def released_on_error(self):
        """Within the block (an optimizer opening its files), an exception releases
        this hold before it propagates; otherwise the hold is kept."""
        try:
            yield self
        except BaseException:
            self.release()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.release()


def _take(path):
    """Lock ``path`` for this process (or count one more hold on it); its key.

    Raises ``BlockingIOError`` where another process holds it.
    """
    with _GUARD:
        held = _HELD.get(path)
        if held is not None and held[2] == os.getpid():
            held[1] += 1
            return path
        fd = open(path, "a+")  # noqa: SIM115 - held open for as long as the lock
        try:
            fcntl.flock(fd.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            fd.close()
            raise
        fd.seek(0)
        fd.truncate()
        fd.write(f"{os.getpid()}\n")
        fd.flush()
        _HELD[path] = [fd, 1, os.getpid()]
        return path


def _holder(path):
    """The process id written in the lock file ``path``, or '?' where none is readable."""
    try:
        with open(path) as fd:
            return fd.read().strip() or "?"
    except OSError:
        return "?"
