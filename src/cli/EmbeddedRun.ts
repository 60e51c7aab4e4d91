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
 * An agent whose `noToolPolicy` is `wait_user` asks the user for more after a
 * reply without tool calls: on a terminal the run reads the next message at a
 * `you>` prompt and the same turn goes on; an empty line, Ctrl-D, or no
 * terminal at all ends the run with the turn left waiting (exit 0), to be
 * continued with `troupe sessions send` through a daemon on the same store.
 *
 * Exit: 0 when the turn completed (or waits for the user), 1 when it failed or
 * was interrupted, 130 when Ctrl-C interrupted it (the turn is recorded as
 * interrupted).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as readline from "node:readline"
import type { Agent } from "../schema/Agent.js"
import type { AnswerOf, PendingCallback } from "../schema/Callback.js"
import type { TurnEnded } from "../schema/Record.js"
import { Sessions } from "../services/Sessions.js"
import * as DemoAgent from "./DemoAgent.js"
import * as EventFormat from "./EventFormat.js"
import * as ExitCode from "./ExitCode.js"
import * as LocalPrincipal from "./LocalPrincipal.js"
import * as ModelOption from "./ModelOption.js"
import * as Output from "./Output.js"
import type { RunOptions } from "./RunOptions.js"
import * as Setup from "./Setup.js"
import * as Signals from "./Signals.js"
import * as TurnView from "./TurnView.js"

type Decision = { readonly decision: "approve" | "approve_session" | "deny"; readonly reason?: string }

/** What the user typed at a prompt: a line, the end of input (Ctrl-D or an empty line), or Ctrl-C. */
type Prompted = Data.TaggedEnum<{
  Line: { readonly text: string }
  End: {}
  Interrupted: {}
}>
const Prompted = Data.taggedEnum<Prompted>()

/** Reads one line on the terminal. */
const readLine = (prompt: string): Effect.Effect<Prompted> =>
  Effect.async<Prompted>((resume) => {
    const rl = readline.createInterface({ input: process.stdin, output: process.stderr })
    let settled = false
    const done = (answer: Prompted) => {
      if (settled) return
      settled = true
      rl.close()
      resume(Effect.succeed(answer))
    }
    rl.on("SIGINT", () => done(Prompted.Interrupted()))
    rl.on("close", () => done(Prompted.End()))
    rl.question(prompt, (line) => done(line.trim() === "" ? Prompted.End() : Prompted.Line({ text: line })))
    return Effect.sync(() => {
      settled = true
      rl.close()
    })
  })

const deniedOnTerminal: Decision = { decision: "deny", reason: "denied on the terminal" }

