#!/usr/bin/env bash
# Checks what docs/observability/ ships against real processes:
#   1. promtool check rules / promtool test rules (the alerts on synthetic series);
#   2. the sample app under the demo's traffic, scraped every second by a real Prometheus
#      (loopback port, temporary data directory) that loads the rules: every dashboard query,
#      every alert's selectors and the Loki rule's log parsing must find data
#      (scripts/check-observability.mjs).
# Needs promtool and prometheus on PATH (Debian: apt-get install prometheus) and the sample
# app and demo compiled (`npm run demo` does it; missing outputs are compiled here).
# REDIS_URL, when set, puts the sample app's limits in that Redis; else in its memory.
# Everything it starts is stopped, and its temporary directory removed, on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=docs/observability
for tool in promtool prometheus; do
  command -v "$tool" >/dev/null || {
    echo "$tool not found: install Debian's prometheus package (apt-get install prometheus)" >&2
    exit 1
  }
done

echo '--- promtool check rules'
promtool check rules "$dir/rules.yml"
echo '--- promtool test rules'
promtool test rules "$dir/rules.test.yml"

if [ ! -f dist/esm/index.js ]; then npm run build --silent; fi
if [ ! -f dist-sample/sample-app/main.js ]; then npx tsc -p sample-app/tsconfig.json; fi
if [ ! -f dist-sample/demo/run.js ]; then npx tsc -p demo/tsconfig.json; fi

work=$(mktemp -d)
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Runs a command in the background and waits for it: a signal to this script interrupts the
# wait at once (bash defers traps until a foreground command ends), and cleanup stops it.
run() {
  "$@" &
  pids+=($!)
  wait "$!"
}

free_port() {
  node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

app_port=$(free_port)
PORT=$app_port NO_COLOR=1 node dist-sample/sample-app/main.js >"$work/app.log" 2>&1 &
pids+=($!)

prom_port=$(free_port)
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $PWD/$dir/rules.yml
scrape_configs:
  - job_name: sample-app
    static_configs:
      - targets: ['127.0.0.1:$app_port']
EOF
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)

echo "--- the demo's traffic at the sample app (127.0.0.1:$app_port), scraped by Prometheus (127.0.0.1:$prom_port)"
# The demo waits for the app's /health itself, and fails if a limit did not hold.
DEMO_URL="http://127.0.0.1:$app_port" run node dist-sample/demo/run.js >"$work/demo.log" 2>&1 || {
  cat "$work/demo.log" "$work/app.log" >&2
  exit 1
}
tail -n 1 "$work/demo.log"
grep -m 1 'rate limits in' "$work/app.log" | sed 's/^.*\] //' || true

echo '--- every dashboard query and alert selector returns a series'
run node scripts/check-observability.mjs --prometheus "http://127.0.0.1:$prom_port" \
  --app-log "$work/app.log" --dir "$dir" || {
  echo '--- prometheus log' >&2
  cat "$work/prometheus.log" >&2
  exit 1
}
