"""sparcml-datasets: list, inspect, download, verify and convert the LIBSVM benchmark files."""

import argparse
import sys
import warnings

from sparcml_apps import datasets
from sparcml_apps._paths import directory, option, readable_file
from sparcml_apps.datasets._cache import is_cache
from sparcml_apps.datasets._home import (
    DEFAULT_HOME,
    HOME_VARIABLE,
    MIRROR_VARIABLE,
    check_url,
    data_home,
    manifest_path,
)
from sparcml_apps.datasets._recorded import recorded


def build_parser():
    parser = argparse.ArgumentParser(prog="sparcml-datasets", description=__doc__)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-home",
        type=option(directory),
        metavar="DIR",
        help=f"where datasets are kept (default: ${HOME_VARIABLE}, else {DEFAULT_HOME})",
    )
    common.add_argument(
        "--catalog",
        type=option(readable_file),
        metavar="FILE",
        help="a catalogue TOML file to use (default: the one shipped with sparcml)",
    )
    mirror = argparse.ArgumentParser(add_help=False)
    mirror.add_argument(
        "--mirror",
        metavar="URL",
        help="base URL to fetch files from instead of the catalogue's: URL/<file name> "
        f"(default: ${MIRROR_VARIABLE}, else the LIBSVM site)",
    )
    force = argparse.ArgumentParser(add_help=False)
    force.add_argument(
        "--force",
        action="store_true",
        help="do it again; what is there stays until the new one is complete and verified "
        "(default: only once)",
    )
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument(
        "--quiet", action="store_true", help="no progress bars (default: shown on a terminal)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, summary, parents, function):
        sub = commands.add_parser(name, parents=parents, help=summary, description=summary)
        sub.set_defaults(run=function, parser=sub)
        return sub

    command("list", "table of the catalogue: shape, nonzeros, size, local state", [common], _list)
    sub = command("info", "everything known of one dataset", [common], _info)
    sub.add_argument("name", metavar="NAME", help="a dataset name, as in `list`")
    sub = command(
        "download",
        "download files, verified by checksum or, where none is published, by parsing them",
        [common, mirror, force, quiet],
        _download,
    )
    sub.add_argument("names", nargs="+", metavar="NAME", help="dataset names, as in `list`")
    sub = command(
        "verify",
        "check downloaded files against their checksums, or parse those without one",
        [common, quiet],
        _verify,
    )
    sub.add_argument("names", nargs="+", metavar="NAME", help="dataset names, as in `list`")
    sub = command(
        "forget",
        "forget the sha256 recorded at the first download of files with no published "
        "checksum: the next download is checked by parsing it and recorded anew",
        [common],
        _forget,
    )
    sub.add_argument("names", nargs="+", metavar="NAME", help="dataset names, as in `list`")
    sub = command(
        "convert",
        "convert to the memory-mappable CSR cache (downloading first if needed)",
        [common, mirror, force, quiet],
        _convert,
    )
    sub.add_argument("names", nargs="+", metavar="NAME", help="dataset names, as in `list`")
    sub.add_argument(
        "--no-download",
        dest="download",
        action="store_false",
        help="fail if the file is not downloaded yet (default: download it)",
    )
    sub = command("path", "print where a dataset's file (or CSR cache) is kept", [common], _path)
    sub.add_argument("name", metavar="NAME", help="a dataset name, as in `list`")
    sub.add_argument(
        "--cache", action="store_true", help="the CSR cache directory (default: the file)"
    )
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if getattr(args, "mirror", None):
        try:
            check_url(args.mirror, "--mirror")
        except ValueError as exc:
            args.parser.error(str(exc))
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            args.run(args)
        except KeyboardInterrupt:
            print(f"sparcml-datasets: interrupted; {_left(args)}", file=sys.stderr)
            return 130
        except (KeyError, ValueError, OSError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) else exc
            print(f"sparcml-datasets: error: {message}", file=sys.stderr)
            return 1
    return 0


def _left(args):
    """What an interrupt left in the data home."""
    parts = []
    for name in getattr(args, "names", []):
        try:
            file = datasets.dataset_path(name, data_home=args.data_home, catalog=args.catalog)
        except (KeyError, ValueError, OSError):
            continue
        part = file.with_name(file.name + ".part")
        if part.exists():
            parts.append(str(part))
    told = "nothing half-written was put in place"
    if parts:
        told += f"; the partial download {', '.join(parts)} resumes on the next run"
    return told


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"sparcml-datasets: warning: {message}", file=sys.stderr)


