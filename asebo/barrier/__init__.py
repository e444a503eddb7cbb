"""From two minima to a verified transition state: :func:`transition_state`, a band, a
saddle search from its highest image and a check of the result, on one GP of the calls
made; :class:`TransitionState`, what it found."""

from asebo.barrier.record import TransitionState
from asebo.barrier.workflow import transition_state

__all__ = ["TransitionState", "transition_state"]
