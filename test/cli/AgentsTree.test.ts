/**
 * A three-level session tree through `troupe serve --agents FILE`, driven over
 * the socket only (`SessionClient` and `troupe sessions tree`), on the
 * OpenAI-compatible model against the local test server (which answers each
 * agent by its instructions, whatever order concurrent sessions call in):
 * lead spawns researcher, which spawns checker; checker's tool asks for an
 * approval, answered by a provider on the root, and its built-in read_file reads
 * the daemon's --workspace; the child results come back
 * up; the file's subagent policy holds the tree, so the 11th child turn is
 * refused; an exact child interrupt ends that child's turn.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Schedule, Stream } from "effect"
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import * as SessionClient from "../../src/client/SessionClient.js"
import type { SessionId } from "../../src/schema/Ids.js"
import * as OpenAiServer from "../support/openAiServer.js"
import { envFor, ok, start, tempDir } from "./harness.js"

const { chunk, sse } = OpenAiServer

const AGENTS = {
  agents: [
    {
      name: "lead",
      instructions: "You are lead.",
      model: "gpt-test",
      subagents: ["researcher"],
      subagentPolicy: { maxDepth: 2, maxChildTurns: 10 }
    },
    {
      name: "researcher",
      instructions: "You are researcher.",
      model: "gpt-test",
      subagents: [{ name: "checker", description: "Checks a claim." }]
    },
    {
      name: "checker",
      instructions: "You are checker.",
      model: "gpt-test",
      tools: [{ name: "publish", description: "Publishes.", sideEffect: "external", needsApproval: true }],
      builtins: ["read_file"]
    }
  ]
}

interface Message {
  readonly role: string
  readonly content?: string | null
}

const text = (words: string) => sse([chunk.role(), chunk.text(words), chunk.finish("stop"), chunk.usage(5, 1)])
const calls = (...list: ReadonlyArray<readonly [name: string, args: unknown]>) =>
  sse([
    chunk.role(),
    ...list.map(([name, args], i) => chunk.toolCall(i, { id: `call_${name}_${i}`, name, arguments: JSON.stringify(args) })),
    chunk.finish("tool_calls"),
    chunk.usage(5, 1)
  ])

/** Each agent's model, by its instructions and what its turn has seen since the last user message. */
const respond = (body: unknown): OpenAiServer.Reply => {
  const messages = (body as { messages: ReadonlyArray<Message> }).messages
  const system = messages[0]?.content ?? ""
  const lastUser = messages.length - 1 - [...messages].reverse().findIndex((m) => m.role === "user")
  const asked = messages[lastUser]?.content ?? ""
  const tools = messages.slice(lastUser).filter((m) => m.role === "tool").length
  if (system.includes("You are lead.")) {
    if (asked === "go") {
      return [calls(["agents_spawn", { agent: "researcher", message: "research" }]), calls(["agents_wait", {}])][tools] ?? text("lead done")
    }
    // Nine spawns: child turns 3 to 10 are admitted, the 11th is refused; the first one's turn hangs.
    return tools === 0
      ? calls(...Array.from({ length: 9 }, (_, i) => ["agents_spawn", { agent: "researcher", message: `quick ${i}`, title: `quick ${i}` }] as const))
      : text("spawned")
  }
  if (system.includes("You are researcher.")) {
    // A long, slow reply (a byte every 100 ms, so no idle timeout cuts it), interrupted before it ends.
    if (asked === "quick 0") return sse([chunk.role(), ...Array.from({ length: 600 }, () => chunk.text("."))], { delayMs: 100 })
    if (asked.startsWith("quick")) return text("quick done")
    return [calls(["agents_spawn", { agent: "checker", message: "check" }]), calls(["agents_wait", {}])][tools] ?? text("research done")
  }
  // The claim is read from the daemon's --workspace by the built-in read_file, beside the approved client tool.
  const read = messages.slice(lastUser).some((m) => m.role === "tool" && (m.content ?? "").includes("the sky is blue"))
  return tools === 0
    ? calls(["read_file", { path: "claim.txt" }], ["publish", {}])
    : text(read ? "checked and published" : "the claim was not read")
}

const endOf = (client: SessionClient.SessionClient, id: SessionId, after = 0) =>
  client.events(id, { after }).pipe(
    Stream.filterMap((frame) =>
      frame.event._tag === "durable" && frame.event.record._tag === "turn_ended"
        ? Option.some([frame.cursor ?? 0, frame.event.record] as const)
        : Option.none()
    ),
    Stream.runHead,
    Effect.map(Option.getOrThrow)
  )

