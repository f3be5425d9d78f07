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
#
# A project that depends on @nestjs/throttler runs twice: as it is, on the throttler, then as
# `<project> (switched)`, a copy whose only change is the import path `@nestjs/throttler` ->
# `nest-rate-limit/throttler` in its src/ and test/ *.ts files (the diff is printed). Both must
# pass: switching to the drop-in is changing the imports, nothing else.
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

# The runs: every project in its folder, and each throttler project again, switched, in a
# copy under $work. dir_of gives a run's folder; the run's name names its files under $work.
runs=()
for project in "${projects[@]}"; do
  runs+=("$project")
  if node -e "const p=require(process.argv[1]); process.exit({...p.dependencies, ...p.devDependencies}['@nestjs/throttler'] ? 0 : 1)" \
    "$consumers/$project/package.json"; then
    runs+=("$project+switched")
  fi
done
dir_of() {
  case $1 in
    *+switched) echo "$work/switched/${1%+switched}" ;;
    *) echo "$consumers/$1" ;;
  esac
}
label_of() {
  case $1 in
    *+switched) echo "${1%+switched} (switched to nest-rate-limit/throttler)" ;;
    *) echo "$1" ;;
  esac
}

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

# 2b. The switched copies: the project without node_modules and dist, then only its import
# paths changed, and the change shown.
for run in "${runs[@]}"; do
  case $run in *+switched) ;; *) continue ;; esac
  project=${run%+switched}
  copy=$(dir_of "$run")
  step "$project: switching its imports from @nestjs/throttler to nest-rate-limit/throttler"
  mkdir -p "$copy"
  (cd "$consumers/$project" && tar -cf - --exclude=./node_modules --exclude=./dist --exclude=./coverage .) |
    (cd "$copy" && tar -xf -)
  find "$copy/src" "$copy/test" -name '*.ts' -exec \
    sed -i.orig -E "s#(['\"])@nestjs/throttler(['\"])#\\1nest-rate-limit/throttler\\2#g" {} +
  # The diff, file by file, as anyone would review it; then no .orig left behind.
  changed=0
  while IFS= read -r orig; do
    file=${orig%.orig}
    if ! cmp -s "$orig" "$file"; then
      changed=$((changed + 1))
      diff -u --label "a/${file#"$copy/"}" --label "b/${file#"$copy/"}" "$orig" "$file" || true
    fi
    rm -f "$orig"
  done < <(find "$copy/src" "$copy/test" -name '*.ts.orig' | sort)
  echo "$changed files changed"
  # Anything else naming the throttler (a deep import, a require) would need more than the
  # import path: say so rather than test a half-switched project.
  if grep -rn '@nestjs/throttler' "$copy/src" "$copy/test"; then
    echo "$project: @nestjs/throttler is still named above after the import switch" >&2
    exit 1
  fi
done

# A project whose .nvmrc names a Node.js major other than this one's runs on that major,
# installed from the npm registry's node-<platform>-<arch> package (a plain Node binary).
node_bin() {
  local dir want have
  dir=$(dir_of "$1")
  [ -f "$dir/.nvmrc" ] || return 0
  want=$(tr -d ' \nv' <"$dir/.nvmrc")
  have=$(node -p 'process.versions.node.split(".")[0]')
  [ "$want" = "$have" ] && return 0
  local nodedir="$work/node-$want"
  if [ ! -x "$nodedir/bin/node" ]; then
    local pkg
    pkg="node-$(node -p 'process.platform')-$(node -p 'process.arch')@$want"
    npm install --prefix "$work/node-pkg-$want" --no-save --no-audit --no-fund --loglevel=error "$pkg" >&2
    mkdir -p "$nodedir"
    ln -sfn "$work/node-pkg-$want/node_modules/${pkg%@*}/bin" "$nodedir/bin"
  fi
  echo "$nodedir/bin"
}

# 3. Install every project at once (mostly waiting on the network and the disk), each with
# its own Node.js. Per-project state lives in files under $work: no bash 4 arrays needed.
step "Installing ${runs[*]} (npm ci, then the tarball with --no-save)"
for run in "${runs[@]}"; do
  bin=$(node_bin "$run")
  echo "${bin:+$bin:}$PATH" >"$work/$run.path"
done
install_project() {
  local project=$1 t0=$SECONDS
  cd "$(dir_of "$project")"
  # The lockfiles never name nest-rate-limit: a tarball's integrity changes with every build,
  # which would break `npm ci`. So: the project's own lockfile, then this tarball, unsaved.
  npm ci --no-audit --no-fund --loglevel=error &&
    npm install --no-save --no-audit --no-fund --loglevel=error "$tarball" &&
    echo "$project: installed in $(elapsed "$t0")"
}
pids=()
for project in "${runs[@]}"; do
  PATH=$(cat "$work/$project.path") install_project "$project" >"$work/$project.install.log" 2>&1 &
  pids+=($!)
done
for i in "${!runs[@]}"; do
  project=${runs[$i]}
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
for project in "${runs[@]}"; do
  cd "$(dir_of "$project")"
  PATH=$(cat "$work/$project.path")
  export PATH
  if [ -f node_modules/vitest/package.json ]; then runner="Vitest $(version vitest)"; else runner="Jest $(version jest)"; fi
  about="Nest $(version @nestjs/core), Node $(node -p 'process.versions.node'), $runner"
  [ -f node_modules/@nestjs/throttler/package.json ] && about="$about, @nestjs/throttler $(version @nestjs/throttler)"
  step "$(label_of "$project"): $about, nest-rate-limit $(version nest-rate-limit)"
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
  summary+=("$verdict $(label_of "$project") ($about): ${joined%; }")
done
export PATH=$base_path

step "Consumer projects ($(elapsed "$started")), nest-rate-limit from $(basename "$tarball")"
printf '%s\n' "${summary[@]}"
echo "consumers: $tests_passed passed, $tests_failed failed"
[ "$failed_projects" -eq 0 ]
