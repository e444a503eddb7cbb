"""The model: the Gaussian process on energies and forces and what it is built from.

- :mod:`asebo.model.gp`: :class:`asebo.model.gp.EnergyForceGP`;
- :mod:`asebo.model.regression`: what the GP and the prediction models share;
- :mod:`asebo.model.metric`: metrics from a model Hessian (internal coordinates,
  aligned positions);
- :mod:`asebo.model.internals`: primitive internal coordinates;
- :mod:`asebo.model.lindh`: Lindh's model Hessian;
- :mod:`asebo.model.priors`: the GP's prior means (their names for the command line in
  :mod:`asebo.model.prior_names`), and the calculators the automatic priors build
  (:mod:`asebo.model.prior_calculators`);
- :mod:`asebo.model.closest_approach`: the closest two atoms may come.
"""
