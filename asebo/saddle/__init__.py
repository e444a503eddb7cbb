"""Saddle points from a guess on the GP of the energies and forces computed."""

from asebo.saddle.optimizer import BOSaddle

__all__ = ["BOSaddle"]
