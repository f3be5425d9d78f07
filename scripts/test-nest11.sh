#!/usr/bin/env bash
# Runs the e2e suite against NestJS 11, the other major in our peer range: installs it
# into .nest11/ (ignored by git) and points Jest's @nestjs imports there.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d .nest11/node_modules/@nestjs/core ]; then
  mkdir -p .nest11
  [ -f .nest11/package.json ] || echo '{ "private": true }' >.nest11/package.json
  npm install --prefix .nest11 --no-audit --no-fund \
    @nestjs/common@^11 @nestjs/core@^11 @nestjs/platform-express@^11 @nestjs/platform-fastify@^11 @nestjs/testing@^11
fi
node -e "console.log('NestJS', require('./.nest11/node_modules/@nestjs/core/package.json').version)"
NEST_PEERS_DIR="$PWD/.nest11" node --experimental-vm-modules node_modules/jest/bin/jest.js test/e2e "$@"
