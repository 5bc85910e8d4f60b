"""The ``prme`` command line.

``prme main`` checks every input first (store URL, data file, the Dagster instance's store, the
store itself), then runs the project's main Dagster job — on the generated sample
(``prme_core.datasets.sample``), or on a LoCoMo file with ``--data``/``--locomo`` — on the
embedded default: a DuckDB file (``PRME_STORE_URL``, default ``.prme/prme.duckdb``) and a local
Dagster instance under ``DAGSTER_HOME`` (default ``.dagster_home``, bound to one store by
``prme_store.json``). Its ``dagster.yaml`` is the operator's and is never replaced; a home
without one gets the packaged default (``prme_assets/defaults/dagster.yaml``). No server is started. ``prme status`` reads the
same store and instance and prints each partition's active profile and last decision.
``prme locomo-benchmark`` runs ``benchmarks.locomo_learning`` from a checkout, ``prme
scale-benchmark`` ``benchmarks.scale``.

Errors print one line to stderr (``--debug`` or ``PRME_DEBUG=1`` adds the traceback) and exit 2
for bad input, 1 when a run, the store or the server failed (an unreachable PostgreSQL, a port in
use), 130 on Ctrl-C or SIGTERM. Only argparse and the standard library load before a subcommand
runs, so ``prme --help`` answers at once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

STORE_URL_ENV = "PRME_STORE_URL"
"""= ``prme_core.storage.url.STORE_URL_ENV``, repeated so that ``--help`` imports nothing."""
DEFAULT_STORE_URL = "duckdb:///.prme/prme.duckdb"
DEBUG_ENV = "PRME_DEBUG"
STORE_MARKER = "prme_store.json"
"""In ``DAGSTER_HOME``: which store the instance's runs, partitions and checks belong to."""
INSTANCE_STATE = ("history", "storage", "schedules", "logs", ".logs_queue", ".telemetry", ".nux", STORE_MARKER)
"""What ``--reset`` removes from a local instance folder (its SQLite history; never dagster.yaml)."""
BAD_INPUT_EXIT, FAILED_EXIT = 2, 1

DESCRIPTION = """\
PRME Learning: a memory engine whose ranking learns per owner and scope from
explicit feedback, through evaluated, versioned, reversible ranking profiles,
with the learning loop run as Dagster assets."""

EPILOG = """\
exit codes:
  0    done (a gate that says "no" is an outcome, shown in the table)
  1    a learning run, the store or the server failed (the message names the
       partition, the store's host:port or the port in use)
  2    bad input (the message names the value and how to fix it)
  130  stopped by Ctrl-C or SIGTERM (the runs in flight are canceled; rerun to continue)

environment:
  PRME_STORE_URL    duckdb:///path or postgresql://user@host:5432/db
                    (default duckdb:///.prme/prme.duckdb)
  PRME_LOCOMO_PATH  the LoCoMo file prme main --locomo reads
  PRME_PROGRESS     1: progress bars on stderr even when it is no terminal; 0: none
  DAGSTER_HOME      the Dagster instance folder (default ./.dagster_home)
  PRME_API_KEY      the API key prme mcp serves (its owner and scopes)
  PRME_DEBUG=1      print tracebacks with errors (same as --debug)"""

MAIN_HELP = """\
Load memories, judge real retrievals, register holdout questions, learn every
(owner, scope set) partition through its gates and print what each one decided,
its NDCG gain and interval, and what would change it. Every input is checked
before any work starts.

data:
  (default)     a small sample generated from a seed (prme_core.datasets.sample):
                three owners, one whose consistent judgments activate a profile, one
                with too few judgments, one whose judgments disagree. Runs anywhere.
  --data PATH   a LoCoMo-format JSON file: real conversations, one owner each.
  --locomo      the LoCoMo file at PRME_LOCOMO_PATH, else the development file
                ../shared/data/locomo/locomo-dev.json (from the working directory,
                then from the checkout).
  LoCoMo: Maharana et al., "Evaluating Very Long-Term Conversational Memory of
  LLM Agents", ACL 2024; licensed CC BY-NC 4.0 (non-commercial use). It is not
  shipped with PRME: download it yourself."""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("prme-learning")
    except PackageNotFoundError:  # a checkout on sys.path without an install
        from prme_core import __version__

        return __version__


