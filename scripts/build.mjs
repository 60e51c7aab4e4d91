/**
 * Builds the package's dist/ (`npm run build`, and `npm ci` through `prepare`), as
 * docs/decisions/0049-a-bundled-dist.md says and why:
 *
 * - the types: tsc writes one `.d.ts` per module (the `exports` map's `types`);
 * - the library: esbuild bundles the entry points (`troupe`, `troupe/client`,
 *   `troupe/schema`) with troupe's own modules, code shared between them in
 *   `dist/chunks/`, every package left external (the caller's `effect` is the one
 *   troupe uses), each lazily loaded driver in a chunk of its own;
 * - the program: esbuild bundles `dist/cli/Main.js` with effect and the @effect
 *   packages inlined, since the program is a process of its own and nobody shares
 *   its effect; troupe's other dependencies stay external, and each subcommand's
 *   code is a chunk loaded when it runs;
 * - the help printed ahead (decision 0050): `dist/cli/Start.js`, which bin/troupe.mjs
 *   runs, prints for a help form (`troupe --help`, …) the text the built program
 *   printed for it here (`dist/cli/help.json`), and loads `Main` for the rest;
 * - the inspector's page: src/inspector/Build.ts bundles src/inspector/page into
 *   `dist/inspector/assets/`.
 *
 *   node scripts/build.mjs [--out DIR]
 *
 * Run it from the repository's root; `--out` writes elsewhere (the package tests
 * and the start-up bench build into a package directory of their own).
 */
import { build } from "esbuild"
import { execFileSync } from "node:child_process"
import { readFileSync, rmSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const repo = fileURLToPath(new URL("..", import.meta.url))
const at = process.argv.indexOf("--out")
const out = resolve(at > 0 ? process.argv[at + 1] : join(repo, "dist"))
const manifest = JSON.parse(readFileSync(join(repo, "package.json"), "utf8"))

/** What esbuild shares between both bundles. */
const common = {
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  sourcemap: true,
  logLevel: "warning"
}

/** Packages the program inlines: effect and its family, and the pure modules they import. */
const inlined = (name) => name === "effect" || name.startsWith("@effect/")
/**
 * Packages the program leaves to node_modules: troupe's own dependencies (drivers, some
 * native) and the build-time ones it loads in a source checkout (esbuild, tsx), and the
 * optional native add-ons their packages look for.
 */
const programExternal = [
  ...Object.keys(manifest.dependencies),
  ...Object.keys(manifest.devDependencies),
  "bufferutil",
  "utf-8-validate",
  "cbor-extract",
  "pg-native"
].filter((name) => !inlined(name)).flatMap((name) => [name, `${name}/*`])

rmSync(out, { recursive: true, force: true })
execFileSync(process.execPath, [
  join(repo, "node_modules", "typescript", "bin", "tsc"),
  "-p",
  join(repo, "tsconfig.build.json"),
  "--outDir",
  out,
  "--emitDeclarationOnly"
], { cwd: repo, stdio: "inherit" })

await build({
  ...common,
  entryPoints: {
    "index": join(repo, "src/index.ts"),
    "client/index": join(repo, "src/client/index.ts"),
    "schema/index": join(repo, "src/schema/index.ts")
  },
  outdir: out,
  chunkNames: "chunks/[name]-[hash]",
  packages: "external"
})

await build({
  ...common,
  // Start (what bin/troupe.mjs runs) answers the help forms from help.json and loads Main for the rest.
  entryPoints: { Start: join(repo, "src/cli/Start.ts"), Main: join(repo, "src/cli/Main.ts") },
  outdir: join(out, "cli"),
  chunkNames: "[name]-[hash]",
  external: programExternal,
  // The CommonJS modules inlined with the @effect packages (ws and the like) call `require`.
  banner: { js: `import { createRequire as __troupeCreateRequire } from "node:module"; const require = __troupeCreateRequire(import.meta.url);` }
})

/**
 * The help the program prints, printed ahead (decision 0050): each of `Main.helpForms`
 * run through the built program's `main` in one process, into a pipe and onto a
 * terminal that takes colours, kept when it exits 0 with nothing on stderr; `Start`
 * prints the text for the same command line without loading @effect/cli.
 */
const printHelpAhead = `
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
const dir = process.argv[1]
const Main = await import(pathToFileURL(join(dir, "Main.js")).href)
const capture = async (args) => {
  const written = { stdout: "", stderr: "" }
  const writes = { stdout: process.stdout.write, stderr: process.stderr.write }
  for (const name of ["stdout", "stderr"]) process[name].write = (chunk) => ((written[name] += String(chunk)), true)
  try {
    return { code: await Main.runPromise(["node", "troupe", ...args]), ...written }
  } finally {
    for (const name of ["stdout", "stderr"]) process[name].write = writes[name]
  }
}
const plain = []
for (const args of Main.helpForms()) plain.push(await capture(args))
// As on a terminal that takes colours (Terminal.colours).
Object.defineProperty(process.stdout, "isTTY", { value: true, configurable: true })
delete process.env.NO_COLOR
process.env.TERM = "xterm-256color"
const forms = []
for (const [i, args] of Main.helpForms().entries()) {
  const coloured = await capture(args)
  const ok = (printed) => printed.code === 0 && printed.stderr === "" && printed.stdout !== ""
  if (ok(plain[i]) && ok(coloured)) forms.push({ argv: args, plain: plain[i].stdout, coloured: coloured.stdout })
}
writeFileSync(join(dir, "help.json"), JSON.stringify({ forms }))
process.exit(0)
`
execFileSync(process.execPath, ["--input-type=module", "-e", printHelpAhead, join(out, "cli")], {
  cwd: repo,
  stdio: "inherit",
  env: Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("TROUPE_") && !key.startsWith("OTEL_")))
})

// From the sources (tsx, a devDependency like esbuild), so that `--out` may be outside the repository.
execFileSync(process.execPath, ["--import", "tsx", join(repo, "src", "inspector", "Build.ts"), join(repo, "src", "inspector", "page"), join(out, "inspector", "assets")], {
  cwd: repo,
  stdio: "inherit"
})
