/**
 * Compares two V8 heap snapshots (as `bench/soak.ts --snapshots DIR` writes
 * them) by object type and constructor: what grew between them, in count and
 * in self size, and, for the groups that grew most, what holds them (the
 * type, constructor and edge name of the retainers of the objects that are
 * new in the later snapshot: ids are kept across one process's snapshots).
 *
 *   node bench/run.mjs heapdiff BEFORE.heapsnapshot AFTER.heapsnapshot [--top 25] [--retainers 8]
 *
 * A leak per turn shows as a group whose count grows with the turns; the
 * retainers say which object of ours keeps it.
 */
import { readFileSync } from "node:fs"
import { arg } from "./support.js"

interface Snapshot {
  readonly snapshot: {
    readonly meta: {
      readonly node_fields: ReadonlyArray<string>
      readonly node_types: ReadonlyArray<ReadonlyArray<string> | string>
      readonly edge_fields: ReadonlyArray<string>
      readonly edge_types: ReadonlyArray<ReadonlyArray<string> | string>
    }
  }
  readonly nodes: ReadonlyArray<number>
  readonly edges: ReadonlyArray<number>
  readonly strings: ReadonlyArray<string>
}

interface Parsed {
  readonly count: number
  readonly keyOf: (node: number) => string
  /** The object's id, the same in every snapshot of one process. */
  readonly idOf: (node: number) => number
  readonly sizeOf: (node: number) => number
  /** For each node, the nodes and edge names that point at it (weak edges left out). */
  readonly retainers: (node: number) => ReadonlyArray<{ readonly from: number; readonly edge: string }>
}

const parse = (file: string): Parsed => {
  const data = JSON.parse(readFileSync(file, "utf8")) as Snapshot
  const { edge_fields, edge_types, node_fields, node_types } = data.snapshot.meta
  const nodeWidth = node_fields.length
  const edgeWidth = edge_fields.length
  const nodeTypes = node_types[0] as ReadonlyArray<string>
  const edgeTypes = edge_types[0] as ReadonlyArray<string>
  const typeAt = node_fields.indexOf("type")
  const nameAt = node_fields.indexOf("name")
  const sizeAt = node_fields.indexOf("self_size")
  const idAt = node_fields.indexOf("id")
  const edgeCountAt = node_fields.indexOf("edge_count")
  const edgeTypeAt = edge_fields.indexOf("type")
  const edgeNameAt = edge_fields.indexOf("name_or_index")
  const edgeToAt = edge_fields.indexOf("to_node")
  const { edges, nodes, strings } = data
  const count = nodes.length / nodeWidth
  const keyOf = (node: number) => {
    const type = nodeTypes[nodes[node * nodeWidth + typeAt]!]!
    const name = strings[nodes[node * nodeWidth + nameAt]!]!
    // Strings and code are many distinct names: group them by type alone.
    return type === "string" || type === "concatenated string" || type === "sliced string" || type === "code" ||
        type === "number" || type === "hidden"
      ? `(${type})`
      : `${type} ${name.length > 60 ? `${name.slice(0, 60)}…` : name}`
  }
  const sizeOf = (node: number) => nodes[node * nodeWidth + sizeAt]!
  const idOf = (node: number) => nodes[node * nodeWidth + idAt]!
  let built: Array<Array<{ from: number; edge: string }>> | undefined
  const retainers = (node: number) => {
    if (built === undefined) {
      const all: Array<Array<{ from: number; edge: string }>> = Array.from({ length: count }, () => [])
      let edge = 0
      for (let from = 0; from < count; from++) {
        const n = nodes[from * nodeWidth + edgeCountAt]!
        for (let i = 0; i < n; i++, edge += edgeWidth) {
          const type = edgeTypes[edges[edge + edgeTypeAt]!]!
          if (type === "weak") continue
          const nameOrIndex = edges[edge + edgeNameAt]!
          const name = type === "element" || type === "hidden" ? `[${nameOrIndex}]` : strings[nameOrIndex]!
          all[edges[edge + edgeToAt]! / nodeWidth]!.push({ from, edge: name })
        }
      }
      built = all
    }
    return built[node]!
  }
  return { count, keyOf, idOf, sizeOf, retainers }
}

