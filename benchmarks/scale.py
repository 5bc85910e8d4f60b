"""Scale benchmark (issue 19): N learning targets through a real ``dagster-daemon`` on PostgreSQL.

Run: ``python -m benchmarks.scale --owners 100`` (or ``prme scale-benchmark --owners 1000``);
``--update-results`` merges the run into ``benchmarks/results/scale/results.json`` under its
label (default ``n<owners>-<executor>``) and rewrites ``results.md`` from every label there.

What it does, in order:

1. Two fresh PostgreSQL databases: the domain store and the Dagster instance (dagster-postgres,
   ``deploy/dagster.postgres.yaml`` with the run queue's ``max_concurrent_runs`` set by
   ``--max-runs``; nothing else changed).
2. N owners with small real corpora and judged feedback: the planted-signal lab of the tests
   (``tests/learning_lab.build_lab``: each topic has the one memory that answers its question and
   a salient vague note, one judged retrieval and one holdout question; ``--topics`` 100) plus
   ``--filler`` unrelated memories per owner (about 240 memories each). The production learning
   policy's defaults apply. The mix, by owner index:
   two in five have a real signal (should activate), one in five mixed labels (offline gate
   says no), one in five a holdout that disagrees with the feedback (holdout gate says no), one
   in five four topics only (coverage says no). Generation uses two processes and is timed apart.
3. ``dagster-daemon run -w deploy/workspace.yaml`` with the production code location
   (``PRME_EXECUTOR=celery`` and two workers ``celery -A dagster_celery.app worker -c 1`` on the
   local RabbitMQ with ``--executor celery``); the discovery sensor is started and the run is
   timed until every partition exists; then the nightly schedule, ticking every minute
   (``PRME_LEARNING_CRON``), requests batches of ``--batch-size`` through the run queue. Learning
   wall time is first batch run created → last batch run finished. Peak memory is the largest
   sum of RSS over the daemon's process tree and the workers, sampled every second (shared pages
   count once per process, so it overstates).
4. Audit: every partition discovered, requested in exactly one batch, its snapshot materialized
   exactly once; outcomes and activation decisions (``activation_request``, the sensor's
   function) by kind of owner; database sizes.
5. Decision equality on a sample: the schedule is stopped, then each sampled partition is learned
   alone by the asset job (``dagster job launch`` through the same daemon and queue, twelve steps),
   and its gates, activation decision and learned profile (proposal input checksum, multipliers,
   gains) must equal the batch's. The single runs' durations give the unbatched rate.

Figures depend on the machine and its load: the load averages are recorded beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "scale"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_BROKER = "pyamqp://guest:guest@127.0.0.1:5672//"
KINDS = ("learns", "learns", "mixed", "misleading", "sparse")
"""Owner ``i`` is of kind ``KINDS[i % 5]``; only ``learns`` should activate."""
EXPECTED_STOP = {
    "learns": "",
    "mixed": "offline_gate_passed",
    "misleading": "holdout_gate_passed",
    "sparse": "coverage_sufficient",
}
FILLER_WORDS = (
    "meeting invoice weather lunch train report holiday budget email project garage ticket recipe "
    "library parcel dentist concert museum printer laptop sofa balcony umbrella tram bakery"
).split()
SCOPES = ("personal",)
EXTRA_TOPICS = (
    "acorn bramble cinder dahlia egret ferret gravel hazel iris jasper kelp lilac mango nectar onyx parsley "
    "quill raven sable thistle umber vanilla wren yarrow zinnia almond birch coral dingo elm fig gull heron "
    "juniper koala lemur moss newt otter plum"
).split()
"""Forty more one-word topics: with the lab's sixty, an owner can have a hundred judged queries,
enough for the production gates' defaults (20 training and 20 validation groups, 20 holdout groups)."""


