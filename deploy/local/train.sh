#!/usr/bin/env bash
# sparcml train on RANKS local MPI ranks (default 4): every rank loads its share of the
# rows and all ranks train together. Arguments go to `sparcml train`, e.g.
#   deploy/local/train.sh --dataset url --epochs 5
set -euo pipefail
RANKS="${RANKS:-4}"
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# more ranks than cores: let a waiting rank yield its core often
export MPIR_CVAR_POLLS_BEFORE_YIELD="${MPIR_CVAR_POLLS_BEFORE_YIELD:-10}"
exec mpiexec -n "$RANKS" sparcml train "$@"
