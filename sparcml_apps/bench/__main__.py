import argparse
import importlib

from .._paths import OptionError
from . import BENCHMARKS


def main(argv=None, prog="python -m sparcml_apps.bench"):
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    commands = parser.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name, module_name in BENCHMARKS.items():
        module = importlib.import_module(module_name)
        sub = commands.add_parser(name, help=module.__doc__.splitlines()[0])
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except OptionError as exc:  # found before any work: a usage error, in one line
        parser.exit(2, f"{parser.prog} {args.benchmark}: error: {exc}\n")


if __name__ == "__main__":
    raise SystemExit(main())
