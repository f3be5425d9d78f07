import { describe } from '@jest/globals';
import { conformanceSuite } from '../conformance/suite.js';
import { clusterKind } from '../conformance/stores.js';

describe('conformance: cluster', () => conformanceSuite(clusterKind));
