"""Nudged elastic bands on the GP: :class:`BONEB`."""

from asebo.neb.optimizer import BONEB

__all__ = ["BONEB"]
