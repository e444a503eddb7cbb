"""asebo: Bayesian optimization of molecular geometries for ASE, on a kernel core.

``from asebo import BOOptimizer`` imports the optimizer (and PyTorch) on first use,
so that ``import asebo`` and the ``asebo`` command start quickly.
"""

__version__ = "0.1.0"
__all__ = ["BOOptimizer"]


def __getattr__(name):
    if name == "BOOptimizer":
        from asebo.optimize import BOOptimizer

        return BOOptimizer
    raise AttributeError(f"module 'asebo' has no attribute {name!r}")


def __dir__():
    return [*__all__, "__version__"]
