import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // PostgreSQL suites create their own schema per run; files may run in parallel.
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
})