# --- errors and exit codes --------------------------------------------------------------------


class InstanceServesAnotherStore(Exception):
    """``DAGSTER_HOME`` records another store: mixing two stores' histories would mislead."""


class CannotListen(Exception):
    """``prme serve`` cannot listen where asked: the port is in use, privileged, or the host is not
    an interface of this machine. Said before the engine opens the store."""


def _exit_code(exc: BaseException) -> int:
    from prme_core.errors import (
        ApiKeyNotFound,
        CanonicalFormError,
        InvalidInput,
        Unauthenticated,
        UnsupportedOperation,
    )

    bad_input = (InvalidInput, CanonicalFormError, UnsupportedOperation, Unauthenticated, ApiKeyNotFound)
    if isinstance(exc, (*bad_input, InstanceServesAnotherStore)):
        return BAD_INPUT_EXIT
    return FAILED_EXIT


def _one_line(exc: BaseException) -> str:
    from prme_core.errors import PrmeError

    text = " ".join(str(exc).split())
    if isinstance(exc, (PrmeError, InstanceServesAnotherStore, CannotListen)):
        return text or type(exc).__name__
    return f"unexpected {type(exc).__name__}: {text} (rerun with --debug or {DEBUG_ENV}=1 for the traceback)"


def _debug_from_env() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def run_guarded(
    command: Callable[[Any], int | None],
    *,
    prog: str,
    debug: bool | None = None,
    stopped: str = "the runs in flight were canceled; rerun to continue",
) -> int:
    """Run ``command(stop)`` under ``StopSignals``; map what it raises to one line and an exit code."""
    from prme_assets.interrupts import (
        INTERRUPTED_EXIT,
        Interrupted,
        StopSignals,
        signal_name,
    )

    debug = _debug_from_env() if debug is None else debug
    stop = StopSignals()
    try:
        with stop:
            return int(command(stop) or 0)
    except SystemExit:
        raise
    except BaseException as exc:  # the command's one line; --debug keeps the traceback
        # Dagster's own interrupt error derives from BaseException, like KeyboardInterrupt
        interrupted = isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "DagsterExecutionInterruptedError"
        if not interrupted and not isinstance(exc, Exception):
            raise
        previous = _ignore_sigint()  # a second Ctrl-C now must not turn the one line into a traceback
        try:
            if debug:
                traceback.print_exc()
            if interrupted:
                name = exc.signal_name if isinstance(exc, Interrupted) else signal_name(stop.received)
                _say(f"{prog}: stopped by {name}; {stopped}")
                return INTERRUPTED_EXIT
            _say(f"{prog}: {_one_line(exc)}")
            return _exit_code(exc)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)


def _ignore_sigint() -> Any:
    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        return None


# --- the Dagster instance and its store ---------------------------------------------------------


DEFAULT_INSTANCE_CONFIG = "defaults/dagster.yaml"
"""The packaged default ``dagster.yaml`` (in ``prme_assets``): local SQLite storage, PRME's run limits."""


