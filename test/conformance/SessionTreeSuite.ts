/**
 * The session-tree part of the `SessionStore` conformance suite (DESIGN §7):
 * spawning children under a `SubagentPolicy` in one transaction, further
 * child turns counted across the tree, and discovery (`children`, `tree`,
 * the catalog's scopes and its cursors). Run against every backend, like
 * `SessionStoreSuite`; tests isolate themselves by principal.
 *
 * @since 0.1.0
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, type Scope } from "effect"
import { Agent, ModelRef, SubagentRef } from "../../src/schema/Agent.js"
import { Usage } from "../../src/schema/Budget.js"
import { type InputId, makeSessionId, makeTurnId, type SessionId } from "../../src/schema/Ids.js"
import type { Lease } from "../../src/schema/Lease.js"
import { SubagentPolicy } from "../../src/schema/Policy.js"
import { Principal } from "../../src/schema/Principal.js"
import { ChildSpawned, Closed, type RecordBody, TurnEnded, TurnStarted } from "../../src/schema/Record.js"
import type { Session } from "../../src/schema/Session.js"
import { type SpawnChild, SessionStore } from "../../src/services/SessionStore.js"
import { commit, failure, inputId, message, principal } from "../support/fixtures.js"
import type { StoreBackend } from "./SessionStoreSuite.js"

const LONG_TTL = 60_000

/** An agent that declares `subagents` (none: it declares none). */
export const parentAgent = (name: string, subagents: ReadonlyArray<string> = []): Agent =>
  new Agent({
    name,
    instructions: `You are ${name}.`,
    model: new ModelRef({ name: "scripted" }),
    subagents: subagents.map((sub) => new SubagentRef({ name: sub, description: `the ${sub}` }))
  })

/** A policy that lets `worker`s spawn `worker`s. */
const workers = (limits: Partial<ConstructorParameters<typeof SubagentPolicy>[0]> = {}) =>
  new SubagentPolicy({ maxDepth: 4, allowedAgents: ["worker"], ...limits })

