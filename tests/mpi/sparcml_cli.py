"""The sparcml command line as a script, for run_mpi (per-rank output)."""

import sys

from sparcml_apps.cli.main import main

sys.exit(main())
