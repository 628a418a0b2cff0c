"""The launch recipes in deploy/: the local ones run, the others are checked as files."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mpirun import MPI_ENV

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent


@pytest.mark.usefixtures("compiled_kernels")
def test_local_dask_mpi_recipe_trains_and_stops_its_cluster(tmp_path):
    environment = {**os.environ, **MPI_ENV, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    arguments = ["--rows", "6000", "--features", "50000", "--nnz-per-row", "40"]
    arguments += ["--epochs", "2", "--model", str(tmp_path / "m.joblib")]
    result = subprocess.run(
        [DEPLOY / "local" / "dask-mpi.sh", *arguments, "--metrics", str(tmp_path / "m.json")],
        capture_output=True, text=True, timeout=120, env={**environment, "WORKERS": "2"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    # the cluster listens on loopback only and speaks TLS
    assert "Dask scheduler at tls://127.0.0.1:" in result.stdout, result.stdout
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["mode"] == "dask" and metrics["ranks"] == 2 and metrics["epochs"] == 2
    assert (tmp_path / "m.joblib").exists()


def test_mpijob_manifest():
    manifest = yaml.safe_load((DEPLOY / "kubernetes" / "mpijob.yaml").read_text())
    assert manifest["apiVersion"] == "kubeflow.org/v2beta1" and manifest["kind"] == "MPIJob"
    spec = manifest["spec"]
    launcher, worker = (spec["mpiReplicaSpecs"][role] for role in ("Launcher", "Worker"))
    assert launcher["replicas"] == 1
    command = launcher["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["mpirun", "-n"]
    # one rank a slot: scheduler, client and at least one Dask worker
    ranks = int(command[2])
    assert ranks == worker["replicas"] * spec["slotsPerWorker"] >= 3
    at = command.index("sparcml")
    assert command[at : at + 3] == ["sparcml", "train", "--dask"]
    images = {
        container["image"]
        for role in (launcher, worker)
        for container in role["template"]["spec"]["containers"]
    }
    assert len(images) == 1
    worker_spec = worker["template"]["spec"]
    assert worker_spec["containers"][0]["command"][0].endswith("sshd")
    claims = {
        volume["persistentVolumeClaim"]["claimName"]
        for role in (launcher, worker)
        for volume in role["template"]["spec"]["volumes"]
    }
    assert len(claims) == 1


def test_sbatch_script():
    """The file itself; tests/test_slurm.py runs it under Slurm."""
    path = DEPLOY / "slurm" / "train.sbatch"
    subprocess.run(["bash", "-n", path], check=True)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("#!")
    directives = dict(
        re.match(r"#SBATCH --([\w-]+)(?:=(\S+))?$", line).groups()
        for line in lines
        if line.startswith("#SBATCH")
    )
    assert int(directives["ntasks"]) >= 3 and directives["time"]
    # a requeued job appends to its output and can resume from its checkpoints
    assert "requeue" in directives and directives["open-mode"] == "append"
    # directives count only before the first command
    first_command = next(i for i, line in enumerate(lines) if line and not line.startswith("#"))
    assert max(i for i, line in enumerate(lines) if line.startswith("#SBATCH")) < first_command
    commands = [line for line in lines[first_command:] if not line.lstrip().startswith("#")]
    launch = " ".join(commands).replace("\\", " ")
    words = shlex.split(launch[launch.index("mpiexec") :])
    assert words[:3] == ["mpiexec", "-n", "$SLURM_NTASKS"]
    assert words[words.index("sparcml") + 1] == "train" and words[-1] == "$@"


def dockerfile_instructions(path):
    text = re.sub(r"\\\n", " ", path.read_text())
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
        for line in (raw.strip() for raw in text.splitlines())
        if line and not line.startswith("#")
    ]


def test_dockerfile():
    instructions = dockerfile_instructions(DEPLOY / "container" / "Dockerfile")
    known = {"FROM", "RUN", "ENV", "WORKDIR", "COPY", "CMD", "ENTRYPOINT", "ARG", "LABEL"}
    assert {kind for kind, _ in instructions} <= known
    kind, image = instructions[0]
    assert kind == "FROM"
    version = re.match(r"python:(\d+)\.(\d+)", image)
    requires = re.search(
        r'requires-python = ">=(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text()
    )
    wanted = tuple(map(int, requires.groups()))
    assert version and tuple(map(int, version.groups())) >= wanted
    for kind, argument in instructions:
        if kind == "COPY":
            *sources, _ = argument.split()
            for source in sources:
                assert (ROOT / source).exists(), source
    runs = " ".join(argument for kind, argument in instructions if kind == "RUN")
    assert "pip install ." in runs and "mpiexec" in runs
    command = dict(instructions)["CMD"]
    assert json.loads(command)[0] == "sparcml"


def test_deploy_readme_covers_every_recipe():
    readme = (DEPLOY / "README.md").read_text()
    for path in DEPLOY.rglob("*"):
        if path.is_file() and path.name != "README.md":
            assert str(path.relative_to(DEPLOY)) in readme, path
