/**
 * The program as built (`dist/cli/Start.js`, what bin/troupe.mjs runs). A
 * command line whose whole answer is help or the version (`Main.helpForms`:
 * `troupe --help`, `troupe sessions -h`, …) is answered with the text the
 * build printed for it through the real program and wrote beside this file
 * (`help.json`, plain and coloured), written by the same rules as the
 * program writes (`Terminal`), without loading @effect/cli and the commands'
 * declarations (~0.4 s of CPU). Any other command line, or a build without
 * the texts (a source checkout run through tsx), runs the program (`Main`).
 * Decision 0050.
 *
 * @since 0.3.0
 */
import { readFileSync } from "node:fs"
import * as Terminal from "./Terminal.js"

/** What the build wrote: each help form's command line (without `node troupe`) and what the program printed for it. */
export interface HelpTexts {
  readonly forms: ReadonlyArray<{
    readonly argv: ReadonlyArray<string>
    /** Printed into a pipe, or with `NO_COLOR`. */
    readonly plain: string
    /** Printed on a terminal that takes colours. */
    readonly coloured: string
  }>
}

/** The file beside the built program that holds the texts. */
export const FILE = "help.json"

/** What the program would print for `args`, when the build printed it ahead; otherwise `undefined`. */
export const printedAhead = (args: ReadonlyArray<string>, texts: HelpTexts, coloured: boolean): string | undefined => {
  const form = texts.forms.find((form) => form.argv.length === args.length && form.argv.every((arg, i) => arg === args[i]))
  return form === undefined ? undefined : coloured ? form.coloured : form.plain
}

const readTexts = (): HelpTexts | undefined => {
  try {
    return JSON.parse(readFileSync(new URL(`./${FILE}`, import.meta.url), "utf8")) as HelpTexts
  } catch {
    return undefined
  }
}

/**
 * Whether `args` may be a help form: every one is empty or ends with one of these
 * (`Main.helpForms`), and any other command line runs the program without reading
 * the texts (~40 M instructions to read and parse, a sixtieth of `troupe run`).
 */
export const mayBeHelp = (args: ReadonlyArray<string>): boolean =>
  args.length === 0 || ["--help", "-h", "--version"].includes(args[args.length - 1]!)

/** Prints a help form's text, or runs the program (`Main.runMain`). */
export const runMain = (argv: ReadonlyArray<string> = process.argv): void => {
  const args = argv.slice(2)
  const texts = mayBeHelp(args) ? readTexts() : undefined
  const text = texts === undefined ? undefined : printedAhead(args, texts, Terminal.colours(process.stdout))
  if (text === undefined) {
    void import("./Main.js").then((Main) => Main.runMain(argv))
    return
  }
  Terminal.endQuietlyOnClosedPipe()
  process.stdout.write(text)
}
