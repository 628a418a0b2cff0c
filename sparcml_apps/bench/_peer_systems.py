"""The systems of the peers benchmark, each run as its users run it.

A system loads a dataset's files (its own loader), fits a setting (a dict of parameters
over its documented defaults and the benchmark's model: logistic loss, or a hinge for a
linear SVM) and scores a model on the test rows. Packages are imported only when a system
runs, so this module imports without any of them; :meth:`System.missing` says why a
system cannot run.

A curve is a setting fitted from scratch at growing values of its budget (iterations or
passes), each fit timed and scored off the clock, up to the setting's own value; sparcml
scores after each epoch instead (``sparcml train`` prints the test accuracy per epoch).
"""

import importlib
import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

TIMEOUT = 3600
"""Seconds one ``sparcml train`` may take."""
SPARK_MEMORY = "8g"
"""Spark's driver memory (``spark.driver.memory``; its default of 1g cannot hold url-size
data)."""


def vw(path):
    """The Vowpal Wabbit text beside the LIBSVM file ``path``."""
    return Path(path).with_suffix(".vw")


def timed(function, *args):
    begin = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - begin, result


def budgets(last, first, factor):
    """``first``, ``first * factor``, ... below ``last``, then ``last``."""
    values, value = [], first
    while value < last:
        values.append(value)
        value = int(round(value * factor))
    return [*values, last]


class System:
    """A system: its name in the tables, the distribution whose version is shown, the
    modules its users import (the first tells whether it is installed), the parameter
    whose value sets the work (``budget``; curves grow it from ``first`` by ``factor``),
    the settings its search tries (``candidates``) and the parameters every fit takes
    (``fixed``)."""

    name = distribution = budget = ""
    imports = ()
    first, factor = 1, 2
    candidates = ()
    fixed = {}

    def missing(self):
        """Why the system cannot run here, or None."""
        if importlib.util.find_spec(self.imports[0].partition(".")[0]) is None:
            return f"{self.distribution} is not installed (make peers)"
        return None

    def version(self):
        return importlib.metadata.version(self.distribution)

    def start(self):
        """Import and start what the fits need (timed apart from loading)."""
        for module in self.imports:
            importlib.import_module(module)

    def stop(self):
        pass

    def release(self, data):
        """Free loaded data."""

    def load(self, train, test, n_features):
        raise NotImplementedError

    def default_budget(self):
        raise NotImplementedError

    def fit(self, data, setting):
        raise NotImplementedError

    def used(self, model):
        """The iterations a fit took (fewer than its budget: it converged), or None."""
        return None

    def accuracy(self, model, data):
        raise NotImplementedError

    def validate(self, data, setting):
        """``(accuracy, training seconds)`` of ``setting`` fitted on the search rows and
        scored on the validation rows."""
        seconds, model = timed(self.fit, data, setting)
        return self.accuracy(model, data), seconds

    def curve(self, data, setting, *, max_seconds, max_points):
        """Fit ``setting`` from scratch at each budget up to its own; a point each
        (budget, training seconds, test accuracy). Stops at a fit that converged, or
        before a fit whose time, scaled from the last fit's, would take the training time
        of the curve past ``max_seconds`` (``capped``)."""
        last = setting.get(self.budget, self.default_budget())
        points, spent, capped, converged = [], 0.0, False, False
        for budget in budgets(last, self.first, self.factor):
            if points and (
                len(points) == max_points
                or spent + points[-1]["seconds"] * budget / points[-1]["budget"] > max_seconds
            ):
                capped = True
                break
            seconds, model = timed(self.fit, data, {**setting, self.budget: budget})
            spent += seconds
            used = self.used(model)
            points.append(
                {
                    "budget": budget,
                    "used": used,
                    "seconds": seconds,
                    "accuracy": self.accuracy(model, data),
                }
            )
            if used is not None and used < budget:
                converged = True
                break
        return {"points": points, "capped": capped, "converged": converged}


