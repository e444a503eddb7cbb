r"""The lower confidence bound on the GP's energy, minimised in a trust box through BoTorch.

``LCB(x) = mu(x) - kappa sigma(x)`` (Wong and Kolter, eq. 35) is BoTorch's
``UpperConfidenceBound(model, beta=kappa**2, maximize=False)``, which returns
``-LCB``; ``optimize_acqf`` maximises it with L-BFGS-B inside box bounds: a trust box
around the best configuration, on the free coordinates only.
"""

import torch
from botorch.acquisition import UpperConfidenceBound
from botorch.models.model import Model
from botorch.optim import optimize_acqf
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal


class EnergyModel(Model):
    """BoTorch view of an :class:`asebo.model.gp.EnergyForceGP`: the energy posterior.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
        A fitted GP.
    template : tensor (n, 3)
        Positions that supply the fixed coordinates.
    free : bool tensor (3n,)
        Which flattened coordinates the optimizer moves; ``X`` holds only these.
    """

    _num_outputs = 1

    def __init__(self, gp, template, free):
        super().__init__()
        self.gp = gp
        self.template = template.reshape(-1)
        self.free = free

    @property
    def num_outputs(self):
        return 1

    @property
    def batch_shape(self):
        return torch.Size([])

    def positions(self, X):
        """Full positions (..., n, 3) from free coordinates X (..., d)."""
        full = self.template.expand(*X.shape[:-1], -1).clone()
        full[..., self.free] = X
        return full.reshape(*X.shape[:-1], -1, 3)

    def posterior(
        self, X, output_indices=None, observation_noise=False, posterior_transform=None, **kwargs
    ):
        """Energy posterior at X (b, q, d): a GPyTorchPosterior with mean (b, q, 1)."""
        b, q, _ = X.shape
        mean, variance = self.gp.posterior(self.positions(X).reshape(b * q, -1, 3))
        mean = mean.reshape(b, q)
        covariance = torch.diag_embed(variance.reshape(b, q))  # (b, q, q)
        posterior = GPyTorchPosterior(MultivariateNormal(mean, covariance))
        return posterior if posterior_transform is None else posterior_transform(posterior)


def minimize_lcb(gp, starts, centre, radius, free, kappa, maxiter=200):
    """Minimise ``mu - kappa sigma`` in the box ``centre +- radius`` on the free coordinates.

    Parameters
    ----------
    gp : asebo.model.gp.EnergyForceGP
    starts : tensor (s, n, 3)
        Starting configurations (clipped into the box).
    centre : tensor (n, 3)
        Centre of the trust box, also the source of the fixed coordinates.
    radius : float
        Half-width of the box in Å, per coordinate.
    free : bool tensor (3n,)
    kappa : float
        Exploration weight; 0 minimises the posterior mean.

    Returns
    -------
    positions : tensor (n, 3)
    lcb : float
        ``mu - kappa sigma`` there.
    """
    model = EnergyModel(gp, centre, free)
    acquisition = UpperConfidenceBound(model, beta=kappa**2, maximize=False)
    lower = centre.reshape(-1)[free] - radius
    upper = centre.reshape(-1)[free] + radius
    initial = starts.reshape(len(starts), -1)[:, free]
    initial = torch.minimum(torch.maximum(initial, lower), upper)[:, None, :]  # (s, 1, d)
    candidate, value = optimize_acqf(
        acquisition,
        bounds=torch.stack([lower, upper]),
        q=1,
        num_restarts=len(starts),
        batch_initial_conditions=initial,
        options={"maxiter": maxiter},
        retry_on_optimization_warning=False,
    )
    return model.positions(candidate.detach())[0], -float(value)