def prepare_dagster_home() -> Path:
    """Use ``DAGSTER_HOME`` or ``./.dagster_home``. An existing ``dagster.yaml`` there is the
    operator's and is used as it is; only a home without one gets the packaged default."""
    from importlib.resources import files

    home = Path(os.environ.get("DAGSTER_HOME") or Path.cwd() / ".dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    target = home / "dagster.yaml"
    if not target.exists():
        target.write_bytes(files("prme_assets").joinpath(DEFAULT_INSTANCE_CONFIG).read_bytes())
    return home


def recorded_store(home: Path) -> str | None:
    """The store identity an instance folder records in its marker (None: it records none)."""
    marker = home / STORE_MARKER
    if not marker.is_file():
        return None
    try:
        return json.loads(marker.read_text("utf-8")).get("store")
    except (ValueError, AttributeError):
        return "(unreadable marker)"


def check_instance_store(home: Path, identity: str, *, reset: bool) -> None:
    """Refuse an instance that served another store (unless ``reset``: then clear its history)."""
    recorded = recorded_store(home)
    if reset:
        config = home / "dagster.yaml"
        if _storage_in_postgres(config):
            raise InstanceServesAnotherStore(
                f"--reset clears a local instance's SQLite history, but {config} keeps it in PostgreSQL; "
                "use another DAGSTER_HOME for this store instead"
            )
        for name in INSTANCE_STATE:
            path = home / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        return
    if recorded is not None and recorded != identity:
        raise InstanceServesAnotherStore(
            f"the Dagster instance {home} holds the runs and partitions of the store {recorded}, not of {identity}; "
            "use another DAGSTER_HOME for this store, or pass --reset to clear this instance's history"
        )


PROBE_TIMEOUT_S = 5
"""How long ``prme main`` waits for a PostgreSQL server's port to accept a TCP connection."""


def _postgres_address(dsn: str) -> tuple[str, int] | None:
    """The one TCP host and port a libpq URL or DSN connects to; None for a Unix socket, several
    hosts, or a DSN libpq would refuse anyway (the connection itself then says why)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(dsn)
    except psycopg.Error:
        return None
    host = str(info.get("hostaddr") or info.get("host") or os.environ.get("PGHOST") or "")
    port = str(info.get("port") or os.environ.get("PGPORT") or "5432")
    if not host or host.startswith("/") or "," in host or not port.isdigit():
        return None
    return host, int(port)


def check_postgres_reachable(dsn: str, where: str, fix: str) -> None:
    """Refuse a PostgreSQL address where nothing accepts a connection, naming host:port.

    ``where`` says whose address it is, ``fix`` what to check. A wrong port must read as what
    it is, never as an instance that served another store (which ``--reset`` would clear).
    """
    from prme_core.errors import StoreUnavailable

    address = _postgres_address(dsn)
    if address is None:
        return
    host, port = address
    try:
        socket.create_connection(address, timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise StoreUnavailable(
            f"the PostgreSQL server is unreachable at {host}:{port} ({where}): {reason}; "
            f"{fix} and that PostgreSQL runs there and accepts TCP connections"
        ) from None


def _env_value(value: Any) -> Any:
    """A dagster.yaml value, with ``{env: NAME}`` read from the environment."""
    if isinstance(value, dict) and set(value) == {"env"}:
        return os.environ.get(str(value["env"]))
    return value


_STORAGE_KEYS = ("storage", "run_storage", "event_log_storage", "schedule_storage")
"""The sections of a dagster.yaml that say where the instance keeps its history."""


def _instance_config(config: Path) -> dict[str, Any] | None:
    """A dagster.yaml's contents, or None when it is missing, not YAML or not a mapping."""
    if not config.is_file():
        return None
    import yaml  # a Dagster dependency

    try:
        conf = yaml.safe_load(config.read_text("utf-8")) or {}
    except yaml.YAMLError:
        return None
    return conf if isinstance(conf, dict) else None


def instance_postgres_dsn(config: Path) -> str | None:
    """The libpq DSN of a dagster.yaml's PostgreSQL storage (``postgres_url`` or ``postgres_db``),
    or None when it keeps its history elsewhere or cannot be read."""
    conf = _instance_config(config)
    if conf is None:
        return None
    for key in _STORAGE_KEYS:
        section = conf.get(key)
        if not isinstance(section, dict):
            continue
        postgres = section.get("postgres") if key == "storage" else section.get("config")
        if not isinstance(postgres, dict):
            continue
        url = _env_value(postgres.get("postgres_url"))
        if isinstance(url, str) and url:
            return url
        db = postgres.get("postgres_db")
        if isinstance(db, dict):
            host, port = _env_value(db.get("hostname")), _env_value(db.get("port"))
            if host:
                return f"host={host} port={port or 5432}"
    return None


def _check_servers_reachable(home: Path, parsed: Any, source: str, *, compared: bool) -> None:
    """The PostgreSQL servers ``prme main`` needs answer: the instance's (if its dagster.yaml keeps
    its history there), and the store's when the instance's history is about to be compared with it
    or cleared: a mistyped port must not read as another store. Otherwise opening the store says
    why it cannot connect, with the database and user."""
    config = home / "dagster.yaml"
    instance_dsn = instance_postgres_dsn(config)
    if instance_dsn is not None:
        check_postgres_reachable(instance_dsn, f"the Dagster instance's storage in {config}", f"check {config}")
    if compared and parsed.backend == "postgresql":
        check_postgres_reachable(parsed.target, f"the store URL from {source}", "check the host and port in it")


def _storage_in_postgres(config: Path) -> bool:
    """Whether an instance's dagster.yaml keeps its history in PostgreSQL (``--reset`` cannot clear it)."""
    conf = _instance_config(config)
    return conf is not None and any("postgres" in json.dumps(conf.get(k) or {}).lower() for k in _STORAGE_KEYS)


def record_instance_store(home: Path, identity: str, redacted: str) -> None:
    (home / STORE_MARKER).write_text(json.dumps({"store": identity, "url": redacted}, indent=1) + "\n", "utf-8")


def _redact(url: str) -> str:
    return re.sub(r"(://[^/@:]*):[^/@]*@", r"\1:***@", url)


# --- prme main --------------------------------------------------------------------------------


def _quiet_dagster_warnings() -> None:
    """Dagster flags the partitioned checks and data versions we rely on as preview/beta, and
    warns about the checks that a declined stage skipped (the outcome table says why)."""
    import logging
    import warnings

    import dagster as dg

    for category in (dg.PreviewWarning, dg.BetaWarning):
        warnings.filterwarnings("ignore", category=category)
    # "blocking check emitted no result …": the checks a declined stage skipped (the table says why)
    logging.getLogger("dagster._core.execution.plan.active").setLevel(logging.ERROR)


def _main_data(args: argparse.Namespace) -> Path | None:
    """The LoCoMo file ``prme main`` reads (``--data``, or ``--locomo``/``--conversation``: the
    conventional places), or None for the generated sample."""
    from prme_assets.demo.data import find_locomo_data
    from prme_core.datasets.locomo import read_locomo

    if not (args.data or args.locomo or args.conversation):
        return None
    data = find_locomo_data(args.data)
    read_locomo(data, args.conversation or None)  # a malformed file or unknown id names itself
    return data


def cmd_main(args: argparse.Namespace, stop: Any) -> int:
    from prme_core.errors import InvalidInput
    from prme_core.storage import open_store
    from prme_core.storage.url import parse_store_url

    # 1. every input, cheapest first: a bad URL, data file or instance stops before any store is touched
    source = "--store" if args.store else (STORE_URL_ENV if os.environ.get(STORE_URL_ENV) else "the default")
    url = args.store or os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL
    try:
        parsed = parse_store_url(url)
    except InvalidInput as exc:
        detail = str(exc).removeprefix(f"{exc.field}: ")
        raise InvalidInput(f"store URL {_redact(url)!r} (from {source})", detail) from None
    data = _main_data(args)
    home = prepare_dagster_home()
    identity = parsed.identity()
    _check_servers_reachable(home, parsed, source, compared=args.reset or recorded_store(home) not in (None, identity))
    check_instance_store(home, identity, reset=args.reset)
    store = open_store(url)  # reachable, not locked, migrated (a PostgreSQL refusal arrives at once)
    store.close()
    record_instance_store(home, identity, parsed.redacted())
    os.environ[STORE_URL_ENV] = url

    # 2. the work
    _quiet_dagster_warnings()
    from prme_assets.demo.main_job import run_main
    from prme_assets.demo.progress import Progress, wanted

    _say(f"Dagster instance: {home} · store: {parsed.redacted()}")
    progress = Progress(wanted(args.progress))
    run_main(data_path=data, conversations=args.conversation or None, say=_say, stop=stop, progress=progress)
    return 0


# --- prme status -------------------------------------------------------------------------------


def _status_home() -> Path:
    """The Dagster instance ``prme status`` reads: it must exist (``prme status`` creates nothing)."""
    from prme_core.errors import InvalidInput

    home = Path(os.environ.get("DAGSTER_HOME") or Path.cwd() / ".dagster_home").resolve()
    if not (home / "dagster.yaml").is_file():
        where = "DAGSTER_HOME" if os.environ.get("DAGSTER_HOME") else "the default ./.dagster_home"
        raise InvalidInput(
            "DAGSTER_HOME", f"no Dagster instance at {home} ({where}); run prme main first, or set DAGSTER_HOME"
        )
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def cmd_status(args: argparse.Namespace, stop: Any) -> int:
    """Per partition: the active profile and since when, the last decision, what would change it."""
    from prme_core.storage.url import parse_store_url

    home = _status_home()
    url = args.store or os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL
    identity = parse_store_url(url).identity()
    recorded = recorded_store(home)
    if recorded is not None and recorded != identity:
        raise InstanceServesAnotherStore(
            f"the Dagster instance {home} holds the runs of the store {recorded}, not of {identity}; "
            "pass that store (--store or PRME_STORE_URL) or the DAGSTER_HOME of this one"
        )
    _quiet_dagster_warnings()
    import dagster as dg

    from prme_assets.demo.status import learning_targets, partition_status, render_status

    args.store = url
    with dg.DagsterInstance.get() as instance, _client(args, "stop the server, or read it over HTTP") as client:
        rows = [partition_status(instance, client, p) for p in learning_targets(instance)]
    print(render_status(rows))
    return 0


# --- prme locomo-benchmark ------------------------------------------------------------------------


def _benchmark_module(name: str = "locomo_learning", command: str = "locomo-benchmark"):
    """``benchmarks.<name>`` of the checkout (benchmarks are not part of the package)."""
    import importlib

    root = Path(__file__).resolve().parents[1]
    if (root / "benchmarks" / f"{name}.py").is_file() and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        return importlib.import_module(f"benchmarks.{name}")
    except ImportError as exc:
        from prme_core.errors import UnsupportedOperation

        raise UnsupportedOperation(f"prme {command} needs a checkout of the repository (benchmarks/): {exc}") from None


def cmd_locomo_benchmark(args: argparse.Namespace, stop: Any) -> int:
    _quiet_dagster_warnings()
    return _benchmark_module().main(args.benchmark_args, prog="prme locomo-benchmark", stop=stop)


# --- prme keys, prme serve, prme mcp (issue 18) ---------------------------------------------------

API_KEY_ENV = "PRME_API_KEY"
"""= ``prme_api.mcp.API_KEY_ENV``: the credential ``prme mcp`` serves with."""
_DURATION = re.compile(r"(\d+)([dhm])")
_DURATION_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def _expiry(text: str | None) -> Any:
    """``--expires``: an ISO 8601 time with a timezone, or a duration from now (90d, 12h, 30m)."""
    if text is None:
        return None
    from datetime import datetime, timedelta

    from prme_core.errors import InvalidInput
    from prme_core.types import utc_now

    match = _DURATION.fullmatch(text.strip())
    if match:
        return utc_now() + timedelta(**{_DURATION_UNITS[match.group(2)]: int(match.group(1))})
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            "--expires", f"{text!r} is neither a duration (90d, 12h, 30m) nor an ISO 8601 time"
        ) from None
    if value.tzinfo is None:
        raise InvalidInput("--expires", f"{text!r} has no timezone; write it like 2027-01-01T00:00:00Z")
    return value