/** Asks y/n/a on the terminal until one of them comes; no answer (an empty line, Ctrl-D, Ctrl-C) is no. */
const ask = (question: string): Effect.Effect<Decision> =>
  Effect.flatMap(readLine(question), (answer): Effect.Effect<Decision> => {
    if (answer._tag !== "Line") return Effect.succeed(deniedOnTerminal)
    const word = answer.text.trim().toLowerCase()
    if (word === "y" || word === "yes") return Effect.succeed({ decision: "approve" })
    if (word === "a" || word === "always") return Effect.succeed({ decision: "approve_session" })
    if (word === "n" || word === "no") return Effect.succeed(deniedOnTerminal)
    return ask(question)
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
    if (Option.isSome(model.note) && !o.json) {
      const demo = !resolved.fromFile && agent.name === DemoAgent.demo.name
      yield* out.note(`troupe: ${model.note.value}: ${demo ? "using the built-in demo agent on the scripted model" : `the scripted model answers ${agent.name}`}`)
    }

    // Tools the file declares without code run on a client, and `run` has none: said before the turn, not at the call.
    const clientTools = agent.tools.filter((tool) => tool.client).map((tool) => tool.name)
    if (clientTools.length > 0 && !o.json) {
      yield* out.note(
        `troupe: ${clientTools.join(", ")} ${clientTools.length === 1 ? "is a client tool" : "are client tools"} of ${agent.name}: ` +
          `troupe run has no client to run ${clientTools.length === 1 ? "it" : "them"}, so a call reaches the model as a tool error ` +
          `(serve the agents with \`troupe serve\` and answer with \`troupe sessions answer\` or a client's provider)`
      )
    }
    yield* out.status("starting")
    // It drives the session it sends to and nothing else: another process's sessions are theirs to start.
    const build = Setup.runtime(resolved, telemetry, { claims: false }).pipe(Effect.mapError((error) => error.failure))
    // Retries of the model's calls show on the status line while they happen (the module is loaded already).
    const runtime = yield* (model.kind === "openai_compatible"
      ? Effect.flatMap(Effect.promise(() => import("../layers/OpenAiCompatibleModel.js")), (OpenAiCompatibleModel) =>
        Effect.provideService(build, OpenAiCompatibleModel.RetryNotice, {
          onRetry: (retry) => out.retrying(`retrying after ${retry.cause}, attempt ${retry.attempt} of ${retry.attempts}`)
        }))
      : build)
    const sessions = Context.get(runtime, Sessions)
    const principal = LocalPrincipal.current()
    const internal = (what: string) => (error: { readonly message: string }) =>
      new ExitCode.CliFailure({ code: ExitCode.ExitCode.Internal, message: `${what}: ${error.message}` })

    const session = yield* sessions.create(principal, {
      agent,
      title: Option.getOrElse(o.title, () => EventFormat.clip(o.prompt, 80))
    }).pipe(Effect.mapError(internal("cannot create the session")))

    // The view shows the first turn of this new session: the prompt's.
    const view = TurnView.make(out, { _tag: "first" }, { waitsForUser: agent.noToolPolicy === "wait_user" })
    const subscribed = yield* Deferred.make<void>()
    const steps = yield* Queue.unbounded<TurnView.Step>()
    const ended = yield* Deferred.make<TurnEnded>()
    yield* sessions.events(principal, session.id, { volatile: true }).pipe(
      // The first event is replayed from the log after the live subscription began:
      // from then on, no delta of the turn can be missed.
      Stream.tap(() => Deferred.succeed(subscribed, undefined)),
      Stream.runForEach((event) =>
        Effect.flatMap(view.onEvent(event), Option.match({
          onNone: () => Effect.void,
          onSome: (step) =>
            Effect.zipRight(
              Queue.offer(steps, step),
              step._tag === "Ended" ? Deferred.succeed(ended, step.record) : Effect.void
            )
        }))
      ),
      Effect.catchAll((error) => Deferred.die(ended, error)),
      Effect.ensuring(Deferred.succeed(subscribed, undefined)),
      Effect.forkScoped
    )
    yield* Deferred.await(subscribed)

    const interactive = Option.isNone(o.approve) && Output.stdinIsTty() && Output.stderrIsTty()
    const answer = (callback: PendingCallback): Effect.Effect<Option.Option<AnswerOf>> => {
      const request = callback.request
      if (request._tag === "client_tool") {
        return Effect.as(
          out.note(`troupe: ${request.toolName} is a client tool, and troupe run has no client to run it`),
          Option.some({ output: { error: `no client to run ${request.toolName}: troupe run has no client tools` }, isError: true })
        )
      }
      const call = EventFormat.call(request.toolName, request.arguments)
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
      // Asked with the status line away (nothing erases the prompt); a signal meanwhile leaves the
      // callback open (the turn is interrupted) and closes the prompt, so the program can end.
      return Effect.raceFirst(
        out.asking(ask(`${Output.yellow("?")} allow ${call}? [y]es, [n]o, [a]lways for this session: `)).pipe(
          Effect.tap((decision) => (decision.decision === "deny" ? out.status("thinking") : Effect.void)),
          Effect.map(Option.some)
        ),
        Effect.as(signal, Option.none())
      )
    }
    yield* sessions.provideCallbacks(principal, session.id, ["approval", "client_tool"], answer).pipe(
      Effect.catchAll(() => Effect.void),
      Effect.forkScoped
    )

    const send = (text: string) =>
      sessions.send(principal, session.id, { text }).pipe(Effect.mapError(internal("cannot send the message")))
    const accepted = yield* send(o.prompt)
    // Ctrl-C: stop the turn so the log says so, then show how it ended.
    const interrupted = (by: string) =>
      Effect.gen(function*() {
        yield* out.status("interrupting")
        if (accepted.turnId !== undefined) {
          yield* Effect.ignore(sessions.interrupt(principal, session.id, accepted.turnId, `interrupted by ${by}`))
        }
        const last = yield* Deferred.await(ended).pipe(Effect.timeout("5 seconds"), Effect.option)
        return yield* Effect.fail(new ExitCode.CliFailure({
          code: ExitCode.ExitCode.Interrupted,
          message: Option.isSome(last) ? "" : "interrupted"
        }))
      })
    // A `wait_user` agent's turn goes on with the user's replies, asked on the terminal.
    const converses = Output.stdinIsTty() && Output.stderrIsTty() && !o.json
    for (;;) {
      const next = yield* Effect.raceFirst(Effect.map(Queue.take(steps), Either.right), Effect.map(signal, Either.left))
      if (Either.isLeft(next)) return yield* interrupted(next.left)
      const step = next.right
      if (step._tag === "Ended") {
        if (step.record.outcome !== "completed") return yield* Effect.fail(ExitCode.turnFailed(""))
        return
      }
      // A signal from outside (not the Ctrl-C key, which readline reports) ends the wait as Ctrl-C does.
      const reply = converses
        ? yield* Effect.raceFirst(out.asking(readLine(`${Output.bold("you")}> `)), Effect.as(signal, Prompted.Interrupted()))
        : Prompted.End()
      if (reply._tag === "Interrupted") return yield* interrupted("SIGINT")
      if (reply._tag === "End") {
        // The turn stays open, waiting for the user; the session can be continued through a daemon on this store.
        if (!o.json) {
          yield* out.note(
            `? the agent waits for your reply; session ${session.id} keeps waiting (troupe sessions send ${session.id} "…" through \`troupe serve\` on this store)`
          )
        }
        return
      }
      yield* out.status("thinking")
      yield* send(reply.text)
    }
  }))

