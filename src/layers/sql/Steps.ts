/**
 * A write transaction as a generator of statements (`Steps`): the SQL store's
 * write paths are written once this way, and each dialect runs them its own
 * way (docs/store.md, "three paths").
 *
 * @since 0.1.0
 */
import * as Either from "effect/Either"

/** One statement of a commit: `?`-placeholder text and the parameters it binds. */
export interface Step {
  readonly text: string
  readonly params: ReadonlyArray<unknown>
}

/**
 * A write transaction as a sequence of statements: it yields each one and is
 * resumed with that statement's rows; it returns its result, or why it is
 * refused (the caller then rolls the transaction back). Whoever runs it holds
 * the write transaction: the SQL store runs the statements one Effect at a
 * time, the SQLite layer all at once inside one synchronous transaction.
 */
export type Steps<A, E> = Generator<Step, Either.Either<A, E>, ReadonlyArray<never>>