def _scope_list(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [s.strip() for v in values for s in v.split(",") if s.strip()]


CLI_LOCK_TIMEOUT_S = 2
"""How long a key or MCP command waits for a DuckDB file another process holds (``prme serve``,
say) before it says so: the server keeps the file as long as it runs."""


def _store_url(args: argparse.Namespace) -> str:
    """The store URL of a key or MCP command: a DuckDB file is waited for only briefly."""
    from prme_core.storage.url import parse_store_url

    url = args.store or os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL
    parsed = parse_store_url(url)
    if parsed.backend == "duckdb" and "lock_timeout" not in parsed.options:
        url += f"{'&' if '?' in url else '?'}lock_timeout={CLI_LOCK_TIMEOUT_S}"
    return url


def _held(exc: Any, instead: str) -> Any:
    """A DuckDB file held by another process, said with the holder and what to do instead."""
    from prme_core.errors import StoreLocked

    holder = exc.holder or "another process"
    return StoreLocked(
        f"the DuckDB store is held by {holder} (a server keeps its file while it runs); {instead}, "
        "or stop the server, or put the store on PostgreSQL, where both run at once",
        holder=exc.holder,
    )


KEYS_OVER_HTTP = "manage keys over HTTP with an operator key (POST/GET /v1/keys, DELETE /v1/keys/{key_id})"
FORGET_OVER_HTTP = "delete over HTTP (DELETE /v1/memories/{id}; POST /v1/owner/forget with an operator key)"


def _client(args: argparse.Namespace, instead: str = KEYS_OVER_HTTP) -> Any:
    from prme_core.engine import MemoryClient
    from prme_core.errors import StoreLocked

    try:
        return MemoryClient(_store_url(args))
    except StoreLocked as exc:
        raise _held(exc, instead) from None


def cmd_keys_create(args: argparse.Namespace, stop: Any) -> int:
    with _client(args) as client:
        created = client.create_api_key(
            args.owner, scopes=_scope_list(args.scopes), expires_at=_expiry(args.expires), role=args.role
        )
    key = created.key
    scopes = ", ".join(key.scopes) if key.scopes else "every configured scope"
    expires = key.expires_at.isoformat() if key.expires_at else "never"
    print(
        f"key id:  {key.key_id}\nowner:   {key.owner}\nrole:    {key.effective_role}\nscopes:  {scopes}\n"
        f"expires: {expires}"
    )
    print("The key is shown only now; the store keeps a salted digest of it. The key:")
    print(created.api_key, flush=True)
    return 0


def cmd_keys_list(args: argparse.Namespace, stop: Any) -> int:
    from prme_core.types import utc_now

    with _client(args) as client:
        statuses = client.list_api_keys(args.owner)
    now = utc_now()
    print(f"{'KEY ID':<26}{'OWNER':<24}{'ROLE':<10}{'STATE':<9}{'SCOPES':<28}{'CREATED':<22}EXPIRES")
    for status in statuses:
        key = status.key
        print(
            f"{key.key_id:<26}{key.owner:<24}{key.effective_role:<10}{status.state(now):<9}"
            f"{','.join(key.scopes or ('*',)):<28}"
            f"{key.created_at.strftime('%Y-%m-%dT%H:%M:%SZ'):<22}"
            f"{key.expires_at.strftime('%Y-%m-%dT%H:%M:%SZ') if key.expires_at else '-'}"
        )
    return 0


def cmd_keys_revoke(args: argparse.Namespace, stop: Any) -> int:
    with _client(args) as client:
        revocation = client.revoke_api_key(args.key_id)
    print(f"revoked {revocation.key_id} (owner {revocation.owner}) at {revocation.revoked_at.isoformat()}")
    return 0


def cmd_forget(args: argparse.Namespace, stop: Any) -> int:
    """Delete one memory (``--memory``) or every row of an owner, then vacuum if asked."""
    with _client(args, FORGET_OVER_HTTP) as client:
        if args.memory:
            record = client.delete_memory(args.memory, owner=args.owner, actor="cli")
            print(f"deleted memory {record.memory_id} of {record.owner}: {len(record.versions)} version(s)")
        else:
            if args.confirm != args.owner:
                print(
                    f"prme: forgetting owner {args.owner!r} erases everything it has; repeat it as --confirm {args.owner}",
                    file=sys.stderr,
                )
                return 2
            record = client.forget_owner(args.owner, actor="cli")
            removed = ", ".join(f"{table} {n}" for table, n in record.rows.items() if n) or "nothing was stored"
            print(f"forgot owner {record.owner}: {removed}")
        print(f"deletion record {record.seq} at {record.deleted_at.isoformat()} (sha256 {record.record_sha256[:12]}…)")
        if args.vacuum:
            _print_vacuum(client.vacuum())
        else:
            print("the rows are gone; their bytes leave the database files at the next `prme vacuum`")
    return 0


def _print_vacuum(done: Any) -> None:
    print(f"vacuumed: {done.bytes_before:,} → {done.bytes_after:,} bytes ({done.reclaimed:,} reclaimed)")


def cmd_vacuum(args: argparse.Namespace, stop: Any) -> int:
    """Rewrite the store so that deleted rows leave its files."""
    with _client(args, "stop the server first: a vacuum rewrites the whole file") as client:
        _print_vacuum(client.vacuum())
    return 0


MAX_PORT = 65_535
"""The largest TCP port number; ``--port`` takes 1 to this."""


def _port(text: str) -> int:
    """``--port``: a TCP port number, 1–65535 (0 would listen on a random port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number in 1–{MAX_PORT}, got {text!r}") from None
    if not 1 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"must be a port number in 1–{MAX_PORT}, got {port}")
    return port


def check_can_listen(host: str, port: int) -> None:
    """Bind ``host:port`` as the server will (every address the host resolves to, address reuse
    on) and let go at once; refuse with one line naming the port and what to do."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CannotListen(
            f"--host {host!r} is not an address of this machine ({exc.strerror}); pass another --host"
        ) from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise CannotListen(_listen_refusal(exc, host, port)) from None


