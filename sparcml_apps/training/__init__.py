"""Training, as every rank runs it: the loop (:mod:`.loop`) of SGD steps and exchanges
(:mod:`.exchange`) over compiled kernels (:mod:`.kernels`, :mod:`.exchange_kernels`), the
state of a run (:mod:`.state`), checkpoints (:mod:`.checkpoint`), the rows held out to
stop early (:mod:`.holdout`), the rows in memory (:mod:`.memory`) and the measures of the
TopK analysis (:mod:`.diagnostics`)."""

from .loop import train
from .state import Epoch, Progress, Setup, Weights

__all__ = ["Epoch", "Progress", "Setup", "Weights", "train"]