def _list(args):
    catalog = datasets.read_catalog(args.catalog)
    rows = [("name", "shape", "nnz", "size", "cached")]
    for entry in catalog:
        file = datasets.dataset_path(entry.name, data_home=args.data_home, catalog=catalog)
        cache = datasets.dataset_path(
            entry.name, data_home=args.data_home, cache=True, catalog=catalog
        )
        size = file.stat().st_size if file.exists() else entry.size
        state = "csr" if is_cache(cache) else "file" if file.exists() else "-"
        rows.append(
            (
                entry.name,
                f"{entry.n_samples:,} x {entry.n_features:,}",
                f"{entry.nnz:,}" if entry.nnz else "?",
                _bytes(size) if size else "?",
                state,
            )
        )
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _info(args):
    catalog = datasets.read_catalog(args.catalog)
    entry = catalog[args.name]
    file = datasets.dataset_path(entry.name, data_home=args.data_home, catalog=catalog)
    cache = datasets.dataset_path(entry.name, data_home=args.data_home, cache=True, catalog=catalog)
    checksum = ":".join(entry.checksum) if entry.checksum else "none published"
    sha256 = None if entry.checksum else recorded(data_home(args.data_home), entry.file)
    if sha256:
        checksum += (
            f"; recorded sha256:{sha256} in {manifest_path(data_home(args.data_home))} "
            f"(`sparcml-datasets forget {entry.name}` forgets it)"
        )
    fields = [
        ("name", entry.name),
        ("task", f"{entry.task} ({entry.split})"),
        ("url", datasets.dataset_url(entry.name, catalog=catalog)),
        ("compression", entry.compression + (f", member {entry.member}" if entry.member else "")),
        ("shape", f"{entry.n_samples:,} x {entry.n_features:,}"),
        ("nnz", f"{entry.nnz:,}" if entry.nnz else "unknown"),
        ("labels", ", ".join(f"{label:g}" for label in entry.labels)),
        ("checksum", checksum),
        ("file", f"{file}" + ("" if file.exists() else " (not downloaded)")),
        ("cache", f"{cache}" + ("" if is_cache(cache) else " (not converted)")),
        ("notes", entry.notes),
    ]
    for key, value in fields:
        print(f"{key + ':':13}{value}")


def _download(args):
    for name in args.names:
        path = datasets.download(
            name,
            data_home=args.data_home,
            mirror=args.mirror,
            force=args.force,
            progress=not args.quiet,
            catalog=args.catalog,
        )
        print(path)


def _verify(args):
    for name in args.names:
        digest = datasets.verify(
            name, data_home=args.data_home, progress=not args.quiet, catalog=args.catalog
        )
        print(f"{name}: {digest} ok")


def _forget(args):
    catalog = datasets.read_catalog(args.catalog)
    for name in args.names:
        entry = datasets.forget(name, data_home=args.data_home, catalog=catalog)
        if entry:
            print(
                f"{name}: forgot sha256 {entry['sha256']} (recorded from {entry['url']}); "
                "the next download is checked by parsing it and recorded anew"
            )
        elif catalog[name].checksum:
            print(f"{name}: nothing recorded; its checksum is published in the catalogue")
        else:
            print(f"{name}: nothing recorded")


def _convert(args):
    for name in args.names:
        path = datasets.convert(
            name,
            data_home=args.data_home,
            mirror=args.mirror,
            force=args.force,
            download=args.download,
            progress=not args.quiet,
            catalog=args.catalog,
        )
        print(path)


def _path(args):
    print(
        datasets.dataset_path(
            args.name, data_home=args.data_home, cache=args.cache, catalog=args.catalog
        )
    )


def _bytes(size):
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000


if __name__ == "__main__":
    raise SystemExit(main())
