"""The threads of the optimizer's own linear algebra (the fit, the search, the checks).

The optimizer runs between the calculator's calls, on the same cores; left to their
defaults, PyTorch and the BLAS and OpenMP libraries take a thread per core each time,
and on a node packed with MPI ranks or a machine shared with other work, those threads
wait on one another. :func:`optimizer_threads` chooses how many the optimizer takes
and :func:`limited_threads` holds them to it for one piece of its work, giving the
caller's settings back afterwards, so that the calculator keeps its own threads.
"""

import contextlib
import functools
import os
import sys

import numpy as np

THREADS_VARIABLE = "OMP_NUM_THREADS"
"""The environment variable through which a user gives the threads of each process."""


def threads_from_environment(environ=None):
    """The first count of ``OMP_NUM_THREADS`` (``'4'``, or ``'4,2'`` for nested
    levels) where it is a whole number >= 1; None where it is unset or no such number.

    Parameters
    ----------
    environ : mapping, optional
        Default: :data:`os.environ`.
    """
    value = (os.environ if environ is None else environ).get(THREADS_VARIABLE, "")
    first = value.split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) >= 1 else None


def optimizer_threads(threads=None, environ=None):
    """The threads of the optimizer's own work: ``threads`` where given, else
    ``OMP_NUM_THREADS`` where the user set it (:func:`threads_from_environment`),
    else one.

    Raises
    ------
    ValueError
        For ``threads`` that is not a whole number >= 1.
    """
    if threads is None:
        return threads_from_environment(environ) or 1
    whole = isinstance(threads, (int, np.integer)) and not isinstance(threads, bool)
    if not whole or threads < 1:
        raise ValueError(
            f"threads must be a whole number >= 1 (the optimizer's own threads), got "
            f"{threads!r}; leave it out for the default (OMP_NUM_THREADS where set, else 1)"
        )
    return int(threads)


_POOLS = {"modules": None, "controller": None}
"""The controller of :func:`thread_pools` and the count of Python's modules when it was
built."""


def thread_pools():
    """threadpoolctl's controller of the BLAS and OpenMP libraries the process has
    loaded (:class:`threadpoolctl.ThreadpoolController`).

    Building one reads every shared library of the process, and the optimizer limits
    threads around each call of a prior calculator; so the controller is kept, and
    built again only where Python has imported modules since (the way a library is
    loaded: an extension module, or a package that loads one).
    """
    from threadpoolctl import ThreadpoolController

    modules = len(sys.modules)
    if _POOLS["modules"] != modules:
        _POOLS["controller"] = ThreadpoolController()
        _POOLS["modules"] = len(sys.modules)
    return _POOLS["controller"]


@contextlib.contextmanager
def limited_library_threads(threads):
    """Within the block, every BLAS and OpenMP library loaded runs ``threads`` threads
    (:meth:`threadpoolctl.ThreadpoolController.limit` of :func:`thread_pools`); the
    caller's numbers are set back on leaving it.

    Parameters
    ----------
    threads : int
        Threads, >= 1.
    """
    with thread_pools().limit(limits=threads):
        yield


@contextlib.contextmanager
def limited_threads(threads):
    """Within the block, PyTorch (``torch.set_num_threads``) and every BLAS and OpenMP
    library loaded (:func:`threadpoolctl.threadpool_limits`) run ``threads`` threads;
    the caller's numbers are set back on leaving it, an exception or not.

    Parameters
    ----------
    threads : int
        Threads, >= 1.
    """
    import torch

    before = torch.get_num_threads()
    with limited_library_threads(threads):
        torch.set_num_threads(threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)


def with_optimizer_threads(method):
    """``method`` of an optimizer run within :func:`limited_threads` of the optimizer's
    ``threads`` attribute."""

    @functools.wraps(method)
    def within(optimizer, *args, **kwargs):
        with limited_threads(optimizer.threads):
            return method(optimizer, *args, **kwargs)

    return within
