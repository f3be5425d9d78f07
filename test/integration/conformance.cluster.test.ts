import { describe } from '@jest/globals';
import { concurrencySuite } from '../conformance/concurrency.js';
import { penaltySuite } from '../conformance/penalties.js';
import { refundSuite } from '../conformance/refunds.js';
import { slidingLogSuite } from '../conformance/sliding-log.js';
import { conformanceSuite } from '../conformance/suite.js';
import { clusterKind } from '../conformance/stores.js';

describe('conformance: cluster', () => conformanceSuite(clusterKind));
describe('penalties: cluster', () => penaltySuite(clusterKind));
describe('refunds: cluster', () => refundSuite(clusterKind));
describe('concurrency: cluster', () => concurrencySuite(clusterKind));
describe('sliding log: cluster', () => slidingLogSuite(clusterKind));
