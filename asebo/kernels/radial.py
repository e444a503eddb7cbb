r"""Radial profiles ``k = f(d)`` of a kernel on the squared distance ``d``.

A derivative kernel that depends on two configurations only through their (aligned)
squared distance ``d`` has every block of its joint covariance of energies and
gradients in terms of three scalars per pair (chain rule through ``d``):

.. math:: k = f(d), \qquad a = -2 f'(d), \qquad c = 4 f''(d),

.. math:: \partial k/\partial Z = -a\, e_Z, \qquad
          \partial^2 k/\partial X \partial Z = c\, e_X \otimes e_Z + a\,(B \otimes G + T),

since ``\partial d/\partial Z = 2 e_Z`` and ``\partial^2 d/\partial X \partial Z =
-2 (B \otimes G + T)`` (Wong and Kolter, eqs. 13-14 and 31-33, where ``f`` is the
squared exponential and ``a = \gamma k``, ``c = \gamma^2 k``). ``a`` at ``d = 0`` is the
prior variance of each gradient component relative to that of the energy.

A profile is a callable ``(distance, gamma) -> (k, a, c)`` with a :meth:`slope_at_zero`
and a ``name``; :data:`RADIAL_PROFILES` maps names to profiles.
"""

import torch


class SquaredExponential:
    r"""``f(d) = exp(-gamma d / 2)``: infinitely smooth (Wong and Kolter, eq. 10).

    ``a = gamma k`` and ``c = gamma^2 k``.
    """

    name = "se"

    def __call__(self, distance, gamma):
        k = torch.exp(-0.5 * gamma * distance)
        return k, gamma * k, gamma**2 * k

    def slope_at_zero(self, gamma):
        """``a(0) = gamma``."""
        return gamma

    def __repr__(self):
        return "SquaredExponential()"


class Matern52:
    r"""Matérn kernel with smoothness 5/2 on the distance ``r = sqrt(d)``.

    .. math:: f = (1 + \rho + \rho^2 / 3)\, e^{-\rho}, \qquad \rho = \sqrt{5 \gamma d},

    .. math:: a = \tfrac{5 \gamma}{3} (1 + \rho)\, e^{-\rho}, \qquad
              c = \tfrac{25 \gamma^2}{3} e^{-\rho},

    the length scale ``1 / sqrt(gamma)`` as in :class:`SquaredExponential`. Twice
    differentiable, so the gradient-gradient blocks exist, but less smooth than the
    squared exponential: a GP with it does not assume the energy surface is analytic
    far beyond the data (Rasmussen and Williams, *Gaussian Processes for Machine
    Learning*, MIT Press 2006, eq. 4.17; for geometry optimisation Denzel and Kästner,
    J. Chem. Phys. 148, 094114 (2018), and Raggi et al., J. Chem. Theory Comput. 16,
    3989 (2020)).
    """

    name = "matern52"

    def __call__(self, distance, gamma):
        rho = torch.sqrt(5.0 * gamma * distance)
        decay = torch.exp(-rho)
        k = (1.0 + rho + rho**2 / 3.0) * decay
        a = (5.0 * gamma / 3.0) * (1.0 + rho) * decay
        c = (25.0 * gamma**2 / 3.0) * decay
        return k, a, c

    def slope_at_zero(self, gamma):
        """``a(0) = 5 gamma / 3``."""
        return 5.0 * gamma / 3.0

    def __repr__(self):
        return "Matern52()"


RADIAL_PROFILES = {"se": SquaredExponential(), "matern52": Matern52()}


def radial_profile(profile):
    """The profile named ``profile`` (a key of :data:`RADIAL_PROFILES`), or ``profile`` itself."""
    if isinstance(profile, str):
        if profile not in RADIAL_PROFILES:
            raise ValueError(f"radial must be one of {sorted(RADIAL_PROFILES)}, got {profile!r}")
        return RADIAL_PROFILES[profile]
    if not callable(profile) or not hasattr(profile, "slope_at_zero"):
        raise TypeError("radial must be a profile name or a callable with slope_at_zero")
    return profile


__all__ = ["SquaredExponential", "Matern52", "RADIAL_PROFILES", "radial_profile"]
