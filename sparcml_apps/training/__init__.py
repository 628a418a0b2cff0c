"""Training, as every rank runs it: the loop (:mod:`.loop`) of SGD steps and exchanges
(:mod:`.exchange`) over compiled kernels (:mod:`.kernels`, :mod:`.exchange_kernels`), the
state of a run (:mod:`.state`), checkpoints (:mod:`.checkpoint`), the rows held out to
stop early (:mod:`.holdout`), the rows in memory (:mod:`.memory`), the measures of the
TopK analysis (:mod:`.diagnostics`) and the plan of a rank's fit, which :func:`run` runs
(:mod:`.plan`)."""

from .loop import train
from .plan import Plan, Trained, run
from .state import Epoch, Progress, Setup, Weights

__all__ = ["Epoch", "Plan", "Progress", "Setup", "Trained", "Weights", "run", "train"]
