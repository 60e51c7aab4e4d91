/**
 * Keeps Effect's log lines (`timestamp=… level=WARN fiber=#88 message=…`, or
 * the pretty logger's `[12:00:00.000] WARN (#88): …`) out of the output of
 * tests that pass: tests that check an error path make the code log on
 * purpose. They are captured per test and printed only if the test fails.
 * Anything else a test prints (its own figures, vitest's notes) goes through.
 * Loaded for every test file by vitest.config.ts (`setupFiles`).
 */
import { beforeEach } from "vitest"

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g
const EFFECT_LOG = /^(timestamp=\S+ level=[A-Z]+ fiber=#\d+|\[\d{2}:\d{2}:\d{2}\.\d{3}\] [A-Z]+ \(#\d+\))/

let captured: Array<string> = []

for (const method of ["log", "info", "warn", "error", "debug"] as const) {
  const original = console[method].bind(console)
  console[method] = (...args: Array<unknown>) => {
    const first = args[0]
    if (typeof first === "string" && EFFECT_LOG.test(first.replace(ANSI, ""))) {
      captured.push(args.map((arg) => (typeof arg === "string" ? arg : String(arg))).join(" "))
      return
    }
    original(...args)
  }
}

beforeEach(({ onTestFailed }) => {
  captured = []
  onTestFailed(() => {
    if (captured.length === 0) return
    process.stderr.write(`--- log lines of the failed test ---\n${captured.join("\n")}\n`)
  })
})
