/**
 * Free text on the command line (a prompt, a message, a title): one quoted
 * argument or several words, joined with single spaces, as a shell user
 * types them (`troupe run hello world`).
 *
 * @since 0.1.0
 */
import { Args } from "@effect/cli"

/** One or more words named `name`, answered as one text. */
export const args = (name: string, description: string): Args.Args<string> =>
  Args.text({ name }).pipe(
    Args.withDescription(description),
    Args.atLeast(1),
    Args.map((words) => words.join(" "))
  )