class Sparcml(System):
    """``sparcml train --ranks P`` on the LIBSVM files; its metrics give the test accuracy
    after each epoch, and the seconds of loading and of training apart."""

    distribution = "sparcml"
    budget = "epochs"
    candidates = ({"batch-size": 64}, {"alpha": 1e-5}, {"alpha": 1e-5, "batch-size": 64})

    def __init__(self, ranks):
        self.ranks = ranks
        self.name = f"sparcml, {ranks} rank{'s' if ranks > 1 else ''}"

    def missing(self):
        return None

    def version(self):
        return sparcml_version()

    def load(self, train, test, n_features):
        return train, test, n_features  # every run reads the files itself

    def _train(self, data, setting):
        """Run ``mpiexec -n P sparcml train``; its metrics, and its seconds end to end."""
        from sparcml_apps import _mpiexec

        train, test, n_features = data
        options = [item for key, value in setting.items() for item in (f"--{key}", value)]
        with tempfile.TemporaryDirectory(prefix="sparcml-peers-") as folder:
            metrics = Path(folder) / "metrics.json"
            arguments = [
                "train", "--dataset", train, "--test", test, "--n-features", n_features,
                "--loss", "log_loss", "--model", Path(folder) / "model.joblib",
                "--metrics", metrics, *options,
            ]  # fmt: skip
            seconds, done = timed(
                lambda: _mpiexec.run_module(
                    self.ranks, "sparcml_apps.cli.main", arguments, timeout=TIMEOUT
                )
            )
            if done.returncode != 0:
                raise RuntimeError(f"sparcml train failed:\n{done.stdout}{done.stderr}")
            return json.loads(metrics.read_text()), seconds

    def validate(self, data, setting):
        metrics, _ = self._train(data, setting)
        return metrics["test_accuracy"], metrics["train_seconds"]

    def curve(self, data, setting, *, max_seconds, max_points):
        metrics, seconds = self._train(data, setting)
        epochs = metrics["per_epoch"]
        spent = metrics["train_seconds"] - sum(e["seconds"] for e in epochs)  # before epoch 1
        points = []
        for e in epochs:
            spent += e["seconds"]
            points.append(
                {
                    "budget": e["epoch"],
                    "used": None,
                    "seconds": spent,
                    "accuracy": e["test_accuracy"],
                }
            )
        return {
            "points": points,
            "capped": False,
            "converged": False,
            "load_seconds": metrics["load_seconds"],
            "start_seconds": seconds - metrics["load_seconds"] - metrics["fit_seconds"],
        }


