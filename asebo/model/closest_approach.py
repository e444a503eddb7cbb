"""The closest two atoms may come: nearer is a mistake in the input, not a geometry.

Shared by the optimizers' input checks (:mod:`asebo.optimize.system_checks`), the pair
springs (:mod:`asebo.model.springs`) and the presets' check of a periodic cell
(:func:`calculators.check_periodic_cell`), which takes it from here: the optimizers
import nothing from the presets, so that a ``calculators.py`` of the user's does not
break them. The module imports nothing, so that ``import calculators`` stays light.
"""

CLOSEST_APPROACH = 0.5
"""Å: two atoms (or an atom and a periodic image, minimum image) closer than this are
refused."""