def _listen_refusal(exc: OSError, host: str, port: int) -> str:
    import errno

    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is in use (another server listens there); stop that server or pass another --port"
        )
    if exc.errno == errno.EACCES:
        return f"port {port} on {host} needs privileges to listen on (ports below 1024 do); pass another --port"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}; pass another --host or --port"


def cmd_serve(args: argparse.Namespace, stop: Any) -> int:
    from prme_api.run import serve_http

    check_can_listen(args.host, args.port)  # before the engine opens the store
    serve_http(args.store, host=args.host, port=args.port, max_body_bytes=args.max_body_bytes)
    return 0


def cmd_mcp(args: argparse.Namespace, stop: Any) -> int:
    from prme_core.errors import Unauthenticated

    api_key = os.environ.get(API_KEY_ENV, "").strip()
    if not api_key:
        raise Unauthenticated(f"{API_KEY_ENV} is not set; prme mcp serves the owner of that API key", reason="missing")
    from prme_api.run import serve_mcp_stdio
    from prme_core.errors import StoreLocked

    try:
        serve_mcp_stdio(_store_url(args), api_key)
    except StoreLocked as exc:
        raise _held(
            exc, "connect the MCP client to the server's streamable HTTP endpoint (http://HOST:PORT/mcp)"
        ) from None
    return 0


