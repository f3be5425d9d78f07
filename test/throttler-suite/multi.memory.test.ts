// The throttler's own e2e spec (vendor/, see README.md), on the drop-in with the memory store.
import { runVendored } from './run.js';

// A path in a variable: the vendored files are not type-checked (upstream wrote them
// for CommonJS, extensionless imports included); Jest resolves it at run time.
const spec = './vendor/multi/multi-throttler.e2e-spec.js';
await runVendored('memory', () => import(spec));
