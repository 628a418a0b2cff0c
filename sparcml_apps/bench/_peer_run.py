"""One system on one dataset, in a process of its own: ``python -m`` this module.

Starts the system (timed), searches its setting on the search rows (each candidate
fitted on the first four fifths, scored on the last fifth; the best accuracy wins, the
earlier candidate on a tie), loads the training and test rows (timed), then draws the
curves of its defaults and of the chosen setting. Prints one JSON record.
"""

import argparse
import json
import warnings

from ._peer_systems import SYSTEMS, timed


def run(system, files, *, max_seconds, max_points, candidates):
    n_features = int(files["n_features"])
    record = {"system": system.name, "version": system.version()}
    record["start_seconds"], _ = timed(system.start)
    try:
        search = system.load(files["search_train"], files["search_valid"], n_features)
        tried = []
        for setting in system.candidates[:candidates]:
            accuracy, seconds = system.validate(search, setting)
            tried.append({"params": setting, "accuracy": accuracy, "seconds": seconds})
        system.release(search)
        del search
        tuned = max(tried, key=lambda t: t["accuracy"])["params"]
        record["load_seconds"], data = timed(system.load, files["train"], files["test"], n_features)
        runs = []
        for name, setting in (("defaults", {}), ("tuned", tuned)):
            curve = system.curve(data, setting, max_seconds=max_seconds, max_points=max_points)
            runs.append({"setting": name, "params": setting, **curve})
    finally:
        system.stop()
    for key in ("start_seconds", "load_seconds"):  # sparcml's runs time their own
        if key in runs[0]:
            record[key] = runs[0][key]
    record.update(search=tried, tuned=tuned, runs=runs)
    return record


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=list(SYSTEMS))
    parser.add_argument("--files", type=json.loads, required=True, help="Files, as JSON")
    parser.add_argument("--max-seconds", type=float, required=True)
    parser.add_argument("--max-points", type=int, required=True)
    parser.add_argument("--candidates", type=int, required=True)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # fits stopped at a budget warn that they did not converge
    record = run(
        SYSTEMS[args.system],
        args.files,
        max_seconds=args.max_seconds,
        max_points=args.max_points,
        candidates=args.candidates,
    )
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