def say(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", flush=True)


def load_averages() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


# --- data --------------------------------------------------------------------------------------


def owner_name(i: int) -> str:
    return f"owner-{i:05d}"


def _generate_slice(args: tuple[str, list[int], int, int]) -> int:
    """Build the owners ``indices`` in the store at ``url`` (one process, one client)."""
    url, indices, topics, filler = args
    from prme_core import MemoryClient
    from prme_core.datasets.lab import TOPICS, build_lab

    vocabulary = list(TOPICS) + EXTRA_TOPICS
    assert len(set(vocabulary)) == len(vocabulary) and topics <= len(vocabulary)
    with MemoryClient(url) as client:
        for i in indices:
            kind, owner = KINDS[i % len(KINDS)], owner_name(i)
            rng = random.Random(i)
            start = (i * 7) % len(vocabulary)
            chosen = tuple((vocabulary * 2)[start : start + (4 if kind == "sparse" else topics)])
            client.store_batch(
                owner,
                [
                    {"content": f"Note {k}: the {' and the '.join(rng.sample(FILLER_WORDS, 3))}", "scope": SCOPES[0]}
                    for k in range(filler)
                ],
            )
            build_lab(
                client,
                owner=owner,
                scopes=SCOPES,
                topics=chosen,
                signal="mixed" if kind == "mixed" else "relevant",
                holdout_truth="vague" if kind == "misleading" else "relevant",
            )
    return len(indices)


def generate(url: str, owners: int, topics: int, filler: int, processes: int = 2) -> float:
    from multiprocessing import get_context

    from prme_core.storage import open_store

    open_store(url).close()  # migrate once, before the workers
    started = time.perf_counter()
    slices = [(url, list(range(p, owners, processes)), topics, filler) for p in range(processes)]
    with get_context("spawn").Pool(processes) as pool:
        done = sum(pool.map(_generate_slice, slices))
    assert done == owners
    return time.perf_counter() - started


# --- services ----------------------------------------------------------------------------------


@contextmanager
def databases(admin_dsn: str, keep: bool) -> Any:
    import psycopg

    suffix = uuid.uuid4().hex[:10]
    names = {"store": f"prme_scale_store_{suffix}", "dagster": f"prme_scale_dagster_{suffix}"}
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        for name in names.values():
            conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield names
    finally:
        if not keep:
            with psycopg.connect(admin_dsn, autocommit=True) as conn:
                for name in names.values():
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_sizes(admin_dsn: str, names: dict[str, str]) -> dict[str, int]:
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        return {k: conn.execute("SELECT pg_database_size(%s)", (v,)).fetchone()[0] for k, v in names.items()}


def instance_home(tmp: Path, max_runs: int, store: str) -> Path:
    """``deploy/dagster.postgres.yaml`` (or, for the embedded store, the local ``dagster.yaml``:
    SQLite, the ``prme_store`` pool limited to 1) with the run queue's concurrency set."""
    import yaml

    source = ROOT / "deploy" / "dagster.postgres.yaml" if store == "postgres" else ROOT / "dagster.yaml"
    config = yaml.safe_load(source.read_text())
    config["concurrency"]["runs"]["max_concurrent_runs"] = max_runs
    home = tmp / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return home


class RssSampler(threading.Thread):
    """Peak of the summed RSS (and of one process) over some process trees, sampled every second."""

    def __init__(self, roots: list[int]):
        super().__init__(daemon=True)
        self.roots, self.peak_total, self.peak_single, self._stop_event = roots, 0, 0, threading.Event()

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        found, todo = [], list(self.roots)
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def run(self) -> None:
        while not self._stop_event.wait(1.0):
            sizes = [self._rss(pid) for pid in self._tree()]
            self.peak_total = max(self.peak_total, sum(sizes))
            self.peak_single = max(self.peak_single, max(sizes, default=0))

    def stop(self) -> None:
        self._stop_event.set()


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(process: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to the process group this benchmark started, then SIGKILL if it lingers."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def dagster_cli(env: dict, *args: str) -> None:
    subprocess.run(
        [_bin("dagster"), *args, "-w", "deploy/workspace.yaml"], cwd=ROOT, env=env, check=True, capture_output=True
    )


# --- the run -----------------------------------------------------------------------------------


def wait_for(what: str, condition, timeout: float, every: float = 5.0) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not done after {timeout:.0f} s")
        time.sleep(every)
    return time.monotonic() - started


def batch_runs(instance) -> list:
    import dagster as dg

    from prme_assets.batching import BATCH_JOB

    return list(instance.get_runs(filters=dg.RunsFilter(job_name=BATCH_JOB)))


def decisions(instance, store, partitions: list[str]) -> dict[str, dict]:
    """Per partition: its evaluated gates, the activation sensor's decision, and the learned
    profile's evidence (what a second, equal learning run must reproduce)."""
    import dagster as dg

    from prme_assets.activation import activation_request
    from prme_assets.check_records import latest_checks, latest_materialization
    from prme_assets.checks import GATE_CHECKS

    out = {}
    for partition in partitions:
        gates = {c.name: c.passed for c in latest_checks(instance, GATE_CHECKS, partition) if c.evaluated}
        request = activation_request(instance, partition, store)
        profile = latest_materialization(instance, "candidate_profile", partition)
        evidence = None
        if profile is not None and isinstance(request, dg.RunRequest):
            m = profile.metadata
            evidence = [m["proposal_input_checksum"], m["multipliers"], m["offline_gain"], m["holdout_gain"]]
        out[partition] = {
            "gates": gates,
            "activate": isinstance(request, dg.RunRequest),
            "refusal": None if isinstance(request, dg.RunRequest) else request,
            "profile_evidence": evidence,
        }
    return out


def run_benchmark(opts: argparse.Namespace) -> dict[str, Any]:
    import dagster as dg

    from prme_assets.partitions import LEARNING_TARGETS, encode_target
    from prme_assets.resources import PrmeStoreResource

    admin = os.environ.get("PRME_TEST_POSTGRES_DSN", DEFAULT_PG)
    result: dict[str, Any] = {
        "owners": opts.owners,
        "executor": opts.executor,
        "store": opts.store,
        "workers": opts.workers if opts.executor == "celery" else 0,
        "batch_size": opts.batch_size,
        "max_concurrent_runs": opts.max_runs,
        "topics_per_owner": opts.topics,
        "filler_memories_per_owner": opts.filler,
        "cpus": os.cpu_count(),
        "load_average_start": load_averages(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    partitions = [encode_target(owner_name(i), SCOPES) for i in range(opts.owners)]
    kind_of = {p: KINDS[i % len(KINDS)] for i, p in enumerate(partitions)}
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="prme-scale-")))
        import psycopg

        base = psycopg.conninfo.conninfo_to_dict(admin)
        host, port, user = base.get("host", "127.0.0.1"), str(base.get("port", 5432)), base.get("user", "postgres")
        if opts.store == "postgres":
            names = stack.enter_context(databases(admin, opts.keep))
            store_url = f"postgresql://{user}@{host}:{port}/{names['store']}"
        else:  # the one-machine default: a DuckDB file, the instance in SQLite; one writer at a time
            names, store_url = {}, f"duckdb:///{tmp / 'store.duckdb'}"
        say(f"generating {opts.owners} owners into {store_url}")
        processes_for_data = 2 if opts.store == "postgres" else 1
        result["generation_seconds"] = round(
            generate(store_url, opts.owners, opts.topics, opts.filler, processes_for_data), 1
        )
        say(f"generated in {result['generation_seconds']} s")
        home = instance_home(tmp, opts.max_runs, opts.store)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "DAGSTER_PG_USERNAME": user,
            "DAGSTER_PG_PASSWORD": base.get("password", ""),
            "DAGSTER_PG_HOST": host,
            "DAGSTER_PG_DB": names.get("dagster", ""),
            "DAGSTER_PG_PORT": port,
            "PRME_STORE_URL": store_url,
            "PRME_EXECUTOR": opts.executor,
            "PRME_LEARNING_CRON": "* * * * *",
            "PRME_LEARNING_BATCH_SIZE": str(opts.batch_size),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        processes = []
        if opts.executor == "celery":
            env["PRME_CELERY_BROKER"] = opts.broker
            for w in range(opts.workers):
                worker = start(
                    [_bin("celery"), "-A", "dagster_celery.app", "-b", opts.broker, "--result-backend", "rpc://"]
                    + ["worker", "-Q", "dagster", "-n", f"prme-scale-{w + 1}@%h", "-c", "1", "--prefetch-multiplier=1"]
                    + ["-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"],
                    env,
                    tmp / f"worker{w + 1}.log",
                )
                processes.append(worker)
                stack.callback(stop, worker)
        os.environ.update({k: env[k] for k in env if k.startswith(("DAGSTER_", "PRME_"))})
        instance = stack.enter_context(dg.DagsterInstance.get())
        daemon = start([_bin("dagster-daemon"), "run", "-w", "deploy/workspace.yaml"], env, tmp / "daemon.log")
        stack.callback(stop, daemon)
        sampler = RssSampler([daemon.pid, *(p.pid for p in processes)])
        sampler.start()
        stack.callback(sampler.stop)

        started = time.monotonic()
        dagster_cli(env, "sensor", "start", "learning_target_discovery_sensor")
        result["discovery_seconds"] = round(
            time.monotonic()
            - started
            + wait_for(
                "discovery",
                lambda: len(instance.get_dynamic_partitions(LEARNING_TARGETS.name)) >= opts.owners,
                opts.timeout,
            ),
            1,
        )
        discovered = instance.get_dynamic_partitions(LEARNING_TARGETS.name)
        say(f"{len(discovered)} partitions discovered in {result['discovery_seconds']} s; starting the schedule")
        dagster_cli(env, "sensor", "stop", "learning_target_discovery_sensor")
        scheduled = time.time()
        dagster_cli(env, "schedule", "start", "nightly_learning_schedule")
        # one tick requests every batch; later ticks would find them all held by queued or running
        # runs (tests/assets/test_batched_learning.py) but cost a scan of every partition each minute
        wait_for("the first schedule tick", lambda: bool(batch_runs(instance)), opts.timeout, every=2.0)
        time.sleep(10)  # the tick's run requests are submitted one by one
        dagster_cli(env, "schedule", "stop", "nightly_learning_schedule")
        result["batch_runs_requested_by_first_tick"] = len(batch_runs(instance))

        def learned() -> bool:
            runs = batch_runs(instance)
            done = [r for r in runs if r.is_finished]
            total = sum(int(r.tags.get("prme/batch_partitions", 0)) for r in done)
            say(f"{total}/{opts.owners} partitions learned; {len(done)}/{len(runs)} batch runs finished")
            return bool(runs) and len(done) == len(runs) and sum(len(_keys(r)) for r in runs) >= opts.owners

        wait_for("learning", learned, opts.timeout, every=10.0)
        runs = batch_runs(instance)
        stats = {r.run_id: instance.get_run_stats(r.run_id) for r in runs}
        first, last = (
            min(s.launch_time or s.start_time for s in stats.values()),
            max(s.end_time for s in stats.values()),
        )
        created = min(instance.get_run_record_by_id(r.run_id).create_timestamp.timestamp() for r in runs)
        wall = last - created
        result.update(
            {
                "learning_wall_seconds": round(wall, 1),
                "from_schedule_start_seconds": round(last - scheduled, 1),
                "first_launch_after_creation_seconds": round(first - created, 1),
                "partitions_per_hour": round(opts.owners / wall * 3600),
                "batch_runs": len(runs),
                "batch_run_statuses": dict(Counter(r.status.value for r in runs)),
                "batch_run_seconds_mean": round(sum(s.end_time - s.start_time for s in stats.values()) / len(runs), 1),
                "batch_run_seconds_max": round(max(s.end_time - s.start_time for s in stats.values()), 1),
                "peak_rss_total_mb": round(sampler.peak_total / 2**20),
                "peak_rss_single_process_mb": round(sampler.peak_single / 2**20),
                "load_average_after_learning": load_averages(),
            }
        )
        say(f"learned {opts.owners} partitions in {wall:.0f} s ({result['partitions_per_hour']}/h)")

        # audit: lost or duplicated partitions
        requested = Counter(k for r in runs for k in _keys(r))
        snapshots = Counter(
            rec.partition_key
            for rec in instance.fetch_materializations(dg.AssetKey("feedback_snapshot"), limit=opts.owners * 3).records
        )
        result["audit"] = {
            "discovered": len(set(discovered) & set(partitions)),
            "requested_exactly_once": sum(1 for p in partitions if requested[p] == 1),
            "snapshot_materialized_exactly_once": sum(1 for p in partitions if snapshots[p] == 1),
            "lost": sorted(p for p in partitions if requested[p] == 0 or snapshots[p] == 0)[:20],
            "duplicated": sorted(p for p in partitions if requested[p] > 1 or snapshots[p] > 1)[:20],
            "unexpected_partitions": sorted(set(discovered) - set(partitions))[:20],
        }
        store = PrmeStoreResource(store_url=store_url)
        from prme_assets.schedules import learning_requests

        scan = time.perf_counter()  # what each later tick costs: a scan of every partition
        idle = learning_requests(instance, store, batch_size=opts.batch_size, tick="after")
        result["schedule_scan_seconds"] = round(time.perf_counter() - scan, 2)
        result["schedule_after_learning"] = getattr(idle, "skip_message", None) or f"{len(idle)} requests"
        scan = time.perf_counter()  # the activation sensor's per-tick work is this, partition by partition
        batched = decisions(instance, store, partitions)
        result["activation_scan_seconds"] = round(time.perf_counter() - scan, 2)
        by_kind: dict[str, Counter] = {}
        for p, d in batched.items():
            stop_gate = next((g for g, ok in d["gates"].items() if not ok), "")
            by_kind.setdefault(kind_of[p], Counter())[
                "activate" if d["activate"] else f"refused (stopped by {stop_gate or 'no gate'})"
            ] += 1
        result["decisions_by_kind"] = {k: dict(v) for k, v in sorted(by_kind.items())}
        result["decisions_as_planted"] = sum(
            1
            for p, d in batched.items()
            if d["activate"] == (kind_of[p] == "learns")
            and next((g for g, ok in d["gates"].items() if not ok), "") == EXPECTED_STOP[kind_of[p]]
        )
        if opts.store == "postgres":
            result["database_bytes"] = database_sizes(admin, names)
        else:
            result["database_bytes"] = {
                "store": sum(f.stat().st_size for f in tmp.glob("store.duckdb*") if f.is_file()),
                "dagster": sum(f.stat().st_size for f in home.rglob("*") if f.is_file()),
            }
        result["database_bytes_per_partition"] = {k: v // opts.owners for k, v in result["database_bytes"].items()}

        # decision equality: each sampled partition learned alone by the asset job, through the daemon
        sample = stratified_sample(partitions, kind_of, opts.sample)
        single_seconds = []
        for partition in sample:
            before = {r.run_id for r in instance.get_runs(filters=dg.RunsFilter(job_name="prme_learning_job"))}
            dagster_cli(
                env, "job", "launch", "-j", "prme_learning_job", "--tags", json.dumps({"dagster/partition": partition})
            )

            def finished(before=before):
                new = [
                    r
                    for r in instance.get_runs(filters=dg.RunsFilter(job_name="prme_learning_job"))
                    if r.run_id not in before
                ]
                return bool(new) and new[0].is_finished

            wait_for(f"single run of {partition}", finished, opts.timeout, every=1.0)
            (run,) = [
                r
                for r in instance.get_runs(filters=dg.RunsFilter(job_name="prme_learning_job"))
                if r.run_id not in before
            ]
            s = instance.get_run_stats(run.run_id)
            single_seconds.append(s.end_time - s.start_time)
        alone = decisions(instance, store, sample)
        mismatches = {p: {"batch": batched[p], "alone": alone[p]} for p in sample if batched[p] != alone[p]}
        result["decision_equality"] = {
            "sample": len(sample),
            "identical": len(sample) - len(mismatches),
            "sample_by_kind": dict(Counter(kind_of[p] for p in sample)),
            "mismatches": mismatches,
        }
        result["single_run_seconds_mean"] = (
            round(sum(single_seconds) / len(single_seconds), 1) if single_seconds else None
        )
        result["single_runs_partitions_per_hour_one_at_a_time"] = (
            round(3600 / result["single_run_seconds_mean"]) if single_seconds else None
        )
        result["load_average_end"] = load_averages()
        instance_logs = tmp / "daemon.log"
        result["daemon_errors"] = sum(1 for line in instance_logs.read_text().splitlines() if " - ERROR - " in line)
    return result


def _keys(run) -> list[str]:
    from prme_assets.batching import batch_partition_keys

    return batch_partition_keys(run)


def stratified_sample(partitions: list[str], kind_of: dict[str, str], size: int) -> list[str]:
    rng = random.Random(19)
    by_kind: dict[str, list[str]] = {}
    for p in partitions:
        by_kind.setdefault(kind_of[p], []).append(p)
    kinds = sorted(by_kind)
    picked = []
    for i in range(size):
        pool = [p for p in by_kind[kinds[i % len(kinds)]] if p not in picked]
        if pool:
            picked.append(rng.choice(pool))
    return picked


# --- results -----------------------------------------------------------------------------------


def write_results(label: str, result: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "results.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[label] = result
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    (RESULTS / "results.md").write_text(render(data))


def render(data: dict[str, dict]) -> str:
    rows = [
        ("owners (partitions)", "owners"),
        ("store and instance", None),
        ("executor (workers)", None),
        ("batch size / concurrent runs", None),
        ("data generation, s (not learning)", "generation_seconds"),
        ("discovery, s", "discovery_seconds"),
        ("learning wall time, s (first batch run created → last finished)", "learning_wall_seconds"),
        ("partitions learned per hour", "partitions_per_hour"),
        ("batch runs", "batch_runs"),
        ("mean / max seconds per batch run", None),
        ("peak RSS, sum over processes, MB", "peak_rss_total_mb"),
        ("peak RSS, largest process, MB", "peak_rss_single_process_mb"),
        ("domain store DB, MB", None),
        ("Dagster instance DB, MB", None),
        ("lost / duplicated partitions", None),
        ("decisions as planted", None),
        ("decision equality (batch vs alone)", None),
        ("single asset-job run, s (one partition)", "single_run_seconds_mean"),
        ("schedule tick's scan after learning, s", "schedule_scan_seconds"),
        ("activation decisions for every partition, s", "activation_scan_seconds"),
        ("load average at start / after learning", None),
    ]
    labels = sorted(data, key=lambda k: (data[k]["owners"], k))
    lines = [
        "# Scale benchmark (issue 19)",
        "",
        "Generated by `python -m benchmarks.scale --update-results` (see its docstring for what is measured).",
        "PostgreSQL domain store and Dagster instance, a real `dagster-daemon`, the QueuedRunCoordinator,",
        "the nightly schedule requesting batched runs. Load averages are the 1/5/15-minute figures of `uptime`.",
        "",
        "| | " + " | ".join(labels) + " |",
        "|---|" + "---|" * len(labels),
    ]
    for title, key in rows:
        cells = []
        for label in labels:
            r = data[label]
            if key is not None:
                cells.append(str(r.get(key, "—")))
            elif title.startswith("store and"):
                cells.append("DuckDB + SQLite" if r.get("store") == "duckdb" else "PostgreSQL + PostgreSQL")
            elif title.startswith("executor"):
                cells.append(f"{r['executor']} ({r['workers']})" if r["workers"] else r["executor"])
            elif title.startswith("batch size"):
                cells.append(f"{r['batch_size']} / {r['max_concurrent_runs']}")
            elif title.startswith("mean / max"):
                cells.append(f"{r['batch_run_seconds_mean']} / {r['batch_run_seconds_max']}")
            elif title.startswith("domain store"):
                cells.append(f"{r['database_bytes']['store'] / 2**20:.0f}")
            elif title.startswith("Dagster instance"):
                cells.append(f"{r['database_bytes']['dagster'] / 2**20:.0f}")
            elif title.startswith("lost"):
                a = r["audit"]
                cells.append(f"{len(a['lost'])} / {len(a['duplicated'])}")
            elif title.startswith("decisions as planted"):
                cells.append(f"{r['decisions_as_planted']} of {r['owners']}")
            elif title.startswith("decision equality"):
                e = r["decision_equality"]
                cells.append(f"{e['identical']} of {e['sample']}")
            elif title.startswith("load"):
                cells.append(f"{r['load_average_start']} / {r['load_average_after_learning']}")
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    lines += ["", "## Decisions by kind of owner", ""]
    for label in labels:
        kinds = data[label]["decisions_by_kind"].items()
        lines.append(
            f"- **{label}**: "
            + "; ".join(f"{kind} — " + ", ".join(f"{n} {what}" for what, n in d.items()) for kind, d in kinds)
        )
    growth = _growth(data, labels)
    if growth:
        lines += ["", "## Growth", ""] + growth
    return "\n".join(lines) + "\n"


def _growth(data: dict[str, dict], labels: list[str]) -> list[str]:
    out = []

    def setup(r: dict) -> tuple[str, str]:
        return (r["executor"], r.get("store", "postgres"))

    for executor, store in sorted({setup(data[k]) for k in labels}):
        same = sorted((data[k] for k in labels if setup(data[k]) == (executor, store)), key=lambda r: r["owners"])
        for small, big in zip(same, same[1:]):
            n = big["owners"] / small["owners"]
            out.append(
                f"- {executor} on {store}, {small['owners']} → {big['owners']} owners (×{n:g}): learning wall time "
                f"×{big['learning_wall_seconds'] / small['learning_wall_seconds']:.2f}, "
                f"Dagster DB ×{big['database_bytes']['dagster'] / small['database_bytes']['dagster']:.2f}, "
                f"domain DB ×{big['database_bytes']['store'] / small['database_bytes']['store']:.2f}, "
                f"peak RSS ×{big['peak_rss_total_mb'] / small['peak_rss_total_mb']:.2f}"
            )
    return out


def build_parser(prog: str = "python -m benchmarks.scale") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    p.add_argument("--owners", type=int, default=100, help="learning targets to generate (default 100)")
    p.add_argument("--executor", choices=("multiprocess", "celery"), default="celery")
    p.add_argument(
        "--store",
        choices=("postgres", "duckdb"),
        default="postgres",
        help="domain store and instance: PostgreSQL for both, or the one-machine default (DuckDB, SQLite)",
    )
    p.add_argument("--workers", type=int, default=2, help="Celery workers (concurrency 1 each)")
    p.add_argument("--broker", default=os.environ.get("PRME_CELERY_BROKER", DEFAULT_BROKER))
    p.add_argument("--batch-size", type=int, default=50)
    p.add_argument("--max-runs", type=int, default=2, help="the run queue's max_concurrent_runs")
    p.add_argument("--topics", type=int, default=100, help="judged topics per owner, at most 100 (sparse owners get 4)")
    p.add_argument("--filler", type=int, default=40, help="unrelated memories per owner")
    p.add_argument("--sample", type=int, default=10, help="partitions re-learned alone for decision equality")
    p.add_argument("--timeout", type=float, default=7200.0, help="seconds to wait for each phase")
    p.add_argument("--label", default=None)
    p.add_argument("--keep", action="store_true", help="keep the two databases (for inspection)")
    p.add_argument("--update-results", action="store_true", help="write benchmarks/results/scale/")
    return p


def main(argv: list[str] | None = None, prog: str = "python -m benchmarks.scale", stop: Any = None) -> int:
    import warnings

    opts = build_parser(prog).parse_args(argv)
    warnings.filterwarnings("ignore")
    result = run_benchmark(opts)
    print(json.dumps(result, indent=2, sort_keys=True))
    if opts.update_results:
        write_results(opts.label or f"n{opts.owners}-{opts.executor}-{opts.store}", result)
        say(f"results written to {RESULTS.relative_to(ROOT)}")
    audit = result["audit"]
    return 0 if not audit["lost"] and not audit["duplicated"] and not result["decision_equality"]["mismatches"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