/** Runs the session-tree conformance tests against one backend. */
export const sessionTreeSuite = (backend: StoreBackend): void => {
  /** A session of `owner` leased by its own worker, with its head tracked across spawns. */
  interface Driven {
    readonly session: Session
    readonly lease: Lease
    head: number
  }

  const drive = (session: Session) =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const lease = yield* store.acquire(session.id, `worker-${session.id}`, LONG_TTL)
      if (Option.isNone(lease)) return yield* Effect.dieMessage(`could not acquire ${session.id}`)
      return { session, lease: lease.value, head: session.headSeq } satisfies Driven as Driven
    })

  /** A root of `owner` for `agent` under `policy` (`null`: none asked for), leased. */
  const rootOf = (owner: Principal, policy: SubagentPolicy | null = workers(), agent = parentAgent("lead", ["worker"])) =>
    Effect.flatMap(SessionStore, (store) =>
      Effect.flatMap(store.create({ principal: owner, agent, subagentPolicy: policy ?? undefined }), drive))

  /** `count` leased parents directly under `root` (created, not spawned: no child turns counted). */
  const parentsUnder = (owner: Principal, root: Driven, count: number) =>
    Effect.flatMap(SessionStore, (store) =>
      Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) =>
        Effect.flatMap(
          store.create({ principal: owner, agent: parentAgent("worker", ["worker"]), parentId: root.session.id, alias: `p${i}` }),
          drive
        )))

  /** Spawns a child of `parent` as its worker would, moving the tracked head on success. */
  const spawnFrom = (
    owner: Principal,
    parent: Driven,
    agentName = "worker",
    options: Partial<Omit<SpawnChild, "principal" | "commit" | "agent">> & {
      readonly records?: ReadonlyArray<RecordBody>
      readonly consumes?: ReadonlyArray<InputId>
    } = {}
  ) =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const { consumes, records, ...rest } = options
      const parentCommit = yield* commit(parent.lease, parent.head, records ?? [], consumes ?? [])
      const spawned = yield* store.spawn({
        principal: owner,
        commit: parentCommit,
        agent: parentAgent(agentName, ["worker"]),
        message: message(`task for ${agentName}`),
        ...rest
      })
      parent.head = spawned.receipt.headSeq
      return spawned
    })

  const childIds = (owner: Principal, sessionId: SessionId) =>
    Effect.flatMap(SessionStore, (store) =>
      Effect.map(store.children(owner, sessionId, { limit: 500 }), (page) => page.items.map((item) => item.session.id)))

  const secondStore: Effect.Effect<SessionStore["Type"], unknown, Scope.Scope> = backend.second === undefined
    ? Effect.dieMessage(`${backend.name} has no second store`)
    : Effect.map(Layer.build(backend.second), Context.get(SessionStore))

  describe(`SessionStore trees: ${backend.name}`, () => {
    it.layer(backend.layer)((it) => {
      describe("policy at create", () => {
        it.effect("a root whose agent declares subagents gets 10 child turns by default; others get none", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const declaring = yield* store.create({ principal: owner, agent: parentAgent("lead", ["worker"]) })
            assert.deepStrictEqual(declaring.subagentPolicy, new SubagentPolicy({ maxDepth: 3, maxChildTurns: 10 }))
            assert.deepStrictEqual((yield* store.get(declaring.id)).subagentPolicy, declaring.subagentPolicy)
            const plain = yield* store.create({ principal: owner, agent: parentAgent("solo") })
            assert.isNull(plain.subagentPolicy)
            const explicit = yield* store.create({
              principal: owner,
              agent: parentAgent("lead", ["worker"]),
              subagentPolicy: workers({ maxChildTurns: 3 })
            })
            assert.deepStrictEqual(explicit.subagentPolicy, workers({ maxChildTurns: 3 }))
          }))
      })

      describe("spawn", () => {
        it.effect("creates the child, admits its first message and appends the parent's child_spawned record, together", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 5 }))
            const ask = message("spawn a worker")
            yield* store.push(root.session.id, ask)
            const turnId = yield* makeTurnId
            const started = new TurnStarted({ turnId, inputId: ask.inputId, text: ask.text })
            const first = message("do the research")
            const spawned = yield* spawnFrom(owner, root, "worker", {
              message: first,
              title: "research",
              turnId,
              records: [started],
              consumes: [ask.inputId]
            })
            const child = spawned.child
            assert.isFalse(spawned.duplicate)
            assert.deepStrictEqual(
              [child.parentId, child.rootId, child.agentPath, child.alias, child.title],
              [root.session.id, root.session.id, ["lead", "worker"], "worker-1", "research"]
            )
            assert.deepStrictEqual(child.principal, owner)
            // The root's policy, copied frozen.
            assert.deepStrictEqual(child.subagentPolicy, root.session.subagentPolicy)
            assert.deepStrictEqual(yield* store.get(child.id), child)
            // Its first message waits in its inbox.
            const inbox = yield* store.readInbox(child.id)
            assert.deepStrictEqual(inbox.map((item) => item.command), [first])
            assert.deepStrictEqual([spawned.admission.position, spawned.admission.duplicate], [1, false])
            assert.deepStrictEqual((yield* store.readLog(child.id)).records.map((r) => r.body._tag), ["session_created"])
            // The parent's commit: child_spawned first, then its own records; the item it consumed is gone.
            assert.deepStrictEqual([spawned.receipt.firstSeq, spawned.receipt.headSeq], [2, 3])
            const log = (yield* store.readLog(root.session.id)).records
            assert.deepStrictEqual(log.map((r) => r.body._tag), ["session_created", "child_spawned", "turn_started"])
            assert.deepStrictEqual(
              log[1]!.body,
              new ChildSpawned({ childSessionId: child.id, agentName: "worker", alias: "worker-1", turnId })
            )
            assert.deepStrictEqual(yield* store.readInbox(root.session.id), [])
            const parent = yield* store.get(root.session.id)
            assert.deepStrictEqual([parent.headSeq, parent.activeTurnId], [3, turnId])
            // The child is discoverable at once.
            assert.deepStrictEqual(yield* childIds(owner, root.session.id), [child.id])
            // A second child gets the next alias; the chosen id is kept.
            const chosen = yield* makeSessionId
            const second = yield* spawnFrom(owner, root, "worker", { sessionId: chosen })
            assert.deepStrictEqual([second.child.id, second.child.alias], [chosen, "worker-2"])
            assert.deepStrictEqual(yield* childIds(owner, root.session.id), [chosen, child.id])
          }))

        it.effect("replaying the spawn's commit returns the first answer and writes nothing", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 5 }))
            const parentCommit = yield* commit(root.lease, 1, [])
            const input: SpawnChild = {
              principal: owner,
              commit: parentCommit,
              agent: parentAgent("worker"),
              message: message("once")
            }
            const first = yield* store.spawn(input)
            const again = yield* store.spawn(input)
            assert.isTrue(again.duplicate)
            assert.deepStrictEqual(again.child, first.child)
            assert.deepStrictEqual(again.receipt, first.receipt)
            assert.deepStrictEqual([again.admission.position, again.admission.duplicate], [1, true])
            assert.deepStrictEqual(yield* childIds(owner, root.session.id), [first.child.id])
            assert.strictEqual((yield* store.get(root.session.id)).headSeq, 2)
            // One child turn was counted, not two: four more fit under the limit of five.
            root.head = 2
            for (let i = 0; i < 4; i++) yield* spawnFrom(owner, root)
            const refused = yield* failure(spawnFrom(owner, root), "SpawnRefused")
            assert.strictEqual(refused.reason, "max_child_turns")
          }))

        it.effect("a session without a policy cannot spawn: SpawnRefused no_policy, nothing written", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, null, parentAgent("solo"))
            assert.isNull(root.session.subagentPolicy)
            const refused = yield* failure(spawnFrom(owner, root), "SpawnRefused")
            assert.deepStrictEqual([refused.reason, refused.sessionId], ["no_policy", root.session.id])
            assert.strictEqual((yield* store.get(root.session.id)).headSeq, 1)
            assert.deepStrictEqual(yield* childIds(owner, root.session.id), [])
          }))

        it.effect("agents outside allowedAgents (default: the agent's declared subagents) are refused", () =>
          Effect.gen(function*() {
            const owner = principal()
            // The default policy: the agent declares only `worker`.
            const root = yield* rootOf(owner, null, parentAgent("lead", ["worker"]))
            const stranger = yield* failure(spawnFrom(owner, root, "hacker"), "SpawnRefused")
            assert.deepStrictEqual([stranger.reason, stranger.agent], ["agent_not_allowed", "hacker"])
            yield* spawnFrom(owner, root, "worker")
            // An explicit list wins over the declaration.
            const listed = yield* rootOf(owner, new SubagentPolicy({ maxDepth: 2, allowedAgents: ["critic"] }))
            const declared = yield* failure(spawnFrom(owner, listed, "worker"), "SpawnRefused")
            assert.strictEqual(declared.reason, "agent_not_allowed")
            yield* spawnFrom(owner, listed, "critic")
          }))

        it.effect("depth and children-per-session limits are enforced", () =>
          Effect.gen(function*() {
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxDepth: 2, maxChildren: 2 }))
            const child = yield* drive((yield* spawnFrom(owner, root)).child)
            yield* spawnFrom(owner, root)
            const third = yield* failure(spawnFrom(owner, root), "SpawnRefused")
            assert.deepStrictEqual([third.reason, third.limit, third.observed], ["max_children", 2, 3])
            const grandchild = yield* drive((yield* spawnFrom(owner, child)).child)
            assert.deepStrictEqual(grandchild.session.agentPath, ["lead", "worker", "worker"])
            const deeper = yield* failure(spawnFrom(owner, grandchild), "SpawnRefused")
            assert.deepStrictEqual([deeper.reason, deeper.limit, deeper.observed, deeper.sessionId], [
              "max_depth",
              2,
              3,
              grandchild.session.id
            ])
          }))

        it.effect("the default 10 child turns count across a 3-level tree; the 11th is refused", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, null, parentAgent("lead", ["worker"]))
            assert.strictEqual(root.session.subagentPolicy?.maxChildTurns, 10)
            const a = yield* drive((yield* spawnFrom(owner, root)).child) // 1
            const b = yield* drive((yield* spawnFrom(owner, a)).child) // 2
            yield* spawnFrom(owner, b) // 3
            yield* spawnFrom(owner, root) // 4
            for (let i = 0; i < 3; i++) {
              yield* store.admitChildTurn({ principal: owner, parentId: root.session.id, childId: a.session.id, message: message(`more ${i}`) })
            } // 7
            for (let i = 0; i < 3; i++) {
              yield* store.admitChildTurn({ principal: owner, parentId: a.session.id, childId: b.session.id, message: message(`deeper ${i}`) })
            } // 10
            const spawn11 = yield* failure(spawnFrom(owner, b), "SpawnRefused")
            assert.deepStrictEqual([spawn11.reason, spawn11.limit, spawn11.observed], ["max_child_turns", 10, 11])
            const turn11 = yield* failure(
              store.admitChildTurn({ principal: owner, parentId: root.session.id, childId: a.session.id, message: message("one more") }),
              "SpawnRefused"
            )
            assert.deepStrictEqual([turn11.reason, turn11.sessionId], ["max_child_turns", a.session.id])
            // Nothing of the refusals was written.
            assert.strictEqual((yield* store.readInbox(a.session.id)).length, 4)
            assert.strictEqual((yield* store.get(b.session.id)).headSeq, b.head)
            assert.strictEqual((yield* store.list({ principal: owner, scope: { tree: root.session.id } })).items.length, 4)
          }))

        it.effect("20 concurrent spawns racing for the last 2 child turns: exactly 2 win", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 2 }))
            const parents = yield* parentsUnder(owner, root, 20)
            const results = yield* Effect.forEach(parents, (parent) => Effect.either(spawnFrom(owner, parent)), {
              concurrency: "unbounded"
            })
            const won = results.filter((r) => r._tag === "Right")
            const lost = results.flatMap((r) => (r._tag === "Left" ? [r.left] : []))
            assert.strictEqual(won.length, 2)
            assert.strictEqual(lost.length, 18)
            for (const error of lost) assert.deepStrictEqual([error._tag, error._tag === "SpawnRefused" && error.reason], ["SpawnRefused", "max_child_turns"])
            const tree = yield* store.tree(owner, root.session.id)
            assert.strictEqual(tree.nodes.length, 22)
          }))

        it.effect("20 concurrent further turns racing for the last 2: exactly 2 are admitted", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 3 }))
            const child = (yield* spawnFrom(owner, root)).child
            const results = yield* Effect.forEach(
              Array.from({ length: 20 }, (_, i) => i),
              (i) =>
                Effect.either(
                  store.admitChildTurn({ principal: owner, parentId: root.session.id, childId: child.id, message: message(`race ${i}`) })
                ),
              { concurrency: "unbounded" }
            )
            assert.strictEqual(results.filter((r) => r._tag === "Right").length, 2)
            assert.strictEqual((yield* store.readInbox(child.id)).length, 3)
          }))

        it.effect("a spawn whose parent commit is refused leaves no child, no admission and no count", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 1 }))
            const ghost = yield* makeSessionId
            // The parent commit consumes an input that is not in its inbox: refused after the child's rows were written.
            const consumed = yield* failure(spawnFrom(owner, root, "worker", { sessionId: ghost, consumes: [inputId()] }), "Conflict")
            assert.strictEqual(consumed.entity, "input")
            // A stale head, and a lease the parent's worker no longer holds.
            yield* failure(spawnFrom(owner, { ...root, head: 7 }, "worker", { sessionId: ghost }), "SequenceConflict")
            yield* failure(spawnFrom(owner, { ...root, lease: { ...root.lease, epoch: 99 } as Lease }, "worker", { sessionId: ghost }), "LeaseLost")
            yield* failure(store.get(ghost), "SessionNotFound")
            assert.deepStrictEqual(yield* childIds(owner, root.session.id), [])
            assert.deepStrictEqual((yield* store.readLog(root.session.id)).records.length, 1)
            // The one child turn of the tree is still there to take, under the first alias.
            const spawned = yield* spawnFrom(owner, root, "worker", { sessionId: ghost })
            assert.deepStrictEqual([spawned.child.id, spawned.child.alias], [ghost, "worker-1"])
          }))

        it.effect("a chosen alias is permanent and unique among the parent's children; a closed parent cannot spawn", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner)
            const named = yield* spawnFrom(owner, root, "worker", { alias: "scout" })
            assert.strictEqual(named.child.alias, "scout")
            const taken = yield* failure(spawnFrom(owner, root, "worker", { alias: "scout" }), "Conflict")
            assert.deepStrictEqual([taken.entity, taken.key], ["alias", "scout"])
            const renamed = yield* store.updateMetadata(owner, named.child.id, { title: "Scout" })
            assert.strictEqual(renamed.alias, "scout")
            yield* store.append(yield* commit(root.lease, root.head, [new Closed({ reason: "done" })]))
            root.head++
            const closed = yield* failure(spawnFrom(owner, root), "SessionClosed")
            assert.strictEqual(closed.sessionId, root.session.id)
            // Closing the root closed nothing below it.
            assert.notStrictEqual((yield* store.get(named.child.id)).status, "closed")
          }))

        it.effect("tenancy: another principal (even of the same workspace) cannot spawn under or message a child", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner)
            const child = (yield* spawnFrom(owner, root)).child
            for (const other of [principal(), new Principal({ ...principal(), workspaceId: owner.workspaceId })]) {
              const spawn = yield* failure(spawnFrom(other, root), "SessionNotFound")
              assert.strictEqual(spawn.sessionId, root.session.id)
              yield* failure(
                store.admitChildTurn({ principal: other, parentId: root.session.id, childId: child.id, message: message("x") }),
                "SessionNotFound"
              )
            }
            assert.deepStrictEqual(yield* childIds(owner, root.session.id), [child.id])
            assert.strictEqual((yield* store.readInbox(child.id)).length, 1)
          }))
      })

      describe("admitChildTurn", () => {
        it.effect("admits a message from the child's own parent; a duplicate is not counted; others are refused", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 3 }))
            const child = yield* drive((yield* spawnFrom(owner, root)).child)
            const grandchild = (yield* spawnFrom(owner, child)).child
            const again = message("again")
            const first = yield* store.admitChildTurn({ principal: owner, parentId: root.session.id, childId: child.session.id, message: again })
            assert.deepStrictEqual([first.position, first.duplicate], [2, false])
            const replay = yield* store.admitChildTurn({ principal: owner, parentId: root.session.id, childId: child.session.id, message: again })
            assert.deepStrictEqual([replay.position, replay.duplicate], [2, true])
            const changed = yield* failure(
              store.admitChildTurn({
                principal: owner,
                parentId: root.session.id,
                childId: child.session.id,
                message: message("other text", again.inputId)
              }),
              "Conflict"
            )
            assert.strictEqual(changed.entity, "input")
            // Only the direct parent: the root cannot message its grandchild, a child not its sibling.
            yield* failure(
              store.admitChildTurn({ principal: owner, parentId: root.session.id, childId: grandchild.id, message: message("skip") }),
              "SessionNotFound"
            )
            const unknown = yield* makeSessionId
            yield* failure(
              store.admitChildTurn({ principal: owner, parentId: root.session.id, childId: unknown, message: message("?") }),
              "SessionNotFound"
            )
            // Three turns counted (two spawns, one message): the limit is reached, the duplicate did not count.
            const over = yield* failure(
              store.admitChildTurn({ principal: owner, parentId: child.session.id, childId: grandchild.id, message: message("4th") }),
              "SpawnRefused"
            )
            assert.strictEqual(over.reason, "max_child_turns")
          }))

        it.effect("a closed child refuses further turns with SessionClosed", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner)
            const child = yield* drive((yield* spawnFrom(owner, root)).child)
            const turnId = yield* makeTurnId
            const [item] = yield* store.readInbox(child.session.id)
            yield* store.append(yield* commit(child.lease, 1, [
              new TurnStarted({ turnId, inputId: item!.command.inputId, text: "task" }),
              new TurnEnded({ turnId, outcome: "completed", output: "done", usage: Usage.zero }),
              new Closed({})
            ], [item!.command.inputId]))
            const closed = yield* failure(
              store.admitChildTurn({ principal: owner, parentId: root.session.id, childId: child.session.id, message: message("late") }),
              "SessionClosed"
            )
            assert.strictEqual(closed.sessionId, child.session.id)
          }))
      })

      describe("discovery", () => {
        /** Every page of `children`, `limit` at a time, running `between` after each page. */
        const allChildren = (owner: Principal, sessionId: SessionId, limit: number, between: Effect.Effect<unknown, unknown, SessionStore> = Effect.void) =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const out: Array<SessionId> = []
            let cursor: string | undefined
            for (let pages = 0; pages < 1_000; pages++) {
              const page = yield* store.children(owner, sessionId, { cursor, limit })
              out.push(...page.items.map((item) => item.session.id))
              if (page.nextCursor === undefined) return out
              cursor = page.nextCursor
              yield* between
            }
            return yield* Effect.dieMessage("the listing never ended")
          })

        it.effect("children: direct children newest first, with summary, alias, agent and agentPath, archived included", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ allowedAgents: ["worker", "critic"] }))
            const a = yield* drive((yield* spawnFrom(owner, root, "worker")).child)
            const b = (yield* spawnFrom(owner, root, "critic", { alias: "judge" })).child
            yield* spawnFrom(owner, a, "worker")
            yield* store.updateMetadata(owner, a.session.id, { archived: true })
            const page = yield* store.children(owner, root.session.id)
            assert.deepStrictEqual(page.items.map((item) => [item.session.id, item.alias, item.agent, item.agentPath]), [
              [b.id, "judge", "critic", ["lead", "critic"]],
              [a.session.id, "worker-1", "worker", ["lead", "worker"]]
            ])
            assert.isTrue(page.items[1]!.session.archived)
            assert.deepStrictEqual(page.items[0]!.session, yield* store.get(b.id))
            assert.isUndefined(page.nextCursor)
            // The catalog hides the archived child unless asked.
            const listed = yield* store.list({ principal: owner, scope: { children: root.session.id } })
            assert.deepStrictEqual(listed.items.map((s) => s.id), [b.id])
            const all = yield* store.list({ principal: owner, scope: { children: root.session.id }, includeArchived: true })
            assert.deepStrictEqual(all.items.map((s) => s.id), [b.id, a.session.id])
            assert.deepStrictEqual(yield* childIds(owner, b.id), [])
            const unknown = yield* makeSessionId
            yield* failure(store.children(owner, unknown), "SessionNotFound")
            yield* failure(store.children(owner, root.session.id, { limit: 0 }), "InvalidInput")
          }))

        it.effect("tree: the session and its whole subtree, parents before children; archived only when asked", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner)
            const a = yield* drive((yield* spawnFrom(owner, root)).child)
            const b = yield* drive((yield* spawnFrom(owner, root)).child)
            const a1 = (yield* spawnFrom(owner, a)).child
            const b1 = yield* drive((yield* spawnFrom(owner, b)).child)
            const b11 = (yield* spawnFrom(owner, b1)).child
            const unrelated = yield* rootOf(owner)
            yield* spawnFrom(owner, unrelated)
            const tree = yield* store.tree(owner, root.session.id)
            assert.deepStrictEqual(tree.root, yield* store.get(root.session.id))
            assert.deepStrictEqual(tree.nodes.map((n) => [n.session.id, n.parentId, n.alias, n.agentPath.length]), [
              [a.session.id, root.session.id, "worker-1", 2],
              [b.session.id, root.session.id, "worker-2", 2],
              [a1.id, a.session.id, "worker-1", 3],
              [b1.session.id, b.session.id, "worker-1", 3],
              [b11.id, b1.session.id, "worker-1", 4]
            ])
            const sub = yield* store.tree(owner, b.session.id)
            assert.deepStrictEqual(sub.nodes.map((n) => n.session.id), [b1.session.id, b11.id])
            assert.deepStrictEqual((yield* store.tree(owner, b11.id)).nodes, [])
            yield* store.updateMetadata(owner, a1.id, { archived: true })
            assert.deepStrictEqual((yield* store.tree(owner, a.session.id)).nodes, [])
            assert.deepStrictEqual(
              (yield* store.tree(owner, a.session.id, { includeArchived: true })).nodes.map((n) => n.session.id),
              [a1.id]
            )
          }))

        it.effect("findChild names a direct child by id or alias; anything else is SessionNotFound", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner)
            const a = yield* drive((yield* spawnFrom(owner, root)).child)
            const b = (yield* spawnFrom(owner, root, "worker", { alias: "scout" })).child
            const grandchild = (yield* spawnFrom(owner, a)).child
            assert.strictEqual((yield* store.findChild(owner, root.session.id, "worker-1")).id, a.session.id)
            assert.strictEqual((yield* store.findChild(owner, root.session.id, "scout")).id, b.id)
            assert.strictEqual((yield* store.findChild(owner, root.session.id, b.id)).id, b.id)
            assert.strictEqual((yield* store.findChild(owner, a.session.id, "worker-1")).id, grandchild.id)
            // Not a direct child, not a child at all, or someone else's.
            const deeper = yield* failure(store.findChild(owner, root.session.id, grandchild.id), "SessionNotFound")
            assert.strictEqual(deeper.sessionId, grandchild.id)
            yield* failure(store.findChild(owner, root.session.id, "nobody"), "SessionNotFound")
            yield* failure(store.findChild(owner, b.id, "worker-1"), "SessionNotFound")
            const neighbour = new Principal({ ...principal(), workspaceId: owner.workspaceId })
            yield* failure(store.findChild(neighbour, root.session.id, "scout"), "SessionNotFound")
          }))

        it.effect("paging children while children are being spawned returns every child exactly once, newest first", () =>
          Effect.gen(function*() {
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 100 }))
            for (let i = 0; i < 10; i++) yield* spawnFrom(owner, root)
            const before = yield* childIds(owner, root.session.id)
            assert.strictEqual(before.length, 10)
            // Two new children after every page of three.
            const paged = yield* allChildren(owner, root.session.id, 3, Effect.zipRight(spawnFrom(owner, root), spawnFrom(owner, root)))
            assert.deepStrictEqual(paged, before)
            // Pages of 3 over 10: three pauses, six children spawned meanwhile.
            const start = yield* childIds(owner, root.session.id)
            assert.strictEqual(start.length, 16)
            // Concurrently: pages of two while 20 more children are spawned.
            const [, during] = yield* Effect.all([
              Effect.forEach(Array.from({ length: 20 }), () => spawnFrom(owner, root), { discard: true }),
              allChildren(owner, root.session.id, 2, Effect.yieldNow())
            ], { concurrency: "unbounded" })
            assert.strictEqual(new Set(during).size, during.length, "no child twice")
            const now = yield* childIds(owner, root.session.id)
            assert.strictEqual(now.length, 36)
            // What was there when paging began is all there, in the listing's order.
            const seenOld = during.filter((id) => start.includes(id))
            assert.deepStrictEqual(seenOld, start)
            assert.deepStrictEqual(during, now.filter((id) => during.includes(id)))
          }))

        it.effect("a cursor works only in its own listing and tenancy; elsewhere it is InvalidInput", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 100 }))
            const other = yield* rootOf(owner, workers({ maxChildTurns: 100 }))
            for (let i = 0; i < 4; i++) {
              yield* spawnFrom(owner, root)
              yield* spawnFrom(owner, other)
              yield* rootOf(owner)
            }
            const children = (yield* store.children(owner, root.session.id, { limit: 2 })).nextCursor!
            const roots = (yield* store.list({ principal: owner, scope: "roots", limit: 2 })).nextCursor!
            const listed = (yield* store.list({ principal: owner, scope: { children: root.session.id }, limit: 2 })).nextCursor!
            const tree = (yield* store.list({ principal: owner, scope: { tree: root.session.id }, limit: 2 })).nextCursor!
            for (const cursor of [children, roots, listed, tree]) assert.isString(cursor)
            const neighbour = new Principal({ ...principal(), workspaceId: owner.workspaceId })
            const misuses: ReadonlyArray<readonly [string, Effect.Effect<unknown, { readonly _tag: string }>]> = [
              ["children cursor on another parent", store.children(owner, other.session.id, { cursor: children })],
              ["children cursor in the catalog", store.list({ principal: owner, scope: { children: root.session.id }, cursor: children })],
              ["catalog children cursor in children", store.children(owner, root.session.id, { cursor: listed })],
              ["roots cursor for a tree", store.list({ principal: owner, scope: { tree: root.session.id }, cursor: roots })],
              ["tree cursor for roots", store.list({ principal: owner, scope: "roots", cursor: tree })],
              ["tree cursor for another tree", store.list({ principal: owner, scope: { tree: other.session.id }, cursor: tree })],
              ["archived flag changed", store.list({ principal: owner, scope: "roots", includeArchived: true, cursor: roots })],
              ["another tenancy's roots", store.list({ principal: neighbour, scope: "roots", cursor: roots })],
              ["another workspace's roots", store.list({ principal: principal(), scope: "roots", cursor: roots })],
              ["garbage", store.children(owner, root.session.id, { cursor: "bm90IGEgY3Vyc29y" })]
            ]
            for (const [name, attempt] of misuses) {
              const error = yield* Effect.flip(attempt)
              assert.strictEqual(error._tag, "InvalidInput", name)
            }
            // In their own listings they continue.
            assert.strictEqual((yield* store.children(owner, root.session.id, { cursor: children })).items.length, 2)
            assert.strictEqual((yield* store.list({ principal: owner, scope: "roots", cursor: roots, limit: 2 })).items.length, 2)
          }))
      })

      describe("a second store over the same data", () => {
        it.scoped.skipIf(backend.second === undefined)("concurrent spawns through both stores share the tree's count", () =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const other = yield* secondStore
            const owner = principal()
            const root = yield* rootOf(owner, workers({ maxChildTurns: 3 }))
            const parents = yield* parentsUnder(owner, root, 8)
            const results = yield* Effect.forEach(
              parents,
              (parent, i) =>
                Effect.either(spawnFrom(owner, parent).pipe(
                  Effect.provideService(SessionStore, i % 2 === 0 ? store : other)
                )),
              { concurrency: "unbounded" }
            )
            assert.strictEqual(results.filter((r) => r._tag === "Right").length, 3)
          }))
      })
    })
  })
}
