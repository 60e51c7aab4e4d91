import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

export default defineConfig({
  // `import … from "troupe"` (the package's name) means the sources under test, never a dist/
  // that may be stale or not built; tsc and tsx read the same mapping from tsconfig.json's paths.
  resolve: {
    alias: [
      { find: /^troupe$/, replacement: fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
      { find: /^troupe\/(client|schema)$/, replacement: fileURLToPath(new URL("./src/$1/index.ts", import.meta.url)) }
    ]
  },
  test: {
    include: ["test/**/*.test.ts"],
    // Effect's log lines from tests that pass are captured, and shown only when the test fails.
    setupFiles: ["test/support/quietLogs.ts"],
    // PostgreSQL suites create their own schema per run; files may run in parallel.
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})
