"""What :class:`asebo.BOOptimizer` gives of its model, at no calculator call: the GP
fitted to every observation, and the model's Hessian, curvatures and vibrations at a
configuration computed (:class:`asebo.optimize.model_hessian.ModelHessian`)."""

from asebo.threads import with_optimizer_threads


class ModelResults:
    """The model's results of an optimizer that has ``engine``, ``observations``,
    ``coordinates``, ``prior`` and a log of notes, ``_write_notes``
    (:class:`asebo.BOOptimizer`)."""

    @with_optimizer_threads
    def fit_model(self):
        """The GP fitted to every observation so far (fitted again only after a new one)."""
        gp, notes = self.engine.fitted(self.observations)
        self._write_notes(notes)
        return gp

    @property
    def lindh_model(self):
        """The :class:`asebo.model.lindh.LindhModel` of the ``'lindh'`` prior, as last
        recentred: the metric's, and the prior's unless it kept an earlier one
        (:class:`asebo.model.priors.RecentredLindh`; None before a fit, and under another
        prior)."""
        return self.prior.metric_reference()[1]

    # ---- the model's Hessian --------------------------------------------------------
    @with_optimizer_threads
    def model_hessian(self, positions=None, every_uncertainty=True):
        """The model's Hessian at a configuration computed, as a result with its
        curvatures, their uncertainty and the vibrations it gives; no calculator call.

        Parameters
        ----------
        positions : array (N, 3), optional
            Default: the lowest-energy configuration computed.
        every_uncertainty : bool, optional
            False probes the uncertainty of the lowest and non-positive curvatures only.

        Returns
        -------
        asebo.optimize.model_hessian.ModelHessian
            Of the GP refitted to the same observations with its constant the residual
            at ``positions`` and its Lindh prior's bends capped at Lindh's ``k_phi``
            (:func:`asebo.optimize.model_hessian.curvature_with_evidence`, anchored).

        Raises
        ------
        RuntimeError
            Before any configuration is computed.
        ValueError
            Under a cell filter, whose coordinates mix positions and strain.

        Notes
        -----
        Under a calculator prior it costs about 9N calls of the prior calculator.
        """
        if self.coordinates.has_cell:
            raise ValueError(
                "the model's Hessian under a cell filter mixes positions and strain: relax "
                "the cell, then run BOOptimizer on the atoms at that cell for their Hessian"
            )
        if not len(self.observations):
            raise RuntimeError("no configuration computed yet: call run() first")
        if positions is None:
            positions = self.observations.positions[self.observations.best()]
        atoms = self.coordinates.atoms.copy()
        atoms.positions = positions
        return self.engine.model_hessian(self.observations, atoms, every_uncertainty)

    def model_curvature(self, positions=None):
        """:attr:`asebo.optimize.model_hessian.ModelHessian.curvature` of
        :meth:`model_hessian` at ``positions`` (default: the lowest configuration)."""
        return self.model_hessian(positions).curvature

    def hessian(self):
        """:attr:`asebo.optimize.model_hessian.ModelHessian.hessian` (3N, 3N), eV/Å², of
        :meth:`model_hessian` at the lowest-energy configuration computed."""
        return self.model_hessian(every_uncertainty=False).hessian

    def vibrations(self):
        """:meth:`asebo.optimize.model_hessian.ModelHessian.vibrations` of
        :meth:`model_hessian` at the lowest-energy configuration computed
        (:class:`ase.vibrations.VibrationsData`)."""
        return self.model_hessian(every_uncertainty=False).vibrations()
