#!/usr/bin/env bash
# Runs the e2e suite against NestJS 10 and 11, the other majors in our peer range (the
# devDependencies are NestJS 12): installs each into .nest<major>/ (ignored by git) and points
# Jest's @nestjs imports there. `npm run test:nest11 -- 11` runs one major only.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then majors=("$@"); else majors=(10 11); fi
for major in "${majors[@]}"; do
  dir=".nest$major"
  if [ ! -d "$dir/node_modules/@nestjs/core" ]; then
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo '{ "private": true }' >"$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund \
      "@nestjs/common@^$major" "@nestjs/core@^$major" "@nestjs/platform-express@^$major" \
      "@nestjs/platform-fastify@^$major" "@nestjs/testing@^$major"
  fi
  node -e "console.log('NestJS', require('./$dir/node_modules/@nestjs/core/package.json').version)"
  NEST_PEERS_DIR="$PWD/$dir" node scripts/test.mjs test/e2e
done
