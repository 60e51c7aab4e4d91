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
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
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
  /**
   * The events resumed after a drop (`EventOptions.onResume`): the deltas of a
   * model call in flight are held back until its record says what it replied,
   * since a restarted daemon makes the call again from its start.
   */
  readonly resumed: () => void
}

/**
 * What to print of a model call's recorded reply `recorded`, given the text
 * already printed for it (`printed`, before a resume) and the deltas held back
 * since (`held`): the rest of the reply when it goes on from what was printed,
 * else the whole reply on a line of its own; and whether the call was made
 * again (the held deltas start the reply anew). Pure.
 */
export const afterResume = (
  recorded: string,
  printed: string,
  held: string
): { readonly text: string; readonly newLine: boolean; readonly remade: boolean } => {
  const remade = held.length > 0 && printed.length > 0 && recorded.startsWith(held) && !recorded.startsWith(printed + held)
  return recorded.startsWith(printed)
    ? { text: recorded.slice(printed.length), newLine: false, remade }
    : { text: recorded, newLine: true, remade }
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
  // The current model call's text as printed, and (after a resume) its deltas held back.
  let printed = ""
  let held: string | undefined
  const tools = new Set<string>()
  const models = new Set<string>()
  // Model calls this view saw start: a call that failed (a 401) is one the turn made, counted or not.
  let modelCallsStarted = 0

  const ours = (id: TurnId) => turnId !== undefined && id === turnId

  /** A model call's record came: after a resume, print what its held-back deltas stood for, once. */
  const settle = (output: unknown, isError: boolean) =>
    Effect.gen(function*() {
      const wasHeld = held
      const before = printed
      held = undefined
      printed = ""
      if (wasHeld === undefined || out.json || isError) return
      const reply = Operation.decodeModelReply(output)
      if (Option.isNone(reply)) return
      const shown = afterResume(reply.value.text, before, wasHeld)
      yield* out.status(undefined)
      // The deltas do not say which call they stream: only a reply that started again proves it was made again.
      yield* out.note(Output.dim(
        shown.remade
          ? "(the model call was made again after the daemon restarted: its reply is printed once, as recorded)"
          : "(the events were cut during the model call, and a restarted daemon makes the call again: its reply is printed once, as recorded)"
      ))
      if (shown.newLine && before.length > 0) yield* out.endLine
      if (shown.text.length > 0) {
        streamed = true
        yield* out.text(shown.text)
      }
    })

  const onEvent = (event: SessionEvent | ClientEvent): Effect.Effect<Option.Option<Step>> =>
    Effect.gen(function*() {
      if (out.json) yield* out.jsonLine(EventFormat.toJson(event))
      // A newer daemon's event this client cannot read: printed in JSON mode, and nothing the view acts on.
      if (event._tag === "unknown") return Option.none()
      if (event._tag === "assistant_delta") {
        if (!ours(event.turnId)) return Option.none()
        if (held !== undefined) {
          held += event.text
          return Option.none()
        }
        streamed = true
        printed += event.text
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
          if (models.has(record.operationId)) yield* settle(record.output, record.isError)
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

  const resumed = () => {
    if (turnId !== undefined && held === undefined) held = ""
  }

  return { onEvent, resumed }
}
