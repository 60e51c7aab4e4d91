/// <reference lib="dom" />
/**
 * The inspector's entry point: the shell (the "connection lost" banner, a
 * status line for screen readers, the token dialog), and a hash router:
 * `#/` the sessions list, `#/sessions/<id>` one session.
 *
 * @since 0.3.0
 */
import * as Api from "./Api.js"
import { h, replace } from "./Dom.js"
import { ListView } from "./ListView.js"
import * as Live from "./Live.js"
import { SessionView } from "./SessionView.js"
import "./style.css"

const main = document.getElementById("main")!
const banner = document.getElementById("banner")!
const status = document.getElementById("status")!
const dialog = document.getElementById("token-dialog") as HTMLDialogElement
let view: { readonly element: HTMLElement; dispose(): void } | undefined

const say = (text: string) => {
  status.textContent = text
  setTimeout(() => {
    if (status.textContent === text) status.textContent = ""
  }, 5000)
}

let requestsUp = true
let streamsUp = true
const showBanner = () => {
  const up = requestsUp && streamsUp
  banner.hidden = up
  document.body.dataset.connection = up ? "up" : "lost"
}

/** Asks for a token in the page's dialog (once per tab: it is kept in sessionStorage). */
const askToken = (reason: string): Promise<string | undefined> =>
  new Promise((resolve) => {
    const input = dialog.querySelector("input")!
    replace(dialog.querySelector(".why")!, reason)
    input.value = ""
    dialog.returnValue = ""
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok" ? input.value : undefined), { once: true })
    if (!dialog.open) dialog.showModal()
    input.focus()
  })

/** Shows the view the address names; after a navigation, focus moves to it (not on the first load: nothing moved). */
const route = (navigated: boolean) => {
  view?.dispose()
  const hash = location.hash.replace(/^#/, "")
  const match = /^\/sessions\/([^/]+)$/.exec(hash)
  delete document.body.dataset.ready
  view = match !== null ? new SessionView(decodeURIComponent(match[1]!), say) : new ListView(say)
  replace(main, view.element)
  document.title = match !== null ? `${match[1]} · troupe inspector` : "Sessions · troupe inspector"
  if (navigated) main.focus({ preventScroll: true })
}

Api.configure({
  prompt: askToken,
  online: (up) => {
    requestsUp = up
    showBanner()
  }
})
Live.onConnectivity((up) => {
  streamsUp = up
  showBanner()
})
dialog.querySelector("form")!.addEventListener("submit", (event) => {
  event.preventDefault()
  dialog.close("ok")
})
document.getElementById("token-cancel")!.addEventListener("click", () => dialog.close(""))
document.getElementById("forget-token")!.addEventListener("click", () => {
  Api.forget()
  say("Token forgotten for this tab.")
  route(true)
})
window.addEventListener("hashchange", () => route(true))
const writes = Api.writes()
if (writes !== "all") {
  // Said once, in the header: what this listener refuses.
  document.querySelector("header.top .brand")!.after(
    h("span", { class: "badge mode", title: writes === "none" ? "Nothing can be changed here" : "Only callbacks can be answered here" },
      writes === "none" ? "read-only" : "read-only · answers"))
}
route(false)
