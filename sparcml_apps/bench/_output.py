"""Where the benchmarks put what they measured: one folder of JSON, Markdown and PNG."""

import json
import tempfile
from pathlib import Path

from .._paths import option, writable_folder


def apply_quick(args, settings):
    """With ``--quick``, replace the arguments named in ``settings`` by its values."""
    if args.quick:
        for key, value in settings.items():
            setattr(args, key, value)


def add_out_argument(parser):
    parser.add_argument(
        "--out",
        type=option(writable_folder),
        default=Path("results"),
        help="folder of the JSON records, Markdown table and plots (default: results)",
    )


def add_dir_argument(parser, what):
    """``--dir``: where a benchmark writes ``what``, kept for the next run."""
    parser.add_argument(
        "--dir",
        type=option(writable_folder),
        help=f"where to write {what}; those made before are reused (default: a temporary "
        "directory, removed at the end)",
    )


def in_folder(args, measure, prefix):
    """``measure(args, folder)`` in ``args.dir`` (made if missing), else in a temporary
    folder removed at the end."""
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        return measure(args, args.dir)
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        return measure(args, Path(folder))


def write(out, name, records, text):
    """Write ``records`` to ``out/name.json`` and ``text`` to ``out/name.md``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(records, indent=1) + "\n")
    (out / f"{name}.md").write_text(text + "\n")
    print(f"\nwrote {out / name}.json and {out / name}.md")


def draw(plot, records, path, *args):
    """Draw ``plot`` (a name in :mod:`.plots`) of ``records`` to ``path``, when matplotlib
    (the ``bench`` extra) is installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        print(f"no plot {Path(path).name}: {exc} (pip install 'sparcml[bench]')")
        return
    from . import plots

    getattr(plots, plot)(records, path, *args)
    print(f"drew {path}")


def slug(text):
    """``text`` as a file name: every character but letters, digits, ``-`` and ``.``
    becomes ``-``."""
    return "".join(c if c.isalnum() or c in "-." else "-" for c in text)
