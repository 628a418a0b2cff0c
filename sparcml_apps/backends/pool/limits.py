"""The limits a pool keeps to: module attributes, read when they apply (a program or a
test may change them)."""

WORKER = "sparcml_apps.backends.pool._worker"
"""The module each worker runs (``python -m``)."""
PRELOAD = ("sparcml_apps.training",)
"""The modules each worker imports once it is up, before its first task arrives."""
IDLE_SECONDS = 300.0
"""A pool that runs no fit for this long closes."""
HEARTBEAT_SECONDS = 1.0
"""How often a worker that fits tells the caller that it is alive."""
SILENCE_SECONDS = 10.0
"""A worker that fits and sends nothing for this long has failed (stopped, or stuck)."""
STRANDED_SECONDS = 10.0
"""A worker that failed and said so waits this long for the others to stop with it; then
every worker is killed and the fit raises its error. The others stop at their next
exchange, which a long epoch puts off (the fit fails either way), and never while one
waits in an MPI call of its own (a callback's)."""
START_SECONDS = 60.0
"""How long the workers have to start, connect and start MPI."""
GRACE_SECONDS = 5.0
"""How long ``mpiexec`` has to end once its workers have (then it is killed)."""
POLL_SECONDS = 0.1
"""How often the waiting caller copies output and checks on the workers (it does not spin)."""
