/**
 * The run of `troupe run "PROMPT"`: one turn on an embedded runtime, no daemon needed.
 * It opens the store (by default the SQLite file the daemon uses too),
 * creates a session of the chosen agent as the local user, sends the prompt
 * and shows the turn (`TurnView`): streamed text on stdout, tool calls and the
 * outcome with its usage on stderr. `--json` prints the session's events as
 * JSON lines instead.
 *
 * Approvals are asked on the terminal (`y`es, `n`o, `a`lways for this
 * session), or answered by `--approve all|none`; without a terminal and
 * without `--approve`, they are denied. Client tools have no client here: they
 * are answered with a tool error the model sees.
 *
 * Exit: 0 when the turn completed, 1 when it failed or was interrupted, 130
 * when Ctrl-C interrupted it (the turn is recorded as interrupted).
 *
 * @since 0.1.0
 */
import { Context, Deferred, Effect, Either, Option, Stream } from "effect"
import * as readline from "node:readline"
import type { Agent } from "../schema/Agent.js"
import type { PendingCallback } from "../schema/Callback.js"
import type { TurnEnded } from "../schema/Record.js"
import { Sessions } from "../services/Sessions.js"
import * as EventFormat from "./EventFormat.js"
import * as ExitCode from "./ExitCode.js"
import * as LocalPrincipal from "./LocalPrincipal.js"
import * as ModelOption from "./ModelOption.js"
import * as Output from "./Output.js"
import type { RunOptions } from "./RunCommand.js"
import * as Setup from "./Setup.js"
import * as Signals from "./Signals.js"
import * as TurnView from "./TurnView.js"

type Decision = { readonly decision: "approve" | "approve_session" | "deny"; readonly reason?: string }

/** Asks y/n/a on the terminal. */
const ask = (question: string): Effect.Effect<Decision> =>
  Effect.async<Decision>((resume) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr })
    const prompt = () =>
      rl.question(question, (answer) => {
        const word = answer.trim().toLowerCase()
        if (word === "y" || word === "yes") return done({ decision: "approve" })
        if (word === "a" || word === "always") return done({ decision: "approve_session" })
        if (word === "n" || word === "no" || word === "") return done({ decision: "deny", reason: "denied on the terminal" })
        prompt()
      })
    const done = (decision: Decision) => {
      rl.close()
      resume(Effect.succeed(decision))
    }
    prompt()
    return Effect.sync(() => rl.close())
  })

/** Picks the agent to run. */
const pickAgent = (agents: ReadonlyArray<Agent>, name: Option.Option<string>) =>
  Option.match(name, {
    onNone: () => Effect.succeed(agents[0]!),
    onSome: (wanted) =>
      Option.match(Option.fromNullable(agents.find((agent) => agent.name === wanted)), {
        onNone: () =>
          Effect.fail(ExitCode.usage(
            `--agent: no agent is named ${wanted} (there are: ${agents.map((agent) => agent.name).join(", ")})`
          )),
        onSome: Effect.succeed
      })
  })

