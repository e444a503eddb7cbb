"""What :class:`asebo.BOOptimizer` shows of its engine and its run, read-only: the
model's parts and settings, the trust region, what was computed and why."""

from asebo.optimize.bonding import bond_changes


class RunViews:
    """The views of an ASE optimizer that has ``engine``, ``observations``, ``trust``,
    ``proposals``, ``numbers``, ``periodic``, ``threads`` and ``endpoint_verdict``
    (:class:`asebo.BOOptimizer`)."""

    def todict(self):
        """ASE's description of the optimizer (the trajectory's header), with the
        kernel, prior, ``kappa``, first trust radius, recentring and threads."""
        description = super().todict()
        description.update(
            kappa=self.kappa,
            trust_radius=self.initial_trust_radius,
            kernel=self.representation.name,
            recentre=self.recentre,
            prior=self.prior.label,
            threads=self.threads,
        )
        return description

    @property
    def gp(self):
        """The engine's :class:`asebo.model.gp.EnergyForceGP`, refitted after each call."""
        return self.engine.gp

    @property
    def prior(self):
        """The engine's prior (:class:`asebo.model.priors.Prior`)."""
        return self.engine.prior

    @property
    def representation(self):
        """The engine's :class:`asebo.optimize.representations.Representation`."""
        return self.engine.representation

    @property
    def settings(self):
        """The engine's resolved :class:`asebo.optimize.settings.Settings`."""
        return self.engine.settings

    @property
    def kappa(self):
        """The weight of the uncertainty in the bound the search minimises,
        ``settings.search.kappa``."""
        return self.settings.search.kappa

    @property
    def maxstep(self):
        """Å: the largest displacement of an atom in one step, ``settings.trust_region.maxstep``."""
        return self.settings.trust_region.maxstep

    @property
    def initial_trust_radius(self):
        """Å: the first half-width of the trust box, ``settings.trust_region.radius``."""
        return self.settings.trust_region.radius

    @property
    def recentre(self):
        """eV: the recentring of the Lindh prior or the pair springs,
        ``settings.model.recentre``."""
        return self.settings.model.recentre

    @property
    def trust_radius(self):
        """Half-width of the current trust box, Å."""
        return self.trust.radius

    @property
    def energies(self):
        """Energies of every configuration computed, in order, eV."""
        return self.observations.energies

    @property
    def positions_seen(self):
        """Positions of every configuration computed, in order, (N, 3) each, Å (a cell
        filter's generalized positions: N = n + 3)."""
        return self.observations.positions

    @property
    def forces(self):
        """Unconstrained forces of every configuration computed, (N, 3) each, eV/Å (a
        cell filter's generalized forces)."""
        return self.observations.forces

    @property
    def reasons(self):
        """The reason of every proposal, in order (:data:`asebo.optimize.proposal.REASONS`):
        ``reasons[k]`` led to configuration ``k + 1``, as recorded in the restart file."""
        return [proposal["reason"] for proposal in self.proposals]

    @property
    def curvature_verdict(self):
        """The model's lowest curvature at an accepted endpoint, as the log's line at
        convergence gives it (:attr:`asebo.optimize.endpoint.Verdict.summary`); None
        before one."""
        verdict = self.endpoint_verdict
        return None if verdict is None else verdict.summary

    @property
    def bonds_changed(self):
        """The bonds broken and made from the first configuration computed to the
        lowest (:class:`asebo.optimize.bonding.BondChanges`, false where none); None
        for a periodic system, and before any call."""
        if self.periodic or not len(getattr(self, "observations", ())):
            return None
        positions = self.observations.positions
        return bond_changes(self.numbers, positions[0], positions[self.observations.best()])
