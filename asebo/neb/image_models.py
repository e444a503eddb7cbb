"""The GP of each moving image of a band: one for all while the calls fit one dense
covariance, one per image beyond.

A band's calls spread over its images. Every image takes the one GP conditioned on all
of them while their covariance fits in the GP's ``max_size`` rows, or beyond where
conjugate gradients reach the full posterior. Where they do not (long length scales,
small noise), that GP conditions on the calls nearest to any image's latest, a handful an
image for a molecule of tens of atoms. Each moving image then takes a GP of its own,
conditioned on the ``max_size`` rows of the calls nearest to its own latest call, without
conjugate gradients: the local GP of R. B. Gramacy and D. W. Apley, "Local Gaussian
process approximation for large computer experiments", J. Comput. Graph. Stat. 24, 561
(2015), with the neighbourhood of each image in place of each prediction's
(:meth:`asebo.model.gp.EnergyForceGP.conditioned_near`: the prior, length scale and
features of the GP of all calls); an image not yet computed takes that GP.
"""

import numpy as np


class ImageModels:
    """The fitted GP of each image of a band (module docstring).

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        The GP of all calls, fitted to them before each :meth:`condition`.
    n_images : int
        Images of the band, the endpoints included.
    """

    def __init__(self, gp, n_images):
        self.pooled = gp
        self._of = [gp] * n_images  # (i,): the GP each image takes
        self.conditioned = None  # the observations counted at the last condition()

    @property
    def metric(self):
        """The feature map of every GP (None for Cartesian positions)."""
        return self.pooled.metric

    def fitted(self, surrogate, record):
        """Every image's GP after the GP of all calls is fitted to every image of
        ``record`` (:class:`asebo.neb.record.BandRecord`) by ``surrogate``
        (:class:`asebo.optimize.surrogate_model.Surrogate`, near the moving images'
        latest calls), and each moving image's conditioned (:meth:`condition`); again
        only after a new call."""
        observations = record.observations
        last = len(self._of) - 1
        latest = {image: at for at, image in enumerate(record.image_of)}
        latest = {image: at for image, at in sorted(latest.items()) if image not in (0, last)}
        surrogate.fitted(observations, sorted(latest.values()) or None)
        self.condition(len(observations), latest)
        return self

    def condition(self, count, latest):
        """Each image's GP, once the GP of all calls is fitted to the ``count``
        observations (beyond its ``max_size`` rows, conditioned on those nearest to the
        images' latest calls); once per ``count``.

        Parameters
        ----------
        count : int
            The observations.
        latest : dict
            Moving image -> the index of its latest call, for the images computed.
        """
        if count == self.conditioned:
            return
        self.conditioned = count
        self._of = [self.pooled] * len(self._of)
        if _conditions_on_all(self.pooled, count):
            return
        for image, at in latest.items():
            self._of[image] = self.pooled.conditioned_near([at])

    def of(self, image):
        """The GP of ``image`` (0 and the last are the endpoints)."""
        return self._of[image]

    def predict(self, positions, images, return_std=False, return_gradient=False):
        """Each configuration of ``positions`` (b, n, 3) on the GP of its image in
        ``images`` (b,): as :meth:`asebo.model.gp.EnergyForceGP.predict`, arrays stacked
        over ``b``."""
        options = {"return_std": return_std, "return_gradient": return_gradient}
        gps = [self._of[image] for image in images]
        if all(gp is self.pooled for gp in gps):
            return self.pooled.predict(np.asarray(positions), **options)
        results = [gp.predict(where[None], **options) for where, gp in zip(positions, gps)]
        if not isinstance(results[0], tuple):
            return np.concatenate([np.asarray(result) for result in results])
        return tuple(
            np.concatenate([np.asarray(part) for part in parts]) for parts in zip(*results)
        )


def _conditions_on_all(gp, count):
    """Whether the fitted ``gp``'s posterior mean is that of all ``count`` observations:
    all in its dense covariance, or conjugate gradients converged."""
    info = gp.solve_info_
    converged = info is not None and info.residual <= gp.cg_tolerance
    return len(gp.selected_) == count or converged
