/**
 * The `Toolsets` port over MCP servers (`McpConnection`, on the official
 * SDK): each toolset a host serves is one server. A session's toolsets are
 * opened for it alone (one protocol session per server per troupe session,
 * children included), in the actor's scope; their tools are listed at the
 * first turn and whenever the server says its list changed, and each is
 * offered as `<server>.<tool>` (`McpTools`), with the model's arguments checked
 * against its input schema before the call. A toolset may belong to one
 * workspace: no other workspace sees it, binds it, or opens it.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type { ToolSpec } from "../schema/Agent.js"
import { InvalidInput } from "../schema/Errors.js"
import type { Principal } from "../schema/Principal.js"
import { type McpServer, ServerName, type ToolsetDefinition, ToolsetRef } from "../schema/Toolset.js"
import { errorOutcome } from "../services/Tool.js"
import type { Runnable } from "../services/Toolkit.js"
import { type SessionToolset, Toolsets } from "../services/Toolsets.js"
import * as McpTools from "../tools/mcp/McpTools.js"
import * as McpConnection from "./mcp/McpConnection.js"

/** The toolsets a host serves. */
export interface Options {
  readonly toolsets: ReadonlyArray<ToolsetDefinition>
}

/** The toolsets of an `mcpServers` object: one per server, by its name, served to every workspace. */
export const fromServers = (servers: Readonly<Record<string, McpServer>>): ReadonlyArray<ToolsetDefinition> =>
  Object.entries(servers).map(([name, server]) => ({ name, server }))

const idOf = (definition: ToolsetDefinition) => definition.id ?? definition.name

const sees = (principal: Principal, definition: ToolsetDefinition) =>
  definition.workspaceId === undefined || definition.workspaceId.toLowerCase() === principal.workspaceId.toLowerCase()

/** The definition `ref` names for `principal`: by id, else by name (a workspace's own before one served to all). */
const find = (toolsets: ReadonlyArray<ToolsetDefinition>, principal: Principal, ref: ToolsetRef) => {
  const visible = toolsets.filter((definition) => sees(principal, definition))
  if (ref.id !== undefined) return visible.find((definition) => idOf(definition) === ref.id)
  const named = visible.filter((definition) => definition.name === ref.name)
  return named.find((definition) => definition.workspaceId !== undefined) ?? named[0]
}

/** What one opened server offers: its connection, and which of its tools (all, or an allow-list). */
interface Opened {
  readonly definition: ToolsetDefinition
  readonly connection: McpConnection.McpConnection
  readonly allowed: ReadonlySet<string> | undefined
}

interface Entry {
  readonly spec: ToolSpec
  readonly runnable: Runnable
}

const runnableOf = (opened: Opened, spec: ToolSpec, tool: string): Runnable => {
  const timeoutMs = opened.definition.server.timeoutMs ?? McpConnection.defaults.timeoutMs
  return {
    spec,
    run: (argumentsText) =>
      Either.match(McpTools.argumentsOf(spec, argumentsText), {
        onLeft: Effect.succeed,
        onRight: (args) =>
          opened.connection.call(tool, args, timeoutMs).pipe(
            Effect.map(McpTools.outcomeOf),
            Effect.catchAll((failure) =>
              Effect.succeed(errorOutcome(
                failure.reason === "timeout"
                  ? `${spec.name} timed out: ${failure.message}`
                  : failure.reason === "error"
                  ? `${spec.name} failed: ${failure.message}`
                  : `${spec.name} could not run: ${failure.message} (the next call connects again)`
              ))
            )
          )
      })
  }
}

/** Opens the toolsets `refs` of one session: nothing connects before `specs`. */
const openFor = (toolsets: ReadonlyArray<ToolsetDefinition>, principal: Principal, refs: ReadonlyArray<ToolsetRef>) =>
  Effect.gen(function*() {
    const wanted = new Map<ToolsetDefinition, Set<string> | undefined>()
    for (const ref of refs) {
      const definition = find(toolsets, principal, ref)
      if (definition === undefined) {
        yield* Effect.logWarning(`toolset ${ref.id ?? ref.name} is not served to this workspace: its tools are not offered`)
        continue
      }
      // Every tool when any declaration wants them all; else the union of the allow-lists.
      const before = wanted.has(definition) ? wanted.get(definition) : new Set<string>()
      wanted.set(definition, before === undefined || ref.tools === undefined ? undefined : new Set([...before, ...ref.tools]))
    }
    const servers: Array<Opened> = []
    for (const [definition, allowed] of wanted) {
      servers.push({ definition, connection: yield* McpConnection.make(definition.name, definition.server), allowed })
    }
    let byName = new Map<string, Entry>()
    const specs = Effect.forEach(servers, (opened) =>
      opened.connection.tools.pipe(
        Effect.map((listed) =>
          listed.flatMap((tool): ReadonlyArray<Entry> => {
            if (opened.allowed !== undefined && !opened.allowed.has(tool.name)) return []
            const spec = McpTools.specOf(opened.definition.name, tool)
            return spec === undefined ? [] : [{ spec, runnable: runnableOf(opened, spec, tool.name) }]
          })
        ),
        Effect.catchAll((failure) =>
          Effect.as(Effect.logWarning(`toolset ${opened.definition.name}: ${failure.message}; its tools are not offered this time`), [])
        )
      ), { concurrency: "unbounded" }).pipe(
        Effect.map((lists) => {
          byName = new Map(lists.flat().map((entry) => [entry.spec.name, entry]))
          return [...byName.values()].map((entry) => entry.spec)
        })
      )
    return { specs, get: (name) => byName.get(name)?.runnable } satisfies SessionToolset
  })

/** The port over `options.toolsets`; a name that is no `ServerName`, or two toolsets of one id, or of one name for one workspace, are a defect. */
export const make = (options: Options): Effect.Effect<Toolsets["Type"]> =>
  Effect.suspend(() => {
    const { toolsets } = options
    const ids = new Set<string>()
    const names = new Set<string>()
    for (const definition of toolsets) {
      const named = Schema.validateEither(ServerName)(definition.name)
      if (Either.isLeft(named)) {
        return Effect.dieMessage(`McpToolsets: toolset ${definition.name}: ${ParseResult.ArrayFormatter.formatErrorSync(named.left)[0]?.message}`)
      }
      const scoped = `${definition.workspaceId?.toLowerCase() ?? "*"}/${definition.name}`
      if (ids.has(idOf(definition)) || names.has(scoped)) return Effect.dieMessage(`McpToolsets: two toolsets are named ${definition.name}`)
      ids.add(idOf(definition))
      names.add(scoped)
    }
    return Effect.succeed(Toolsets.of({
      bind: (principal, refs) =>
        Effect.forEach(refs, (ref) => {
          const definition = find(toolsets, principal, ref)
          return definition === undefined
            ? Effect.fail(new InvalidInput({ what: "toolsets", reason: `no toolset ${ref.id ?? ref.name} is served to this workspace` }))
            : Effect.succeed(new ToolsetRef({ id: idOf(definition), ...(ref.tools === undefined ? {} : { tools: ref.tools }) }))
        }),
      open: (session, refs) => openFor(toolsets, session.principal, refs)
    }))
  })

/** The toolsets as a layer. */
export const layer = (options: Options): Layer.Layer<Toolsets> => Layer.effect(Toolsets, make(options))
