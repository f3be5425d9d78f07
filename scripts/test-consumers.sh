#!/usr/bin/env bash
# Consumer projects (DESIGN §10, test/consumers/README.md): Nest projects made by `nest new`,
# each with its own package.json and lockfile, install the packed package and run their own
# `npm test` and `npm run test:e2e`, unchanged, against one private Redis.
#
#   bash scripts/test-consumers.sh [project ...]     all of test/consumers/*, or those named
#   CONSUMER_TARBALL=path/to.tgz bash scripts/...    test that tarball instead of packing this
#                                                    checkout (e.g. an ESM-only build)
#
# Exits non-zero when any project fails; every project runs first, and a summary line per
# project (pass/fail, test counts) closes the output.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
consumers="$root/test/consumers"
work=$(mktemp -d "${TMPDIR:-/tmp}/nest-rate-limit-consumers.XXXXXX")
cleanup() {
  local pid
  # Installs still running (interrupted): stop them before their folder goes.
  kill $(jobs -p) 2>/dev/null || true
  pid=$(cat "$work/redis.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
    # Wait for it to go: it writes its log while it shuts down.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$work" || true
}
trap cleanup EXIT

step() { printf '\n==> %s\n' "$*"; }
elapsed() { echo "$((SECONDS - $1)) s"; }

# The projects: those named, or every folder with a package.json.
projects=()
if [ $# -gt 0 ]; then
  for name in "$@"; do
    name=${name%/}
    name=${name##*/}
    if [ ! -f "$consumers/$name/package.json" ]; then
      echo "No consumer project '$name' in $consumers" >&2
      exit 2
    fi
    projects+=("$name")
  done
else
  for dir in "$consumers"/*/; do
    [ -f "$dir/package.json" ] && projects+=("$(basename "$dir")")
  done
fi
[ ${#projects[@]} -gt 0 ] || { echo "No consumer projects in $consumers" >&2; exit 2; }

started=$SECONDS

# 1. The package, packed as it is published.
if [ -n "${CONSUMER_TARBALL:-}" ]; then
  [ -f "$CONSUMER_TARBALL" ] || { echo "CONSUMER_TARBALL: no file $CONSUMER_TARBALL" >&2; exit 2; }
  tarball=$(cd "$(dirname "$CONSUMER_TARBALL")" && pwd)/$(basename "$CONSUMER_TARBALL")
  step "Using CONSUMER_TARBALL=$tarball"
else
  step 'Building and packing nest-rate-limit'
  (cd "$root" && npm run build --silent)
  tarball="$work/$(cd "$root" && npm pack --pack-destination "$work" --silent | tail -n 1)"
  echo "$tarball"
fi

# 2. One private Redis for every project: a free port, nothing saved, stopped on exit.
for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null || {
    echo "$tool is not on the PATH (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)" >&2
    exit 2
  }
done
port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" ping >/dev/null || { cat "$work/redis.log" >&2; exit 1; }
export REDIS_URL="redis://127.0.0.1:$port"
echo "Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') on $REDIS_URL"

# A project whose .nvmrc names a Node.js major other than this one's runs on that major,
# installed from the npm registry's node-<platform>-<arch> package (a plain Node binary).
node_bin() {
  local project=$1 want have
  [ -f "$consumers/$project/.nvmrc" ] || return 0
  want=$(tr -d ' \nv' <"$consumers/$project/.nvmrc")
  have=$(node -p 'process.versions.node.split(".")[0]')
  [ "$want" = "$have" ] && return 0
  local dir="$work/node-$want"
  if [ ! -x "$dir/bin/node" ]; then
    local pkg
    pkg="node-$(node -p 'process.platform')-$(node -p 'process.arch')@$want"
    npm install --prefix "$work/node-pkg-$want" --no-save --no-audit --no-fund --loglevel=error "$pkg" >&2
    mkdir -p "$dir"
    ln -sfn "$work/node-pkg-$want/node_modules/${pkg%@*}/bin" "$dir/bin"
  fi
  echo "$dir/bin"
}

# 3. Install every project at once (mostly waiting on the network and the disk), each with
# its own Node.js. Per-project state lives in files under $work: no bash 4 arrays needed.
step "Installing ${projects[*]} (npm ci, then the tarball with --no-save)"
for project in "${projects[@]}"; do
  bin=$(node_bin "$project")
  echo "${bin:+$bin:}$PATH" >"$work/$project.path"
done
install_project() {
  local project=$1 t0=$SECONDS
  cd "$consumers/$project"
  # The lockfiles never name nest-rate-limit: a tarball's integrity changes with every build,
  # which would break `npm ci`. So: the project's own lockfile, then this tarball, unsaved.
  npm ci --no-audit --no-fund --loglevel=error &&
    npm install --no-save --no-audit --no-fund --loglevel=error "$tarball" &&
    echo "$project: installed in $(elapsed "$t0")"
}
pids=()
for project in "${projects[@]}"; do
  PATH=$(cat "$work/$project.path") install_project "$project" >"$work/$project.install.log" 2>&1 &
  pids+=($!)
done
for i in "${!projects[@]}"; do
  project=${projects[$i]}
  if wait "${pids[$i]}"; then
    touch "$work/$project.installed"
    tail -n 1 "$work/$project.install.log"
  else
    echo "$project: install FAILED:"
    sed 's/^/  /' "$work/$project.install.log"
  fi
done

# 4. Run each project's own test commands, one project at a time.
version() { node -p "require('./node_modules/$1/package.json').version" 2>/dev/null || echo '?'; }
# The runner's closing count line, e.g. Jest "Tests:       1 failed, 3 passed, 4 total" or
# Vitest "Tests  1 failed | 3 passed (4)", without colours.
counts() {
  sed "s/$(printf '\033')\[[0-9;]*m//g" "$1" | sed -n 's/^ *Tests:\{0,1\}  *\([0-9].*\)$/\1/p' | tail -n 1
}
number() { { grep -oE "[0-9]+ $2" <<<"$1" || true; } | head -n 1 | cut -d ' ' -f 1; }

base_path=$PATH
summary=()
failed_projects=0
tests_passed=0
tests_failed=0
for project in "${projects[@]}"; do
  cd "$consumers/$project"
  PATH=$(cat "$work/$project.path")
  export PATH
  if [ -f node_modules/vitest/package.json ]; then runner="Vitest $(version vitest)"; else runner="Jest $(version jest)"; fi
  about="Nest $(version @nestjs/core), Node $(node -p 'process.versions.node'), $runner"
  step "$project: $about, nest-rate-limit $(version nest-rate-limit)"
  ok=
  [ -f "$work/$project.installed" ] && ok=1
  results=()
  if [ -n "$ok" ]; then
    for script in test test:e2e; do
      log="$work/$project.$script.log"
      set +e
      npm run "$script" 2>&1 | tee "$log"
      status=${PIPESTATUS[0]}
      set -e
      line=$(counts "$log")
      passed=$(number "$line" passed)
      failed=$(number "$line" failed)
      tests_passed=$((tests_passed + ${passed:-0}))
      tests_failed=$((tests_failed + ${failed:-0}))
      if [ "$status" -ne 0 ]; then
        ok=
        # A suite that failed before any test ran counts as one failed test.
        [ "${failed:-0}" -gt 0 ] || tests_failed=$((tests_failed + 1))
      fi
      results+=("npm run $script: ${line:-no test count} (exit $status)")
    done
  else
    results+=('install failed')
  fi
  if [ -n "$ok" ]; then verdict=PASS; else verdict=FAIL; failed_projects=$((failed_projects + 1)); fi
  joined=$(printf '%s; ' "${results[@]}")
  summary+=("$verdict $project ($about): ${joined%; }")
done
export PATH=$base_path

step "Consumer projects ($(elapsed "$started")), nest-rate-limit from $(basename "$tarball")"
printf '%s\n' "${summary[@]}"
echo "consumers: $tests_passed passed, $tests_failed failed"
[ "$failed_projects" -eq 0 ]