def _add_api_commands(sub: Any, raw: Any) -> None:
    store_help = f"store URL (default: {STORE_URL_ENV} or {DEFAULT_STORE_URL})"
    keys = sub.add_parser("keys", help="create, list and revoke API keys (an owner per key)")
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="make a key for an owner; the key is printed on the last line")
    create.add_argument("--owner", required=True, help="the owner every request with this key acts for")
    create.add_argument(
        "--scopes", nargs="+", metavar="SCOPE", help="limit the key to these scopes (default: every configured one)"
    )
    create.add_argument("--expires", metavar="WHEN", help="an ISO 8601 time with timezone, or a duration: 90d, 12h")
    create.add_argument(
        "--role",
        choices=("agent", "operator"),
        default="agent",
        help="agent (default): memories, retrieval, feedback; operator: also keys, holdouts, learning, profiles",
    )
    create.set_defaults(func=cmd_keys_create)
    listing = actions.add_parser("list", help="every key (or one owner's) with its state; never the secret")
    listing.add_argument("--owner", help="only this owner's keys")
    listing.set_defaults(func=cmd_keys_list)
    revoke = actions.add_parser("revoke", help="revoke a key (an appended record; effective at once)")
    revoke.add_argument("key_id", help="the key id (prme keys list)")
    revoke.set_defaults(func=cmd_keys_revoke)
    for parser in (create, listing, revoke):
        parser.add_argument("--store", default=None, metavar="URL", help=store_help)
        parser.set_defaults(stopped="nothing was changed")

    forget = sub.add_parser("forget", help="delete one memory, or every trace of an owner (a deletion record stays)")
    forget.add_argument("--owner", required=True, help="the owner whose memory (or everything) is deleted")
    forget.add_argument("--memory", metavar="ID", help="delete only this memory (every version and its edges)")
    forget.add_argument("--confirm", metavar="OWNER", help="to forget a whole owner, the owner again (a guard)")
    forget.add_argument("--vacuum", action="store_true", help="then rewrite the store so the bytes leave its files")
    forget.set_defaults(func=cmd_forget)
    vacuum = sub.add_parser(
        "vacuum", help="rewrite the store so deleted rows leave its files (needs it closed elsewhere)"
    )
    vacuum.set_defaults(func=cmd_vacuum)
    for parser in (forget, vacuum):
        parser.add_argument("--store", default=None, metavar="URL", help=store_help)
        parser.set_defaults(stopped="nothing was changed")

    serve = sub.add_parser("serve", help="serve the HTTP API (/v1, OpenAPI at /docs) and MCP at /mcp")
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help=f"port, 1–{MAX_PORT} (default 8000)")
    serve.add_argument("--store", default=None, metavar="URL", help=store_help)
    serve.add_argument(
        "--max-body-bytes", type=int, default=8 * 1024 * 1024, help="request body limit, 413 above (default 8 MiB)"
    )
    serve.set_defaults(func=cmd_serve, stopped="the server stopped")
    mcp = sub.add_parser("mcp", help=f"serve MCP over stdio for the owner of {API_KEY_ENV}")
    mcp.add_argument("--store", default=None, metavar="URL", help=store_help)
    mcp.set_defaults(func=cmd_mcp, stopped="the MCP server stopped")


