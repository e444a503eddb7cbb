"""The log of :class:`asebo.BOOptimizer`: ASE's step lines with the energy the model
predicted and the reason of the step, a header naming the columns, and notes between
the step lines."""

import time

from asebo.optimize.trust import UncertainStepError

NOTE_PREFIX = "# "
"""How a note line of the log begins: a comment to readers of ASE's log format."""


def step_reason(proposal):
    """The reason column of a step line, one word: the proposal's reason, with the
    number of times its box was halved because the model doubted its drop
    (``search(halved×2)``).

    Parameters
    ----------
    proposal : dict
        ``reason`` and ``retried``, as the restart file keeps a proposal
        (:meth:`asebo.optimize.proposal.Proposal.record`).
    """
    halvings = list(proposal.get("retried", ())).count(UncertainStepError.reason)
    return proposal["reason"] + (f"(halved×{halvings})" if halvings else "")


class StepLog:
    """The log of one optimizer.

    Parameters
    ----------
    file : file or None
        ASE's opened ``logfile``; None writes nothing.
    name : str
        The optimizer's class name, which begins every step line as in ASE's logs.
    """

    def __init__(self, file, name):
        self.file = file
        self.name = name
        self.header_written = False

    def header(self):
        """ASE's header line, with the columns asebo adds after ASE's; written once,
        before any note, as the first line of the log."""
        if self.file is not None and not self.header_written:
            self.header_written = True
            self.file.write(
                f"{' ' * len(self.name)}  {'Step':>4} {'Time':>8} {'Energy':>15}  "
                f"{'fmax':>12} {'Predicted':>15} Reason\n"
            )

    def notes(self, notes):
        """One line for each note, between the step lines: ``# `` and the note, which a
        reader of ASE's log format skips as a comment, and which no parser of step
        lines (``NAME:`` and a step number) takes for one."""
        if self.file is not None and notes:
            self.header()  # a note of the restart file's check comes before it
            for note in notes:
                self.file.write(f"{NOTE_PREFIX}{note}\n")

    def step(self, nsteps, energy, fmax, predicted, reason):
        """ASE's step line (``NAME:``, step, time, energy, fmax), then ``predicted``
        (eV, or None) and ``reason`` (a proposal's, or '')."""
        if self.file is None:
            return
        now = time.localtime()
        predicted = " " * 15 if predicted is None else f"{predicted:15.6f}"
        line = (
            f"{self.name}:  {nsteps:3d} {now[3]:02d}:{now[4]:02d}:{now[5]:02d} "
            f"{energy:15.6f} {fmax:15.6f} {predicted} {reason}"
        )
        self.file.write(line.rstrip() + "\n")


class LoggedSteps:
    """The log of an ASE optimizer whose step lines carry the model's predicted energy
    and the step's reason; it has ASE's ``logfile``, ``nsteps`` and ``optimizable``,
    and ``predicted_energy`` and ``proposals`` (:class:`asebo.BOOptimizer`)."""

    _step_log = None  # StepLog, made on the first line: ASE opens the logfile first

    @property
    def step_log(self):
        """The :class:`StepLog` of ASE's ``logfile``."""
        if self._step_log is None:
            self._step_log = StepLog(self.logfile, type(self).__name__)
        return self._step_log

    def _write_notes(self, notes):
        """One line in the log for each note (:meth:`StepLog.notes`)."""
        self.step_log.notes(notes)

    def log(self, gradient):
        """ASE's step line, then the energy the model predicted and the reason of the
        step (:meth:`StepLog.step`)."""
        if self.logfile is None:
            return
        later = self.nsteps > 0 and len(self.proposals) > 0
        self.step_log.step(
            self.nsteps,
            self.optimizable.get_value(),
            self.optimizable.gradient_norm(gradient),
            self.predicted_energy if later else None,
            step_reason(self.proposals[-1]) if later else "",
        )
