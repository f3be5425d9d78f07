import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'dist/',
      'dist-sample/',
      'coverage/',
      'bench/node_modules/',
      'bench/dist/',
      // Written by the docs tests and check:docs from the docs' code blocks.
      'test/.doc-blocks/',
      '.check-docs/',
      // Written and removed by npm run lint:api.
      '.api-declarations/',
      // Projects of their own (nest new), with their own lint setup.
      'test/consumers/',
      // nestjs/throttler's e2e suite, vendored as upstream wrote it (test/throttler-suite/README.md).
      'test/throttler-suite/vendor/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        Buffer: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
);
