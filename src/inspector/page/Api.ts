/// <reference lib="dom" />
/**
 * The page's only way out: JSON requests to its own origin's HTTP API
 * (HTTP.md), with the Bearer token the user gave once for this tab
 * (sessionStorage). A 401 asks for a token and retries; every other failure
 * is a `ProblemError` carrying the problem+json answer.
 *
 * @since 0.3.0
 */
import type { Problem } from "./Types.js"

const TOKEN_KEY = "troupe.inspector.token"

/** A failed request: the server's problem+json, or a network failure (status 0). */
export class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.message)
  }
}

/** Asks the user for a token (the page's dialog); resolves to the token, or undefined when dismissed. */
export type TokenPrompt = (reason: string) => Promise<string | undefined>

let prompt: TokenPrompt = async () => undefined
let online: (up: boolean) => void = () => {}

/** Wires the token dialog and the connection banner. */
export const configure = (options: { readonly prompt: TokenPrompt; readonly online: (up: boolean) => void }): void => {
  prompt = options.prompt
  online = options.online
}

/** The token of this tab, if one was given. */
export const token = (): string | undefined => sessionStorage.getItem(TOKEN_KEY) ?? undefined

/** Forgets the token (the user signs out, or it was refused). */
export const forget = (): void => sessionStorage.removeItem(TOKEN_KEY)

/** The headers of every request: the token, when there is one. */
export const authHeaders = (): Record<string, string> => {
  const t = token()
  return t === undefined ? {} : { authorization: `Bearer ${t}` }
}

/** Reads a problem+json (or any) error answer. */
export const problemOf = async (response: Response): Promise<Problem> => {
  const text = await response.text().catch(() => "")
  try {
    const body = JSON.parse(text) as Partial<Problem>
    return { status: response.status, kind: body.kind ?? "unknown", message: body.message ?? body.title ?? response.statusText, ...body }
  } catch {
    return { status: response.status, kind: "unknown", message: text.slice(0, 200) || response.statusText }
  }
}

/** Asks for a token after a 401; true when one was given (then the caller retries). */
export const askToken = async (reason: string): Promise<boolean> => {
  const given = await prompt(reason)
  if (given === undefined || given.trim() === "") return false
  sessionStorage.setItem(TOKEN_KEY, given.trim())
  return true
}

/** A JSON request to the API; `path` starts with `/v1/`. */
export const request = async <A>(method: string, path: string, body?: unknown): Promise<A> => {
  for (let attempt = 0; ; attempt++) {
    let response: Response
    try {
      response = await fetch(path, {
        method,
        headers: { accept: "application/json", ...authHeaders(), ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        credentials: "omit",
        cache: "no-store"
      })
    } catch (error) {
      online(false)
      throw new ProblemError({ status: 0, kind: "unavailable", message: `the daemon did not answer (${String(error)})` })
    }
    online(true)
    if (response.status === 401 && attempt < 3) {
      const problem = await problemOf(response)
      if (token() !== undefined) forget()
      if (await askToken(problem.message)) continue
      throw new ProblemError(problem)
    }
    if (!response.ok) throw new ProblemError(await problemOf(response))
    return (response.status === 204 ? undefined : await response.json()) as A
  }
}

/**
 * Which changes the listener takes, as the server wrote it into the page
 * (`<meta name="troupe-writes">`): `all` on a daemon; `answers` or `none` on
 * a `troupe inspect`, whose page then hides what would be refused.
 */
export const writes = (): "all" | "answers" | "none" => {
  const told = document.querySelector<HTMLMetaElement>('meta[name="troupe-writes"]')?.content
  return told === "answers" || told === "none" ? told : "all"
}

/** `?a=1&b=2` of the defined values. */
export const query = (params: Readonly<Record<string, string | number | boolean | undefined>>): string => {
  const parts = Object.entries(params).filter(([, v]) => v !== undefined).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
  return parts.length === 0 ? "" : `?${parts.join("&")}`
}
