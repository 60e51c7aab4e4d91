#!/usr/bin/env node
// The `troupe` program: src/cli/Main.ts, run through tsx (a runtime dependency), so no build step is needed.
import { register } from "tsx/esm/api"

register()
const { runMain } = await import("../src/cli/Main.ts")
runMain(process.argv)
