"""The ``prme`` command line.

``prme main`` runs the project's main Dagster job on the embedded default: a DuckDB file
(``PRME_STORE_URL``, default ``.prme/prme.duckdb``) and a local Dagster instance under
``DAGSTER_HOME`` (default ``.dagster_home``, seeded with the repository's ``dagster.yaml``).
No server is started. It reads the LoCoMo file given by ``--data``, else ``PRME_LOCOMO_PATH``,
else ``../shared/data/locomo/locomo-dev.json`` from the working directory or the checkout
(``prme_assets.demo.data``). ``prme locomo-benchmark`` runs ``benchmarks.locomo_learning`` from a
checkout (its own store and temporary Dagster instance; see ``--help``). The CLI lives with the orchestration layer; ``prme_core`` never imports
Dagster.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from prme_core.storage.url import STORE_URL_ENV


def _repo_file(name: str) -> Path | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):  # the checkout of an editable install
        if (base / name).is_file():
            return base / name
    return None


def prepare_dagster_home() -> Path:
    """Use ``DAGSTER_HOME`` or ``./.dagster_home``; seed it with the repository's dagster.yaml."""
    home = Path(os.environ.get("DAGSTER_HOME") or Path.cwd() / ".dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    target = home / "dagster.yaml"
    source = _repo_file("dagster.yaml")
    if source is not None and (not target.exists() or target.read_bytes() != source.read_bytes()):
        if source.resolve() != target.resolve():
            shutil.copyfile(source, target)
    return home


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _quiet_dagster_warnings() -> None:
    """Dagster flags the partitioned checks and data versions we rely on as preview/beta."""
    import warnings

    import dagster as dg

    for category in (dg.PreviewWarning, dg.BetaWarning):
        warnings.filterwarnings("ignore", category=category)


def cmd_main(args: argparse.Namespace) -> int:
    from prme_assets.demo.data import find_locomo_data
    from prme_core.datasets.locomo import LocomoDataNotFound

    _quiet_dagster_warnings()
    try:
        data = find_locomo_data(args.data)
    except LocomoDataNotFound as exc:
        _say(str(exc))
        return 2
    if args.store:
        os.environ[STORE_URL_ENV] = args.store
    home = prepare_dagster_home()
    _say(f"Dagster instance: {home} · store: {os.environ.get(STORE_URL_ENV, 'duckdb:///.prme/prme.duckdb')}")
    from prme_assets.demo.main_job import run_main

    return run_main(data_path=data, conversations=args.conversation or None, say=_say)


def _benchmark_module():
    """``benchmarks.locomo_learning`` of the checkout (benchmarks are not part of the package)."""
    root = Path(__file__).resolve().parents[1]
    if (root / "benchmarks" / "locomo_learning.py").is_file() and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        from benchmarks import locomo_learning
    except ImportError as exc:
        raise SystemExit(f"prme locomo-benchmark needs a checkout of the repository (benchmarks/): {exc}") from None
    return locomo_learning


def cmd_locomo_benchmark(args: argparse.Namespace) -> int:
    _quiet_dagster_warnings()
    return _benchmark_module().main(args.benchmark_args, prog="prme locomo-benchmark")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prme", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    main = sub.add_parser("main", help="run the main job on the embedded default (no server)")
    main.add_argument("--data", default=None,
                      help="LoCoMo-format JSON (default: PRME_LOCOMO_PATH, else ../shared/data/locomo/locomo-dev.json "
                           "from the working directory, then from the checkout)")
    main.add_argument("--store", default=None, help="store URL (default: PRME_STORE_URL or duckdb:///.prme/prme.duckdb)")
    main.add_argument("--conversation", action="append", help="limit to these sample ids (repeatable)")
    main.set_defaults(func=cmd_main)
    bench = sub.add_parser("locomo-benchmark", add_help=False,
                           help="the LoCoMo learning benchmark (options: prme locomo-benchmark --help)")
    bench.set_defaults(func=cmd_locomo_benchmark)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.func is cmd_locomo_benchmark:
        args.benchmark_args = rest  # its own parser reads them (and answers --help)
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
