"""asebo: Bayesian optimization of molecular geometries for ASE, on a kernel core."""

from asebo.optimize import BOOptimizer

__version__ = "0.1.0"
__all__ = ["BOOptimizer"]
