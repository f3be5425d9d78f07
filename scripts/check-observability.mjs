// Checks docs/observability/ against a real Prometheus that scraped the sample app under
// traffic and loaded rules.yml (scripts/check-observability.sh starts them):
//   - dashboard.json is well formed (unique panel ids, every query on the ${datasource}
//     variable) and each of its panel queries and variable queries returns a series;
//   - every alert of rules.yml is loaded, evaluates without error, and each metric selector
//     in its expression returns a series (the whole expression returns nothing unless the
//     alert fires);
//   - the Loki rule of loki-rules.yml finds the sample app's rate_limit.blocked lines, and its
//     regexp and `json` step yield the fields it sums by and unwraps.
// Exits 1, listing every failure. Usage:
//   node scripts/check-observability.mjs --prometheus http://127.0.0.1:9090 --app-log app.log [--dir docs/observability]
/* global fetch, AbortSignal, URL */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    prometheus: { type: 'string' },
    'app-log': { type: 'string' },
    dir: { type: 'string', default: 'docs/observability' },
  },
});
if (!args.prometheus || !args['app-log']) {
  console.error('usage: check-observability.mjs --prometheus <url> --app-log <file> [--dir <dir>]');
  process.exit(2);
}
const prometheus = args.prometheus.replace(/\/+$/, '');
/** What Grafana's $__rate_interval stands for here: several 1 s scrapes, within the traffic. */
const RATE_INTERVAL = '1m';
/** How long Prometheus may take to become ready, scrape, and evaluate the rules once. */
const READY_WITHIN_MS = 30_000;

const failures = [];
const fail = (message) => failures.push(message);

async function api(path, params = {}) {
  const url = new URL(`${prometheus}${path}`);
  for (const [key, value] of Object.entries(params)) url.searchParams.append(key, value);
  const response = await fetch(url, { signal: AbortSignal.timeout(5000) });
  const body = await response.json();
  if (body.status !== 'success') throw new Error(`${path}: ${body.errorType}: ${body.error}`);
  return body.data;
}

/** Polls `check` until it returns true; false after READY_WITHIN_MS. */
async function until(check) {
  const deadline = Date.now() + READY_WITHIN_MS;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return true;
    await sleep(250);
  }
  return false;
}

/** Series an instant query returns now (a scalar counts as one). */
async function seriesOf(query) {
  const data = await api('/api/v1/query', { query });
  return data.resultType === 'vector' || data.resultType === 'matrix' ? data.result.length : 1;
}

/**
 * The query's value now is above 0: the traffic really reached the metric (a series at 0, as
 * the backend error kinds are exported from the start, proves nothing).
 */
async function expectPositive(what, query) {
  try {
    const data = await api('/api/v1/query', { query });
    const value = Number(data.result?.[0]?.value?.[1]);
    if (!(value > 0))
      fail(`${what}: ${query} is ${Number.isNaN(value) ? 'empty' : value}, not > 0`);
    else console.log(`ok  ${what}: ${value}`);
  } catch (error) {
    fail(`${what}: ${error.message}`);
  }
}

async function expectSeries(what, query) {
  try {
    const count = await seriesOf(query);
    if (count === 0) fail(`${what}: no series for ${query}`);
    else console.log(`ok  ${what}: ${count} series`);
  } catch (error) {
    fail(`${what}: ${error.message}`);
  }
}

// --- Prometheus is up, has scraped the app and evaluated the rules.
const alertNames = [
  ...readFileSync(join(args.dir, 'rules.yml'), 'utf8').matchAll(/^\s*- alert: (\S+)/gm),
].map((m) => m[1]);
if (alertNames.length === 0) fail('rules.yml: no alert found');
const rulesReady = () =>
  api('/api/v1/rules').then((data) => {
    const rules = data.groups.flatMap((g) => g.rules);
    return (
      alertNames.every((name) => rules.some((r) => r.name === name)) &&
      rules.every((r) => r.lastEvaluation && !r.lastEvaluation.startsWith('0001-'))
    );
  });
const scraped = () => seriesOf('up{job="sample-app"} == 1').then((n) => n > 0);
if (!(await until(scraped)) || !(await until(rulesReady))) {
  console.error(`Prometheus at ${prometheus} did not scrape the app or load the rules in time`);
  process.exit(1);
}

// --- The demo's traffic reached the metrics: decisions, refusals among them, store calls.
await expectPositive('decisions counted', 'sum(rate_limit_decisions_total)');
await expectPositive('refusals counted', 'sum(rate_limit_decisions_total{outcome="blocked"})');
await expectPositive('store calls timed', 'sum(rate_limit_store_duration_seconds_count)');

