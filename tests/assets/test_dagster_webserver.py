"""The Dagster UI serves both code locations: start ``dagster-webserver -w workspace.yaml`` on
loopback with a temporary DAGSTER_HOME, read the asset graph and the gate checks from its
GraphQL endpoint, compare the production location with the definitions snapshot, check the
LoCoMo demo location apart, and stop the server."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = json.loads((ROOT / "tests" / "fixtures" / "definitions_snapshot.json").read_text())
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0

ASSET_GRAPH_QUERY = """
{
  assetNodes {
    assetKey { path }
    repository { location { name } }
    groupName
    isPartitioned
    dependencyKeys { path }
    assetChecksOrError {
      __typename
      ... on AssetChecks { checks { name blocking } }
    }
  }
}
"""

JOBS_QUERY = """
{
  repositoriesOrError {
    __typename
    ... on RepositoryConnection {
      nodes {
        name
        location { name }
        jobs { name }
        sensors { name }
        schedules { name }
      }
    }
  }
}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _webserver_command(port: int) -> list[str]:
    executable = shutil.which("dagster-webserver", path=str(Path(sys.executable).parent)) or shutil.which(
        "dagster-webserver"
    )
    if executable is None:
        pytest.fail("dagster-webserver is not installed (it is a project dependency: pip install -e .)")
    return [executable, "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)]


def _get(url: str, timeout: float = 5.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read()


def _graphql(base: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{base}/graphql", data=json.dumps({"query": query}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback only
        body = json.loads(response.read())
    assert "errors" not in body, body.get("errors")
    return body["data"]


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the server's process group (webserver and its code server), then SIGKILL what is left."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)
    try:  # children the webserver started (the code server) share its process group
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def webserver(tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PRME_STORE_URL": f"duckdb:///{home / 'prme.duckdb'}",
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    log = (home / "webserver.log").open("wb")
    process = subprocess.Popen(
        _webserver_command(port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(
                    f"dagster-webserver exited with {process.returncode}:\n"
                    f"{(home / 'webserver.log').read_text()[-4000:]}"
                )
            try:
                info = json.loads(_get(f"{base}/server_info"))
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"dagster-webserver did not answer /server_info within {START_TIMEOUT_S:.0f} s:\n"
                        f"{(home / 'webserver.log').read_text()[-4000:]}"
                    )
                time.sleep(0.5)
        yield base, info, process
    finally:
        _stop(process)
        log.close()


def test_server_info_names_the_installed_dagster(webserver):
    import dagster

    _, info, _ = webserver
    assert info["dagster_webserver_version"] == dagster.__version__


def test_graphql_asset_graph_matches_the_definitions(webserver):
    base, _, _ = webserver
    nodes = _graphql(base, ASSET_GRAPH_QUERY)["assetNodes"]
    served = {}
    for node in nodes:
        if node["repository"]["location"]["name"] != "prme_learning":
            continue  # the LoCoMo demo location; see the last test
        name = "/".join(node["assetKey"]["path"])
        checks = node["assetChecksOrError"]
        assert checks["__typename"] == "AssetChecks", checks
        served[name] = {
            "group": node["groupName"],
            "partitioned": node["isPartitioned"],
            "deps": sorted("/".join(d["path"]) for d in node["dependencyKeys"]),
            "checks": {c["name"]: c["blocking"] for c in checks["checks"]},
        }
    assert set(served) == set(SNAPSHOT["assets"])
    for name, expected in SNAPSHOT["assets"].items():
        assert served[name]["group"] == expected["group"]
        assert served[name]["partitioned"] == (expected["partitions"] is not None)
        assert served[name]["deps"] == expected["deps"]
        assert sorted(served[name]["checks"]) == expected["checks"]
    gates = {check: blocking for node in served.values() for check, blocking in node["checks"].items()}
    assert len(gates) == 7 and all(gates.values()), gates  # every gate is a blocking check


def test_graphql_lists_the_jobs_sensors_and_schedules(webserver):
    base, _, _ = webserver
    repositories = _graphql(base, JOBS_QUERY)["repositoriesOrError"]
    assert repositories["__typename"] == "RepositoryConnection", repositories
    (repo,) = [r for r in repositories["nodes"] if r["location"]["name"] == "prme_learning"]
    jobs = {j["name"] for j in repo["jobs"]} - {"__ASSET_JOB"}
    assert jobs == set(SNAPSHOT["jobs"])
    assert {s["name"] for s in repo["sensors"]} == set(SNAPSHOT["sensors"])
    assert {s["name"] for s in repo["schedules"]} == set(SNAPSHOT["schedules"])


def test_graphql_serves_the_locomo_demo_as_its_own_code_location(webserver):
    base, _, _ = webserver
    repositories = _graphql(base, JOBS_QUERY)["repositoriesOrError"]
    (repo,) = [r for r in repositories["nodes"] if r["location"]["name"] == "prme_locomo_demo"]
    assert {j["name"] for j in repo["jobs"]} - {"__ASSET_JOB"} == {"locomo_demo_job"}
    demo_assets = {
        "/".join(n["assetKey"]["path"])
        for n in _graphql(base, ASSET_GRAPH_QUERY)["assetNodes"]
        if n["repository"]["location"]["name"] == "prme_locomo_demo"
    }
    assert demo_assets == {"locomo_memories", "locomo_feedback"}
