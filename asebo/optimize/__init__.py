"""The optimizer: :class:`BOOptimizer` and the parts of its step.

- :mod:`asebo.optimize.optimizer`: the ASE optimizer, a driver of the engine;
- :mod:`asebo.optimize.engine`: the step machine, with nothing of ASE in it;
- :mod:`asebo.optimize.build`: the engine built for a system;
- :mod:`asebo.optimize.endpoint`: the checks at convergence, each a stage with a verdict;
- :mod:`asebo.optimize.model_results`: the model's Hessian, curvatures and vibrations;
- :mod:`asebo.optimize.system_checks`: the checks of the input, before any call;
- :mod:`asebo.optimize.observed_atoms`: what the optimizer asks of the calculator;
- :mod:`asebo.optimize.proposal`: what a step starts from and what it proposes, and why;
- :mod:`asebo.optimize.search`: the lower-confidence-bound search in a trust box;
- :mod:`asebo.optimize.stages`: the special cases, named stages that adjust a proposal;
- :mod:`asebo.optimize.representations`: how the GP sees a configuration (``kernel``);
- :mod:`asebo.optimize.settings`: the tuned settings, one frozen dataclass per concern;
- :mod:`asebo.optimize.resolve`: the optimizer's arguments resolved into its settings;
- :mod:`asebo.optimize.trust`: the trust region and the confidence check;
- :mod:`asebo.optimize.rigid`: net force and torque, rigid moves;
- :mod:`asebo.optimize.observations`: observations, restart file and trajectory.
"""

from asebo.optimize.observations import RestartError
from asebo.optimize.optimizer import BOOptimizer

__all__ = ["BOOptimizer", "RestartError"]
