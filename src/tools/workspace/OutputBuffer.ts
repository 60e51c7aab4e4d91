/**
 * A process's output kept in a bounded buffer: the last `capacity` bytes of
 * everything it wrote, addressed by absolute byte offsets since it started, so
 * a reader's cursor stays valid while older bytes are dropped (it learns how
 * many it missed). Pure: no effects.
 *
 * @since 0.3.0
 */

/** What a read from a cursor gives. */
export interface Slice {
  /** The bytes from `from` (or the oldest kept, if later), at most `max`, ending on a whole UTF-8 character. */
  readonly bytes: Uint8Array
  /** The offset of the first byte given. */
  readonly from: number
  /** The offset to read on from. */
  readonly next: number
  /** Bytes between the cursor and `from` that were dropped before they were read. */
  readonly skipped: number
}

/** The buffer: mutable, owned by one process entry. */
export interface OutputBuffer {
  readonly capacity: number
  /** Kept chunks, oldest first. */
  readonly chunks: Array<Uint8Array>
  /** Bytes the chunks hold. */
  held: number
  /** The offset after the last byte written (all bytes ever written). */
  end: number
}

/** An empty buffer that keeps at most `capacity` bytes. */
export const make = (capacity: number): OutputBuffer => ({ capacity, chunks: [], held: 0, end: 0 })

/** The offset of the oldest byte kept. */
export const start = (buffer: OutputBuffer): number => buffer.end - buffer.held

/** Appends `data`, dropping the oldest bytes beyond the capacity. */
export const append = (buffer: OutputBuffer, data: Uint8Array): void => {
  if (data.length === 0) return
  const kept = data.length > buffer.capacity ? data.subarray(data.length - buffer.capacity) : data
  buffer.chunks.push(kept)
  buffer.held += kept.length
  buffer.end += data.length
  while (buffer.held > buffer.capacity) {
    const first = buffer.chunks[0]!
    const over = buffer.held - buffer.capacity
    if (first.length <= over) {
      buffer.chunks.shift()
      buffer.held -= first.length
    } else {
      buffer.chunks[0] = first.subarray(over)
      buffer.held -= over
    }
  }
}

/** The length of the longest prefix of `bytes` that does not end inside a UTF-8 character. */
export const wholeCharacters = (bytes: Uint8Array): number => {
  // Look back at most 3 bytes for the lead byte of the last character.
  for (let back = 1; back <= Math.min(4, bytes.length); back++) {
    const byte = bytes[bytes.length - back]!
    if ((byte & 0xc0) === 0x80) continue
    const size = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
    return size > back ? bytes.length - back : bytes.length
  }
  return bytes.length
}

/**
 * At most `max` bytes from `cursor`; a cursor before the oldest kept byte
 * reads from there (`skipped` says how many were lost). A cut inside a
 * character ends before it, unless `final` (nothing more will come).
 */
export const read = (buffer: OutputBuffer, cursor: number, max: number, final = false): Slice => {
  const oldest = start(buffer)
  const from = Math.max(cursor, oldest)
  const until = Math.min(buffer.end, from + max)
  const out = new Uint8Array(Math.max(0, until - from))
  let offset = oldest
  for (const chunk of buffer.chunks) {
    const chunkEnd = offset + chunk.length
    if (chunkEnd > from && offset < until) {
      const a = Math.max(from, offset) - offset
      const b = Math.min(until, chunkEnd) - offset
      out.set(chunk.subarray(a, b), Math.max(from, offset) - from)
    }
    offset = chunkEnd
    if (offset >= until) break
  }
  const length = final && until === buffer.end ? out.length : wholeCharacters(out)
  // A single character longer than `max` cannot be cut whole: give its bytes rather than nothing.
  const taken = length === 0 && out.length > 0 ? out.length : length
  return { bytes: out.subarray(0, taken), from, next: from + taken, skipped: from - cursor }
}
