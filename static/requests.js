/* What htmx's attributes (base.html) cannot do alone, for every htmx request:
   - while one is in flight, the region it will replace is marked busy (aria-busy), so that
     old results read as stale (base.css dims them);
   - a failed one (an error status, no answer, a timeout) says so in #request-errors, with
     the status and the server's reason, until dismissed or until a later request for the
     same region succeeds. htmx itself only logs it in the console. */
(function () {
  "use strict";

  const inFlight = new WeakMap(); // target element -> requests in flight for it

  function busy(target, change) {
    if (!(target instanceof Element)) return;
    const count = (inFlight.get(target) || 0) + change;
    inFlight.set(target, Math.max(count, 0));
    if (count > 0) target.setAttribute("aria-busy", "true");
    else target.removeAttribute("aria-busy");
  }

  function region() {
    return document.getElementById("request-errors");
  }

  // The server's words: the API's JSON `detail`, an error page's [data-error-reason] (or its
  // heading), or the start of a text answer.
  function reasonOf(xhr) {
    const type = xhr.getResponseHeader("Content-Type") || "";
    const body = xhr.responseText || "";
    if (type.startsWith("application/json")) {
      try {
        const detail = JSON.parse(body).detail;
        return typeof detail === "string" ? detail : "";
      } catch {
        return "";
      }
    }
    if (type.startsWith("text/html")) {
      const page = new DOMParser().parseFromString(body, "text/html");
      const reason = page.querySelector("[data-error-reason]") || page.querySelector("h1");
      return reason ? reason.textContent.replace(/\s+/g, " ").trim() : "";
    }
    return body.trim().slice(0, 300);
  }

  function keyOf(detail) {
    const target = detail.target;
    return target && target.id ? target.id : detail.pathInfo.requestPath;
  }

  function show(detail, status, reason) {
    const errors = region();
    if (!errors) return;
    const key = keyOf(detail);
    for (const old of errors.querySelectorAll(".request-error")) {
      if (old.dataset.key === key) old.remove(); // the latest failure for a region is enough
    }
    const item = document.createElement("div");
    item.className = "request-error";
    item.dataset.key = key;
    const text = document.createElement("p");
    const title = document.createElement("strong");
    title.textContent = status;
    text.append(title);
    if (reason) text.append(": " + reason);
    const where = document.createElement("span");
    where.className = "where";
    where.textContent = (detail.requestConfig?.verb || "get").toUpperCase() + " " + detail.pathInfo.requestPath;
    const dismiss = document.createElement("button");
    dismiss.type = "button";
    dismiss.className = "dismiss";
    dismiss.setAttribute("aria-label", "Dismiss");
    dismiss.textContent = "×";
    dismiss.addEventListener("click", () => item.remove());
    item.append(text, where, dismiss);
    errors.append(item);
  }

  document.addEventListener("htmx:beforeRequest", (event) => busy(event.detail.target, +1));

  document.addEventListener("htmx:afterRequest", (event) => {
    const detail = event.detail;
    busy(detail.target, -1);
    if (detail.successful) {
      const key = keyOf(detail);
      for (const old of region()?.querySelectorAll(".request-error") || []) {
        if (old.dataset.key === key) old.remove();
      }
    }
  });

  // htmx keeps a copy of the page for the back button, taken while the request that leaves
  // it is in flight: on the page it restores, nothing is.
  document.addEventListener("htmx:historyRestore", () => {
    for (const element of document.querySelectorAll("[aria-busy]")) element.removeAttribute("aria-busy");
    region()?.replaceChildren();
  });

  document.addEventListener("htmx:responseError", (event) => {
    const xhr = event.detail.xhr;
    show(event.detail, `${xhr.status} ${xhr.statusText}`.trim(), reasonOf(xhr));
  });

  document.addEventListener("htmx:sendError", (event) => {
    show(event.detail, "No answer", "the server could not be reached (is it running?)");
  });

  document.addEventListener("htmx:timeout", (event) => {
    const seconds = Math.round(window.htmx.config.timeout / 1000);
    show(event.detail, "Timed out", `no answer within ${seconds} s`);
  });
})();