const groups = (parsed: Parsed) => {
  const byKey = new Map<string, { count: number; size: number }>()
  for (let node = 0; node < parsed.count; node++) {
    const key = parsed.keyOf(node)
    const group = byKey.get(key) ?? { count: 0, size: 0 }
    group.count++
    group.size += parsed.sizeOf(node)
    byKey.set(key, group)
  }
  return byKey
}

const [beforeFile, afterFile] = process.argv.slice(2).filter((a) => !a.startsWith("--") && a.endsWith(".heapsnapshot"))
if (beforeFile === undefined || afterFile === undefined) {
  console.error("usage: node bench/run.mjs heapdiff BEFORE.heapsnapshot AFTER.heapsnapshot [--top 25] [--retainers 8]")
  process.exit(2)
}
const top = Number(arg("top", "25"))
const retainerGroups = Number(arg("retainers", "8"))
const beforeParsed = parse(beforeFile)
const before = groups(beforeParsed)
const beforeIds = new Set<number>()
for (let node = 0; node < beforeParsed.count; node++) beforeIds.add(beforeParsed.idOf(node))
const afterParsed = parse(afterFile)
const after = groups(afterParsed)
const rows = [...after].map(([key, group]) => {
  const was = before.get(key) ?? { count: 0, size: 0 }
  return { key, count: group.count - was.count, size: group.size - was.size }
})
for (const [key, was] of before) if (!after.has(key)) rows.push({ key, count: -was.count, size: -was.size })
rows.sort((a, b) => b.size - a.size)
const total = rows.reduce((sum, row) => sum + row.size, 0)
console.log(`self size ${(total / 1024).toFixed(0)} KiB more in ${afterFile} than in ${beforeFile}\n`)
console.log("      Δ KiB   Δ count  group")
for (const row of rows.slice(0, top)) {
  console.log(`${(row.size / 1024).toFixed(1).padStart(11)} ${String(row.count).padStart(9)}  ${row.key}`)
}
// Who holds the objects of the groups that grew most that are new in the later snapshot.
for (const row of rows.slice(0, retainerGroups)) {
  if (row.count <= 0) continue
  const held = new Map<string, number>()
  for (let node = 0; node < afterParsed.count; node++) {
    if (afterParsed.keyOf(node) !== row.key || beforeIds.has(afterParsed.idOf(node))) continue
    for (const { edge, from } of afterParsed.retainers(node)) {
      const by = `${afterParsed.keyOf(from)} .${edge.startsWith("[") ? "[i]" : edge}`
      held.set(by, (held.get(by) ?? 0) + 1)
    }
  }
  console.log(`\n${row.key}, new objects: held by`)
  for (const [by, n] of [...held].sort((a, b) => b[1] - a[1]).slice(0, 6)) console.log(`  ${String(n).padStart(9)}  ${by}`)
  // One new object's chain of first retainers, up to the roots: where the holder lives.
  let node = -1
  for (let i = afterParsed.count - 1; i >= 0 && node < 0; i--) {
    if (afterParsed.keyOf(i) === row.key && !beforeIds.has(afterParsed.idOf(i))) node = i
  }
  const chain: Array<string> = []
  const seen = new Set<number>()
  while (node >= 0 && chain.length < 12 && !seen.has(node)) {
    seen.add(node)
    const up = afterParsed.retainers(node).find(({ from }) => !seen.has(from))
    if (up === undefined) break
    chain.push(`.${up.edge} of ${afterParsed.keyOf(up.from)}`)
    node = up.from
  }
  console.log(`  e.g. ${chain.join(" ← ")}`)
}