describe("troupe serve --agents: a session tree", () => {
  it.scopedLive("spawns three levels, answers a grandchild's approval from the root, refuses the 11th child turn, interrupts a child exactly", () =>
    Effect.gen(function*() {
      const home = yield* tempDir
      const model = yield* OpenAiServer.make
      yield* model.respondWith(respond)
      const agentsFile = join(home, "agents.json")
      writeFileSync(agentsFile, JSON.stringify(AGENTS))
      const socket = join(home, "d.sock")
      const env = envFor(home, { TROUPE_MODEL_BASE_URL: model.baseUrl, TROUPE_MODEL: "gpt-test", TROUPE_MODEL_API_KEY: "sk-test" })
      const workspace = join(home, "ws")
      mkdirSync(workspace)
      writeFileSync(join(workspace, "claim.txt"), "the sky is blue\n")
      const daemon = yield* start(
        ["serve", "--socket", socket, "--store", `sqlite:${join(home, "t.db")}`, "--agents", agentsFile, "--workspace", workspace],
        env
      )
      // Generous: from sources (tsx) on a loaded machine, start-up alone can take seconds.
      yield* daemon.waitFor("troupe: store ", "stderr", "90 seconds")
      yield* daemon.waitFor(`troupe: built-in tools work in ${workspace}`, "stderr", "1 second")
      const client = yield* SessionClient.connect(socket)

      const root = yield* client.create({ agent: "lead" })
      // The file's policy, not the default one.
      assert.deepStrictEqual({ ...root.subagentPolicy }, { maxDepth: 2, maxChildTurns: 10 })
      const approvals: Array<ReadonlyArray<string>> = []
      const provider = yield* Effect.fork(client.provideCallbacks(root.id, ["approval", "client_tool"], (callback) =>
        Effect.sync(() => {
          if (callback.kind === "approval") {
            approvals.push(callback.agentPath)
            return Option.some({ decision: "approve" })
          }
          return Option.some({ output: "published" })
        })))

      yield* client.send(root.id, { text: "go" })
      const [cursor, first] = yield* endOf(client, root.id)
      assert.strictEqual(first.outcome, "completed")
      assert.strictEqual(first.output, "lead done")
      assert.deepStrictEqual(approvals, [["lead", "researcher", "checker"]])

      // The child results came up: the researcher's carries the checker's.
      const [researcher] = (yield* client.children(root.id)).items
      assert.strictEqual(researcher!.session.agent.name, "researcher")
      const [checker] = (yield* client.children(researcher!.session.id)).items
      assert.deepStrictEqual(checker!.session.agentPath, ["lead", "researcher", "checker"])
      const lastOutput = (id: SessionId) => Effect.map(endOf(client, id), ([, ended]) => ended.output)
      assert.strictEqual(yield* lastOutput(checker!.session.id), "checked and published")
      assert.strictEqual(yield* lastOutput(researcher!.session.id), "research done")

      // Child turns 3 to 10, then a refusal naming the limit.
      yield* client.send(root.id, { text: "more" })
      const [, second] = yield* endOf(client, root.id, cursor)
      assert.strictEqual(second.output, "spawned")
      const log = yield* client.events(root.id, { follow: false }).pipe(Stream.runCollect)
      const refusals = [...log].filter((frame) => JSON.stringify(frame).includes("max_child_turns (limit 10)"))
      assert.strictEqual(refusals.length, 1)

      // The tree as the CLI shows it.
      const tree = yield* ok(["sessions", "tree", "--socket", socket, root.id], env)
      for (const name of ["lead", "researcher", "checker"]) assert.include(tree.stdout, name)
      assert.strictEqual(tree.stdout.split("\n").filter((line) => line.includes("researcher")).length, 9, tree.stdout)

      // The hanging child's exact turn is interrupted; the others finished.
      const hanging = yield* Effect.gen(function*() {
        const page = yield* client.children(root.id, { limit: 50 })
        const child = page.items.find((item) => item.session.title === "quick 0")?.session
        return child?.activeTurnId ? { id: child.id, turnId: child.activeTurnId } : yield* Effect.fail(`not running yet: ${JSON.stringify(page.items.map((i) => [i.session.title, i.session.status, i.session.activeTurnId]))}`)
      }).pipe(Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("30 seconds"))))
      const interrupted = yield* client.interrupt(hanging.id, hanging.turnId, "enough")
      assert.strictEqual(interrupted.outcome, "interrupted")
      const [, ended] = yield* endOf(client, hanging.id)
      assert.strictEqual(ended.outcome, "interrupted")
      yield* Fiber.interrupt(provider)
    }), { timeout: 180_000 })
})
