// A module resolve hook (node:module `register`): appends every URL the program resolves to the
// file it is given, one a line, before the module loads. test/Startup.test.ts reads it.
import { appendFileSync } from "node:fs"

let out = ""

/** Receives the file to append to. */
export const initialize = (data) => {
  out = data.out
}

/** Resolves as the next hook does, and records the result. */
export const resolve = async (specifier, context, next) => {
  const result = await next(specifier, context)
  appendFileSync(out, `${result.url}\n`)
  return result
}
