"""The optimizer: :class:`BOOptimizer` and the parts of its step.

- :mod:`asebo.optimize.optimizer`: the ASE optimizer;
- :mod:`asebo.optimize.search`: the lower-confidence-bound search in a trust box;
- :mod:`asebo.optimize.trust`: the trust region and the confidence check;
- :mod:`asebo.optimize.rigid`: net force and torque, rigid moves;
- :mod:`asebo.optimize.flat_centres`: flat nitrogen-group centres in the start;
- :mod:`asebo.optimize.observations`: observations, restart file and trajectory.
"""

from asebo.optimize.observations import RestartError
from asebo.optimize.optimizer import BOOptimizer

__all__ = ["BOOptimizer", "RestartError"]
