"""Benchmarks: ``python -m sparcml_apps.bench NAME`` (or ``sparcml bench NAME``).

Each benchmark is a module here with ``add_arguments(parser)`` and ``run(args)``.
"""

BENCHMARKS = {
    "allreduce": "sparcml_apps.bench.allreduce",
    "train": "sparcml_apps.bench.train",
    "parse": "sparcml_apps.bench.parse",
    "projection": "sparcml_apps.bench.projection",
    "calibrate": "sparcml_apps.bench.calibrate",
    "overlap": "sparcml_apps.bench.overlap",
    "throughput": "sparcml_apps.bench.throughput",
    "diagnostics": "sparcml_apps.bench.topk_analysis",
    "jobs": "sparcml_apps.bench.n_jobs",
    "peers": "sparcml_apps.bench.peers",
    "scaling": "sparcml_apps.bench.scaling",
    "stopping": "sparcml_apps.bench.stopping",
    "fullsize": "sparcml_apps.bench.fullsize",
}
