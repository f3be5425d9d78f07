import { describe } from '@jest/globals';
import { concurrencySuite } from '../conformance/concurrency.js';
import { penaltySuite } from '../conformance/penalties.js';
import { refundSuite } from '../conformance/refunds.js';
import { slidingLogSuite } from '../conformance/sliding-log.js';
import { conformanceSuite } from '../conformance/suite.js';
import { memoryKind } from '../conformance/stores.js';

describe('conformance: memory', () => conformanceSuite(memoryKind));
describe('penalties: memory', () => penaltySuite(memoryKind));
describe('refunds: memory', () => refundSuite(memoryKind));
describe('concurrency: memory', () => concurrencySuite(memoryKind));
describe('sliding log: memory', () => slidingLogSuite(memoryKind));
