/**
 * Shows one turn as it happens, from the session's events: the assistant's
 * text streamed to stdout, tool calls (`→ name(args)`) and their results
 * (`← result`) on stderr, a status line while the model thinks or a tool runs,
 * and the outcome with the usage at the end. In JSON mode every event is
 * printed as a JSON line instead, and nothing else goes to stdout.
 *
 * Used by `troupe run` (in-process events) and `troupe sessions send --wait`
 * (events from the daemon). Besides the turn's end, the view tells when the
 * turn waits for the user: its agent's `noToolPolicy` is `wait_user` and the
 * model replied without calling a tool. (A message steered into the turn at
 * that very moment makes it go on instead; the view then reports the wait
 * once too often, never too rarely.)
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import type { ClientEvent } from "../client/ForwardCompatible.js"
import type { SessionEvent } from "../schema/Event.js"
import type { TurnId } from "../schema/Ids.js"
import * as Operation from "../schema/Operation.js"
import type { CallbackOpened, TurnEnded } from "../schema/Record.js"
import * as EventFormat from "./EventFormat.js"
import * as Output from "./Output.js"

/**
 * Which turn to show: the first one to start, or the one a message starts
 * (by its input id), or a running turn (a steer goes into it; if it has ended
 * by then, the steer starts a turn of its own input id).
 */
export type Watch =
  | { readonly _tag: "first" }
  | { readonly _tag: "input"; readonly inputId: string; readonly running?: TurnId | undefined }

/** What an event meant for the watched turn: it ended, or it now waits for the user. */
export type Step =
  | { readonly _tag: "Ended"; readonly record: TurnEnded }
  | { readonly _tag: "WaitingForUser"; readonly turnId: TurnId }

/** Shows events; `onEvent` answers a step of the turn when one comes. */
export interface TurnView {
  readonly onEvent: (event: SessionEvent | ClientEvent) => Effect.Effect<Option.Option<Step>>
}

/** How the view reads the turn. */
export interface Options {
  /** Says something about a callback the turn opened (or nothing). */
  readonly onCallback?: ((opened: CallbackOpened) => Option.Option<string>) | undefined
  /** The session's agent answers with `noToolPolicy: "wait_user"`. */
  readonly waitsForUser?: boolean | undefined
}


/** A view of one turn. */
export const make = (out: Output.Output, watch: Watch, options: Options = {}): TurnView => {
  const onCallback = options.onCallback ?? (() => Option.none())
  let turnId: TurnId | undefined = watch._tag === "input" ? watch.running : undefined
  let streamed = false
  const tools = new Set<string>()
  const models = new Set<string>()
  // Model calls this view saw start: a call that failed (a 401) is one the turn made, counted or not.
  let modelCallsStarted = 0

  const ours = (id: TurnId) => turnId !== undefined && id === turnId

  const onEvent = (event: SessionEvent | ClientEvent): Effect.Effect<Option.Option<Step>> =>
    Effect.gen(function*() {
      if (out.json) yield* out.jsonLine(EventFormat.toJson(event))
      // A newer daemon's event this client cannot read: printed in JSON mode, and nothing the view acts on.
      if (event._tag === "unknown") return Option.none()
      if (event._tag === "assistant_delta") {
        if (!ours(event.turnId)) return Option.none()
        streamed = true
        yield* out.status(undefined)
        yield* out.text(event.text)
        return Option.none()
      }
      const record = event.record
      switch (record._tag) {
        case "turn_started": {
          const matches = watch._tag === "first" ? turnId === undefined : record.inputId === watch.inputId
          if (matches) {
            turnId = record.turnId
            yield* out.status("thinking")
          }
          return Option.none()
        }
        case "input_applied": {
          // A message the waiting turn took as the user's reply: that turn is the one to show.
          if (watch._tag === "input" && record.inputId === watch.inputId && record.kind === "steer") {
            turnId = turnId ?? record.turnId
            if (!out.json) yield* out.status("thinking")
          }
          return Option.none()
        }
        case "operation_started": {
          if (!ours(record.turnId)) return Option.none()
          // A summary of the context (compaction) is not a reply of the turn.
          if (record.kind === "compaction") return Option.none()
          if (record.kind !== "tool") {
            models.add(record.operationId)
            modelCallsStarted++
            if (!out.json) yield* out.status("thinking")
            return Option.none()
          }
          if (out.json) return Option.none()
          tools.add(record.operationId)
          yield* out.note(EventFormat.toolCall(record.name, EventFormat.argumentsOf(record.input)))
          yield* out.status(`running ${record.name}`)
          return Option.none()
        }
        case "operation_completed": {
          if (models.delete(record.operationId)) {
            if (!options.waitsForUser || record.isError) return Option.none()
            // Decoded once: a reply without tool calls waits for the user.
            const reply = Operation.decodeModelReply(record.output)
            if (Option.isNone(reply) || reply.value.toolCalls.length > 0) return Option.none()
            if (!out.json) {
              yield* out.status(undefined)
              if (!streamed) yield* out.text(reply.value.text)
              yield* out.endLine
            }
            // The next reply streams anew.
            streamed = false
            return Option.some<Step>({ _tag: "WaitingForUser", turnId: record.turnId })
          }
          if (!tools.delete(record.operationId) || out.json) return Option.none()
          const result = EventFormat.clip(
            typeof record.output === "string" ? record.output : JSON.stringify(record.output) ?? "",
            200
          )
          yield* out.note(Output.dim(`← ${record.isError ? "error: " : ""}${result}`))
          yield* out.status("thinking")
          return Option.none()
        }
        case "callback_opened": {
          if (!ours(record.turnId) || out.json) return Option.none()
          const said = onCallback(record)
          if (Option.isSome(said)) {
            yield* out.status(undefined)
            yield* out.note(said.value)
          }
          return Option.none()
        }
        case "turn_ended": {
          if (!ours(record.turnId)) return Option.none()
          yield* out.status(undefined)
          if (!out.json) {
            // Deltas are volatile: a subscriber that joined late saw none, but the output is in the record.
            if (!streamed && record.output !== undefined) yield* out.text(record.output)
            yield* out.endLine
            const usage = { ...record.usage, modelCalls: Math.max(record.usage.modelCalls, modelCallsStarted) }
            yield* out.note(`${EventFormat.outcome(record)} · ${EventFormat.usage(usage)}`)
          }
          return Option.some<Step>({ _tag: "Ended", record })
        }
        default:
          return Option.none()
      }
    })

  return { onEvent }
}
