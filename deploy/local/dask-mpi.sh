#!/usr/bin/env bash
# sparcml train on a Dask cluster started with the dask-mpi command: WORKERS workers
# (default 2) and a scheduler as one mpiexec job, the trainer as a Dask client outside
# it that shuts the cluster down when done. Arguments go to `sparcml train`. Everything
# listens on the loopback interface only and speaks TLS with a certificate made for this
# run, kept in a folder only this user can read: no other process can join or run code.
set -euo pipefail
WORKERS="${WORKERS:-2}"
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export MPIR_CVAR_POLLS_BEFORE_YIELD="${MPIR_CVAR_POLLS_BEFORE_YIELD:-10}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(umask 077 && python -c '
import sys
from sparcml_apps.cluster._guard import credentials
for name, text in zip(("cert.pem", "key.pem"), credentials()):
    with open(f"{sys.argv[1]}/{name}", "w") as out:
        out.write(text)
' "$work")
export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True
export DASK_DISTRIBUTED__COMM__TLS__CA_FILE="$work/cert.pem"
for role in CLIENT SCHEDULER WORKER; do
    export "DASK_DISTRIBUTED__COMM__TLS__${role}__CERT=$work/cert.pem"
    export "DASK_DISTRIBUTED__COMM__TLS__${role}__KEY=$work/key.pem"
done
# workers must be the MPI ranks themselves (distributed.Worker, not a Nanny's child)
mpiexec -n "$((WORKERS + 1))" dask-mpi --scheduler-file "$work/scheduler.json" \
    --protocol tls --interface lo --worker-class distributed.Worker --nthreads 1 --no-dashboard \
    > "$work/cluster.log" 2>&1 &
cluster=$!
for _ in $(seq 600); do
    [ -s "$work/scheduler.json" ] && break
    kill -0 "$cluster" 2> /dev/null || { cat "$work/cluster.log"; exit 1; }
    sleep 0.1
done
status=0
sparcml train --dask --scheduler-file "$work/scheduler.json" --workers "$WORKERS" \
    --shutdown "$@" || status=$?
if [ "$status" -ne 0 ]; then
    kill "$cluster" 2> /dev/null || true
fi
wait "$cluster" || status=$((status ? status : $?))
[ "$status" -eq 0 ] || cat "$work/cluster.log" >&2
exit "$status"
