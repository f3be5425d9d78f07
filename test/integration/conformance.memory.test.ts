import { describe } from '@jest/globals';
import { conformanceSuite } from '../conformance/suite.js';
import { memoryKind } from '../conformance/stores.js';

describe('conformance: memory', () => conformanceSuite(memoryKind));
