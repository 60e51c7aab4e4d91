/**
 * `troupe/client`: the clients of a troupe daemon — the socket clients in the
 * Effect form (`SessionClient`, `AgentClient`) and the Promise form
 * (`PromiseClient`), the HTTP clients in both forms (`HttpSessionClient`,
 * `HttpPromiseClient`), and the forward-compatibility rule they read a newer
 * daemon's stream by (`ForwardCompatible`) — without the runtime, the stores
 * or any driver (test/Layout.test.ts holds src/client to the wire). The same
 * modules as the package root's namespaces of the same names; the schemas are
 * `troupe/schema`.
 *
 * @since 0.3.0
 */
/** The raw client tier: frames in, frames out, CBOR left to the caller (Effect and Promise APIs). */
export * as AgentClient from "./AgentClient.js"
/** The clients' forward-compatibility rule: what a newer daemon sends that a client cannot read passes through as `Unknown`. */
export * as ForwardCompatible from "./ForwardCompatible.js"
/** The Promise API of `HttpSessionClient`, for plain TypeScript (`await HttpPromiseClient.connect(url)`). */
export * as HttpPromiseClient from "./HttpPromiseClient.js"
/** The typed HTTP client: the `Sessions` API of a remote daemon over HTTP, from the same `HttpApi` it serves (Effect API). */
export * as HttpSessionClient from "./HttpSessionClient.js"
/** The Promise API of `SessionClient`, for plain TypeScript (`await PromiseClient.connect(path)`). */
export * as PromiseClient from "./PromiseClient.js"
/** The typed client tier: the `Sessions` API of a remote daemon (Effect API). */
export * as SessionClient from "./SessionClient.js"