def cmd_scale_benchmark(args: argparse.Namespace, stop: Any) -> int:
    _quiet_dagster_warnings()
    module = _benchmark_module("scale", "scale-benchmark")
    return module.main(args.benchmark_args, prog="prme scale-benchmark", stop=stop)


# --- the parser ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="prme", description=DESCRIPTION, epilog=EPILOG, formatter_class=raw)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.add_argument(
        "--debug", action="store_true", default=None, help=f"print the traceback with an error (or set {DEBUG_ENV}=1)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    main = sub.add_parser(
        "main",
        help="learn on generated sample data (or LoCoMo), embedded store, no server",
        description=MAIN_HELP,
        epilog=EPILOG,
        formatter_class=raw,
    )
    main.add_argument(
        "--data",
        default=None,
        metavar="PATH",
        help="a LoCoMo-format JSON file to learn on instead of the generated sample",
    )
    main.add_argument(
        "--locomo",
        action="store_true",
        help="learn on LoCoMo from PRME_LOCOMO_PATH, else ../shared/data/locomo/locomo-dev.json "
        "(from the working directory, then from the checkout)",
    )
    main.add_argument(
        "--store", default=None, metavar="URL", help=f"store URL (default: {STORE_URL_ENV} or {DEFAULT_STORE_URL})"
    )
    main.add_argument(
        "--conversation",
        action="append",
        metavar="ID",
        help="LoCoMo only (implies --locomo without --data): limit to these sample ids (repeatable)",
    )
    main.add_argument(
        "--progress",
        action="store_true",
        help="progress bars on stderr even when it is not a terminal (or set PRME_PROGRESS=1; 0 turns them off)",
    )
    main.add_argument(
        "--reset",
        action="store_true",
        help="clear the Dagster instance's history (runs, partitions, checks) so that it serves this "
        "store; the store itself is untouched",
    )
    main.set_defaults(
        func=cmd_main,
        stopped="the run in flight was canceled; rerun prme main to continue (memories "
        "and feedback already loaded are kept and not loaded twice)",
    )
    status = sub.add_parser(
        "status",
        help="per learning target: active profile, last decision and what would change it",
        description="Read the store and the Dagster instance (DAGSTER_HOME, default ./.dagster_home), "
        "without the UI or a server, and print per partition (owner|scopes) the active profile and "
        "since when, the last learning decision (outcome, decision, NDCG gain and interval, when) "
        "and what would change it.",
    )
    status.add_argument(
        "--store", default=None, metavar="URL", help=f"store URL (default: {STORE_URL_ENV} or {DEFAULT_STORE_URL})"
    )
    status.set_defaults(func=cmd_status, stopped="nothing was changed")
    bench = sub.add_parser(
        "locomo-benchmark", add_help=False, help="the LoCoMo learning benchmark (prme locomo-benchmark --help)"
    )
    bench.set_defaults(func=cmd_locomo_benchmark, stopped="its runs were canceled; no results were written")
    _add_api_commands(sub, raw)

    scale = sub.add_parser(
        "scale-benchmark",
        add_help=False,
        help="N learning targets through dagster-daemon on PostgreSQL (prme scale-benchmark --help)",
    )
    scale.set_defaults(func=cmd_scale_benchmark, stopped="its processes were stopped; no results were written")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.func in (cmd_locomo_benchmark, cmd_scale_benchmark):
        args.benchmark_args = rest  # its own parser reads them (and answers --help)
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return run_guarded(lambda stop: args.func(args, stop), prog="prme", debug=args.debug, stopped=args.stopped)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
