import { defineConfig } from 'vitest/config';

// The Temporal SDK's native bridge has crashed under thread pools: run test files in forks.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/globalSetup.ts'],
    // each file ends with none of its processes or runs left to take the next file's jobs
    setupFiles: ['test/setup/isolation.ts'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    fileParallelism: false,
  },
});