/** Runs one turn; see the module comment. */
export const run = (o: RunOptions): Effect.Effect<void, ExitCode.CliFailure> =>
  Effect.scoped(Effect.gen(function*() {
    const signal = yield* Signals.listen
    const out = yield* Output.make({ json: o.json })
    const telemetry = yield* Setup.telemetry
    const resolved = yield* Setup.resolve(o).pipe(Effect.mapError((error) => error.failure))
    const { agents, model } = resolved
    const agent = yield* pickAgent(agents, o.agent)
    const missing = ModelOption.missingDefault(model, [agent])
    if (Option.isSome(missing)) return yield* Effect.fail(ExitCode.usage(missing.value))
    if (Option.isSome(model.note) && !o.json) yield* out.note(`troupe: ${model.note.value}`)

    yield* out.status("starting")
    const runtime = yield* Setup.runtime(resolved, telemetry).pipe(Effect.mapError((error) => error.failure))
    const sessions = Context.get(runtime, Sessions)
    const principal = LocalPrincipal.current()
    const internal = (what: string) => (error: { readonly message: string }) =>
      new ExitCode.CliFailure({ code: ExitCode.ExitCode.Internal, message: `${what}: ${error.message}` })

    const session = yield* sessions.create(principal, {
      agent,
      title: Option.getOrElse(o.title, () => EventFormat.clip(o.prompt, 80))
    }).pipe(Effect.mapError(internal("cannot create the session")))

    // The view shows the first turn of this new session: the prompt's.
    const view = TurnView.make(out, { _tag: "first" })
    const subscribed = yield* Deferred.make<void>()
    const ended = yield* Deferred.make<TurnEnded>()
    yield* sessions.events(principal, session.id, { volatile: true }).pipe(
      // The first event is replayed from the log after the live subscription began:
      // from then on, no delta of the turn can be missed.
      Stream.tap(() => Deferred.succeed(subscribed, undefined)),
      Stream.runForEach((event) =>
        Effect.flatMap(view.onEvent(event), Option.match({
          onNone: () => Effect.void,
          onSome: (record) => Deferred.succeed(ended, record)
        }))
      ),
      Effect.catchAll((error) => Deferred.die(ended, error)),
      Effect.ensuring(Deferred.succeed(subscribed, undefined)),
      Effect.forkScoped
    )
    yield* Deferred.await(subscribed)

    const interactive = Option.isNone(o.approve) && Output.stdinIsTty() && Output.stderrIsTty()
    const answer = (callback: PendingCallback): Effect.Effect<Option.Option<unknown>> => {
      const request = callback.request
      if (request._tag === "client_tool") {
        return Effect.as(
          out.note(`troupe: ${request.toolName} is a client tool, and troupe run has no client to run it`),
          Option.some({ output: { error: `no client to run ${request.toolName}: troupe run has no client tools` }, isError: true })
        )
      }
      const call = EventFormat.toolCall(request.toolName, request.arguments)
      if (Option.isSome(o.approve)) {
        return Effect.succeed(Option.some(
          o.approve.value === "all" ? { decision: "approve" } : { decision: "deny", reason: "denied by --approve none" }
        ))
      }
      if (!interactive) {
        return Effect.as(
          out.note(`troupe: denied ${call}: no terminal to ask for approval (use --approve all)`),
          Option.some({ decision: "deny", reason: "no one to approve it" })
        )
      }
      return Effect.gen(function*() {
        yield* out.status(undefined)
        yield* out.endLine
        const decision = yield* ask(`${Output.yellow("?")} allow ${call}? [y]es, [n]o, [a]lways for this session: `)
        yield* out.status("thinking")
        return Option.some(decision)
      })
    }
    yield* sessions.provideCallbacks(principal, session.id, ["approval", "client_tool"], answer).pipe(
      Effect.catchAll(() => Effect.void),
      Effect.forkScoped
    )

    const accepted = yield* sessions.send(principal, session.id, { text: o.prompt }).pipe(
      Effect.mapError(internal("cannot send the prompt"))
    )
    const first = yield* Effect.raceFirst(
      Effect.map(Deferred.await(ended), Either.right),
      Effect.map(signal, Either.left)
    )
    const record = Either.isRight(first)
      ? first.right
      : yield* Effect.gen(function*() {
        // Ctrl-C: stop the turn so the log says so, then show how it ended.
        yield* out.status("interrupting")
        if (accepted.turnId !== undefined) {
          yield* Effect.ignore(sessions.interrupt(principal, session.id, accepted.turnId, `interrupted by ${first.left}`))
        }
        const last = yield* Deferred.await(ended).pipe(Effect.timeout("5 seconds"), Effect.option)
        return yield* Effect.fail(new ExitCode.CliFailure({
          code: ExitCode.ExitCode.Interrupted,
          message: Option.isSome(last) ? "" : "interrupted"
        }))
      })
    if (record.outcome !== "completed") {
      return yield* Effect.fail(ExitCode.turnFailed(""))
    }
  }))

