"""asebo: Bayesian optimization of molecular geometries for ASE, on a kernel core.

The package is laid out by what each part does:

- :mod:`asebo.optimize`: :class:`BOOptimizer`, the ASE optimizer, and its step
  (search, trust region, rigid moves, observations and the restart file);
- :mod:`asebo.neb`: :class:`BONEB`, a nudged elastic band on the same GP;
- :mod:`asebo.saddle`: :class:`BOSaddle`, a saddle point from a guess on the same GP;
- :mod:`asebo.model`: the Gaussian process on energies and forces, its metrics,
  internal coordinates, the Lindh model and the priors;
- :mod:`asebo.kernels`: the kernel core shared by the optimizer and the estimators;
- :mod:`asebo.learn`: the sibling estimators (MLKR, MLKRR, IOKR, MP-IOKR,
  diffusion maps, energy prediction) and QM9;
- :mod:`asebo.campaign`, :mod:`asebo.benchmarks`, :mod:`asebo.commands`: the
  ``asebo`` command's comparisons and benchmarks.

``from asebo import BOOptimizer`` (or an estimator) imports it, and PyTorch, on first
use, so that ``import asebo`` and the ``asebo`` command start quickly.
"""

import importlib

_EXPORTS = {
    "BOOptimizer": "asebo.optimize",
    "BONEB": "asebo.neb",
    "BOSaddle": "asebo.saddle",
    "MLKR": "asebo.learn.mlkrr",
    "MLKRR": "asebo.learn.mlkrr",
    "IOKR": "asebo.learn.iokr",
    "IOKRCV": "asebo.learn.iokr",
    "MPIOKR": "asebo.learn.mpiokr",
    "MPIOKRCV": "asebo.learn.mpiokr",
    "DiffusionMap": "asebo.learn.diffusion",
    "KernelPCAEmbedding": "asebo.learn.diffusion",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name == "__version__":  # the installed distribution's, as ``asebo --version`` says
        from importlib.metadata import version

        return version("asebo")
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'asebo' has no attribute {name!r}")


def __dir__():
    return [*__all__, "__version__"]