def sparcml_version():
    """sparcml's version and the commit of this checkout, where it is one."""
    version = importlib.metadata.version("sparcml")
    try:
        commit = subprocess.run(
            ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return version
    return f"{version} ({commit})"


class _Estimator(System):
    """A scikit-learn-style estimator on the CSR rows of scikit-learn's reader
    (``load_svmlight_file``); ``index_dtype`` converts their indices."""

    index_dtype = None

    def make(self, setting):
        raise NotImplementedError

    def load(self, train, test, n_features):
        from sklearn.datasets import load_svmlight_file

        data = []
        for path in (train, test):
            X, y = load_svmlight_file(str(path), n_features=n_features, zero_based=False)
            if self.index_dtype is not None:
                X.indices = X.indices.astype(self.index_dtype)
                X.indptr = X.indptr.astype(self.index_dtype)
            data += [X, y]
        return data

    def default_budget(self):
        return self.make({}).get_params()[self.budget]

    def fit(self, data, setting):
        return self.make(setting).fit(data[0], data[1])

    def used(self, model):
        return int(np.max(model.n_iter_))

    def accuracy(self, model, data):
        return float(np.mean(model.predict(data[2]) == data[3]))


class SGD(_Estimator):
    name = "scikit-learn SGDClassifier"
    distribution, budget = "scikit-learn", "max_iter"
    imports = ("sklearn.linear_model", "sklearn.datasets")
    index_dtype = np.int32  # the reader's 64-bit indices are refused by the estimator
    candidates = (
        {"average": True},
        {"alpha": 1e-5, "average": True},
        {"alpha": 1e-6, "average": True},
    )
    fixed = {"loss": "log_loss", "random_state": 0}

    def make(self, setting):
        from sklearn.linear_model import SGDClassifier

        return SGDClassifier(**{**self.fixed, **setting})


class SparcmlJobs(_Estimator):
    """``SparseSGDClassifier(n_jobs=2)`` in this process, as a notebook user runs it: the
    rows read by sparcml's reader (``load_svmlight``), the pool of two workers started
    with the system (a first small fit) and used by every fit after."""

    name = "sparcml, n_jobs=2"
    distribution, budget = "sparcml", "max_iter"
    imports = ("sparcml_apps.estimators", "sparcml_apps.datasets")
    candidates = ({"batch_size": 64}, {"alpha": 1e-5}, {"alpha": 1e-5, "batch_size": 64})
    fixed = {"loss": "log_loss", "random_state": 0, "n_jobs": 2}

    def version(self):
        return sparcml_version()

    def start(self):
        super().start()
        X, y = np.eye(4), np.array([0, 1, 0, 1])
        self.make({"max_iter": 1, "tol": None}).fit(X, y)

    def stop(self):
        from sparcml_apps import jobs

        jobs.close()

    def load(self, train, test, n_features):
        from sparcml_apps.datasets import load_svmlight

        return [part for path in (train, test) for part in load_svmlight(path, n_features)]

    def make(self, setting):
        from sparcml_apps import SparseSGDClassifier

        return SparseSGDClassifier(**{**self.fixed, **setting})


class Liblinear(_Estimator):
    """LIBLINEAR's L2-regularized logistic regression (trust-region Newton) through
    scikit-learn, which bundles LIBLINEAR."""

    name = "LIBLINEAR (scikit-learn LogisticRegression)"
    distribution, budget = "scikit-learn", "max_iter"
    imports = ("sklearn.linear_model", "sklearn.datasets")
    index_dtype = np.int32  # the reader's 64-bit indices are refused by the solver
    candidates = ({"C": 0.1}, {"C": 0.3})
    fixed = {"solver": "liblinear"}

    def make(self, setting):
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(**{**self.fixed, **setting})


class SnapML(_Estimator):
    name = "Snap ML LogisticRegression"
    distribution, budget = "snapml", "max_iter"
    imports = ("snapml", "sklearn.datasets")
    candidates = (
        {"fit_intercept": True, "n_jobs": 2},
        {"fit_intercept": True, "n_jobs": 2, "regularizer": 10.0},
        {"fit_intercept": True, "n_jobs": 2, "regularizer": 100.0},
    )
    fixed = {"random_state": 0}

    def make(self, setting):
        from snapml import LogisticRegression

        return LogisticRegression(**{**self.fixed, **setting})


class VowpalWabbit(System):
    """The ``vowpalwabbit`` package's own driver: ``Workspace`` with ``-d``, ``--passes``
    and a cache file; loading is making the caches of the training and test files."""

    name = "Vowpal Wabbit"
    distribution = "vowpalwabbit"
    imports = ("vowpalwabbit",)
    budget = "passes"
    candidates = (
        {"bit_precision": 24},
        {"bit_precision": 24, "passes": 3},
        {"bit_precision": 24, "passes": 10},
    )
    fixed = {"loss_function": "logistic"}

    def start(self):
        super().start()
        from vowpalwabbit import Workspace

        self._workspace = Workspace
        self._folder = Path(tempfile.mkdtemp(prefix="sparcml-peers-vw-"))

    def stop(self):
        shutil.rmtree(self._folder, ignore_errors=True)

    def _run(self, *arguments, **options):
        words = [*arguments, "--quiet"]
        for key, value in options.items():
            words += [f"--{key}", str(value)]
        self._workspace(" ".join(words)).finish()

    def load(self, train, test, n_features):
        data = {}
        for role, path in (("train", train), ("test", test)):
            cache = self._folder / f"{Path(path).stem}.cache"
            cache.unlink(missing_ok=True)
            self._run("--noop", data=vw(path), cache_file=cache)
            data[role] = (vw(path), cache)
        with open(vw(test)) as lines:
            data["labels"] = np.array([float(line.partition(" ")[0]) for line in lines])
        return data

    def default_budget(self):
        return 1  # vw --help: --passes (default 1)

    def fit(self, data, setting):
        path, cache = data["train"]
        model = self._folder / "model.vw"
        self._run(data=path, cache_file=cache, final_regressor=model, **self.fixed, **setting)
        return model

    def accuracy(self, model, data):
        path, cache = data["test"]
        predictions = self._folder / "predictions.txt"
        self._run(
            "-t", data=path, cache_file=cache, initial_regressor=model, predictions=predictions
        )
        margins = np.loadtxt(predictions, ndmin=1)
        return float(np.mean(np.where(margins > 0, 1.0, -1.0) == data["labels"]))


class Spark(System):
    """Spark MLlib on ``local[2]``: LIBSVM files read into cached DataFrames (labels
    mapped to 0 and 1, as MLlib wants) are the load; the session's start is timed apart."""

    distribution = "pyspark"
    imports = ("pyspark.ml.classification", "pyspark.sql")
    budget = "maxIter"
    first, factor = 3, 3
    candidates = ({"maxIter": 20}, {"maxIter": 20, "regParam": 1e-4})

    def __init__(self, estimator):
        self.estimator = estimator
        self.name = f"Spark MLlib {estimator}"

    def missing(self):
        return super().missing() or _java_missing()

    def start(self):
        super().start()
        from pyspark.sql import SparkSession

        self._spark = (
            SparkSession.builder.master("local[2]")
            .appName("sparcml bench peers")
            .config("spark.driver.memory", SPARK_MEMORY)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        self._spark.sparkContext.setLogLevel("ERROR")

    def stop(self):
        self._spark.stop()

    def load(self, train, test, n_features):
        from pyspark.sql import functions

        frames = []
        for path in (train, test):
            frame = self._spark.read.format("libsvm").option("numFeatures", n_features)
            frame = frame.load(str(path))
            frame = frame.withColumn("label", (functions.col("label") > 0).cast("double"))
            frame = frame.cache()
            frame.count()
            frames.append(frame)
        return frames

    def release(self, data):
        for frame in data:
            frame.unpersist()

    def make(self, setting):
        from pyspark.ml import classification

        return getattr(classification, self.estimator)(**setting)

    def default_budget(self):
        return self.make({}).getOrDefault(self.budget)

    def fit(self, data, setting):
        return self.make(setting).fit(data[0])

    def used(self, model):
        summary = model.summary  # LinearSVC's is a method
        return (summary() if callable(summary) else summary).totalIterations

    def accuracy(self, model, data):
        scored = model.transform(data[1])
        return float(scored.selectExpr("avg(cast(prediction = label as double))").first()[0])


def _java_missing():
    """Why Spark 4 has no Java runtime here (it needs Java 17 or later), or None."""
    java = shutil.which("java")
    if java is None:
        return "no Java runtime (make peers installs openjdk-17-jre-headless)"
    done = subprocess.run([java, "-version"], capture_output=True, text=True)
    found = re.search(r'version "(\d+)', done.stderr)
    if found is None or int(found.group(1)) < 17:
        return f"Spark needs Java 17 or later; {java} is {done.stderr.splitlines()[:1]}"
    return None


SYSTEMS = {
    system.name: system
    for system in (
        Sparcml(1),
        Sparcml(2),
        SparcmlJobs(),
        SGD(),
        Liblinear(),
        VowpalWabbit(),
        Spark("LogisticRegression"),
        Spark("LinearSVC"),
        SnapML(),
    )
}
"""Every system, by name, in the tables' order."""
