import { describe } from '@jest/globals';
import { concurrencySuite } from '../conformance/concurrency.js';
import { penaltySuite } from '../conformance/penalties.js';
import { refundSuite } from '../conformance/refunds.js';
import { slidingLogSuite } from '../conformance/sliding-log.js';
import { conformanceSuite } from '../conformance/suite.js';
import { standaloneKind } from '../conformance/stores.js';

describe('conformance: standalone', () => conformanceSuite(standaloneKind));
describe('penalties: standalone', () => penaltySuite(standaloneKind));
describe('refunds: standalone', () => refundSuite(standaloneKind));
describe('concurrency: standalone', () => concurrencySuite(standaloneKind));
describe('sliding log: standalone', () => slidingLogSuite(standaloneKind));
