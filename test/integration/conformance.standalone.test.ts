import { describe } from '@jest/globals';
import { conformanceSuite } from '../conformance/suite.js';
import { standaloneKind } from '../conformance/stores.js';

describe('conformance: standalone', () => conformanceSuite(standaloneKind));