// --- The dashboard.
const dashboard = JSON.parse(readFileSync(join(args.dir, 'dashboard.json'), 'utf8'));
const variables = dashboard.templating.list;
if (!variables.some((v) => v.name === 'datasource' && v.type === 'datasource')) {
  fail('dashboard: no datasource variable');
}
/** Grafana's variables as the dashboard's "All" selects them. */
function substitute(query) {
  let out = query.replaceAll('$__rate_interval', RATE_INTERVAL);
  for (const v of variables.filter((v) => v.type === 'query')) {
    out = out
      .replaceAll(`\${${v.name}}`, v.allValue)
      .replace(new RegExp(`\\$${v.name}\\b`, 'g'), v.allValue);
  }
  if (out.includes('$')) fail(`dashboard: a variable left unreplaced in ${out}`);
  return out;
}
const onDatasourceVariable = (ds) => ds?.type === 'prometheus' && ds.uid === '${datasource}';

for (const v of variables.filter((v) => v.type === 'query')) {
  const match = /^label_values\((.+),\s*(\w+)\)$/.exec(v.query.query);
  if (!match) {
    fail(`dashboard variable ${v.name}: expected label_values(selector, label)`);
    continue;
  }
  if (!onDatasourceVariable(v.datasource))
    fail(`dashboard variable ${v.name}: not on ${'${datasource}'}`);
  try {
    const [, selector, label] = match;
    const values = await api(`/api/v1/label/${label}/values`, { 'match[]': substitute(selector) });
    if (values.length === 0) fail(`dashboard variable ${v.name}: no value for ${v.query.query}`);
    else console.log(`ok  variable ${v.name}: ${values.join(', ')}`);
  } catch (error) {
    fail(`dashboard variable ${v.name}: ${error.message}`);
  }
}

const ids = new Set();
for (const panel of dashboard.panels) {
  if (ids.has(panel.id)) fail(`dashboard: panel id ${panel.id} used twice`);
  ids.add(panel.id);
  if (panel.type === 'row') continue;
  if (!panel.description) fail(`panel "${panel.title}": no description`);
  if (!onDatasourceVariable(panel.datasource))
    fail(`panel "${panel.title}": not on ${'${datasource}'}`);
  if (!panel.targets?.length) fail(`panel "${panel.title}": no query`);
  for (const target of panel.targets ?? []) {
    if (!onDatasourceVariable(target.datasource))
      fail(`panel "${panel.title}" ${target.refId}: not on ${'${datasource}'}`);
    await expectSeries(`panel "${panel.title}" ${target.refId}`, substitute(target.expr));
  }
}

// --- The alerts: loaded, healthy, and each selector of their expression finds series.
const loaded = (await api('/api/v1/rules')).groups.flatMap((g) => g.rules);
for (const name of alertNames) {
  const rule = loaded.find((r) => r.name === name);
  if (!rule) {
    fail(`alert ${name}: not loaded by Prometheus`);
    continue;
  }
  if (rule.health !== 'ok') fail(`alert ${name}: health ${rule.health}: ${rule.lastError}`);
  const selectors = new Set(
    [...rule.query.matchAll(/\b(rate_limit_[a-zA-Z0-9_:]*)\s*(\{[^}]*\})?/g)].map((m) =>
      m[0].trim(),
    ),
  );
  if (selectors.size === 0) fail(`alert ${name}: no rate_limit_ selector in ${rule.query}`);
  for (const selector of selectors) await expectSeries(`alert ${name} ${selector}`, selector);
}

// --- The Loki rule: its line filter, regexp and json step on the app's real log lines.
const loki = readFileSync(join(args.dir, 'loki-rules.yml'), 'utf8');
const filter = /\|= "([^"]+)"/.exec(loki)?.[1];
const pattern = /\| regexp `([^`]+)`/.exec(loki)?.[1];
if (!filter || !pattern) {
  fail('loki-rules.yml: no line filter or regexp found');
} else {
  // LogQL's regexp is Go RE2: (?P<name>...) is JavaScript's (?<name>...).
  const regexp = new RegExp(pattern.replaceAll('(?P<', '(?<'));
  const lines = readFileSync(args['app-log'], 'utf8')
    .split('\n')
    .filter((line) => line.includes(filter));
  if (lines.length === 0) fail(`loki rule: no "${filter}" line in the app's log`);
  for (const line of lines) {
    const detail = regexp.exec(line)?.groups?.detail;
    let fields;
    try {
      fields = JSON.parse(detail);
    } catch {
      fail(`loki rule: the regexp yields no JSON detail from: ${line}`);
      continue;
    }
    if (typeof fields.route !== 'string' || typeof fields.identity !== 'string') {
      fail(`loki rule: no route or identity to sum by in: ${line}`);
    }
    if (!Number.isInteger(fields.count) || fields.count < 1) {
      fail(`loki rule: no count to unwrap in: ${line}`);
    }
  }
  if (lines.length) console.log(`ok  loki rule: ${lines.length} ${filter} lines parsed`);
}

if (failures.length) {
  console.error(`\n${failures.length} failed:\n${failures.map((f) => `  ${f}`).join('\n')}`);
  process.exit(1);
}
console.log('\nevery dashboard query and alert selector returned a series');
