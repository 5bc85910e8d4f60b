#!/usr/bin/env bash
# Screenshot of the learning pipeline's asset graph for the README (docs/images/asset-graph.png).
#
# Starts dagster-webserver on loopback, waits for /server_info, renders the asset-group page with
# headless Chromium, and stops the server. With DAGSTER_HOME and PRME_STORE_URL set (e.g. after
# `prme main`: DAGSTER_HOME=$PWD/.dagster_home PRME_STORE_URL=duckdb:///$PWD/.prme/prme.duckdb)
# it shows that instance's partitions and check results; otherwise an empty throwaway instance.
# Needs Debian's chromium (apt-get install chromium) and the project installed (pip install -e .).
set -euo pipefail
cd "$(dirname "$0")/.."

out="${1:-docs/images/asset-graph.png}"
port="${PRME_SCREENSHOT_PORT:-3917}"
size="${PRME_SCREENSHOT_SIZE:-1600,1000}"
chromium_bin="$(command -v chromium || command -v chromium-browser || true)"
[ -n "$chromium_bin" ] || { echo "chromium not found: apt-get install chromium" >&2; exit 1; }

tmp="$(mktemp -d)"
home="${DAGSTER_HOME:-$tmp}"
store_url="${PRME_STORE_URL:-duckdb:///$tmp/prme.duckdb}"
cleanup() {
  [ -n "${server_pid:-}" ] && kill -TERM -- "-$server_pid" 2>/dev/null || true
  sleep 1
  [ -n "${server_pid:-}" ] && kill -KILL -- "-$server_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
[ -f "$home/dagster.yaml" ] || cp dagster.yaml "$home/dagster.yaml"
# No first-visit community dialog over the graph: Dagster skips it once this marker exists.
mkdir -p "$home/.nux" && [ -f "$home/.nux/nux.yaml" ] || echo "seen: 1" >"$home/.nux/nux.yaml"

echo "[screenshot] starting dagster-webserver on 127.0.0.1:$port"
DAGSTER_HOME="$home" PRME_STORE_URL="$store_url" \
  setsid dagster-webserver -w workspace.yaml -h 127.0.0.1 -p "$port" >"$tmp/webserver.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  curl -fs "http://127.0.0.1:$port/server_info" >/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/webserver.log" >&2; exit 1; }
  sleep 1
done
curl -fs "http://127.0.0.1:$port/server_info" >/dev/null || { echo "webserver did not start" >&2; exit 1; }

mkdir -p "$(dirname "$out")"
url="http://127.0.0.1:$port/locations/prme_learning/asset-groups/prme_learning"
echo "[screenshot] rendering $url"
# The graph is laid out client-side: give the page time to fetch and lay out before capture.
"$chromium_bin" --headless=new --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/chromium" \
  --window-size="$size" --virtual-time-budget=25000 --run-all-compositor-stages-before-draw \
  --screenshot="$out" "$url" >/dev/null 2>&1
echo "[screenshot] wrote $out"
