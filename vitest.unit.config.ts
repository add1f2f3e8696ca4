import { defineConfig } from 'vitest/config';

// The fast lane (`npm run test:unit`): pure rules, parsers and documents, no services. Every
// file under test/unit runs here and in the full suite (vitest.config.ts).
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    pool: 'threads',
    testTimeout: 60_000,
  },
});
