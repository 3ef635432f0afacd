// Copy buttons (`<button class="copy" data-copy="#id">`): the one thing htmx cannot do is put
// text on the clipboard. Without JavaScript the buttons stay hidden (base.css) and the text is
// there to select. Where the Clipboard API is refused (a page served over plain http to
// another host), the text is selected and copied the old way.
document.documentElement.classList.add("scripted");

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  const source = button && document.querySelector(button.dataset.copy);
  if (!source) return;
  const done = (label) => {
    button.textContent = label;
    setTimeout(() => { button.textContent = button.dataset.label; }, 2000);
  };
  button.dataset.label ??= button.textContent;
  const selectAndCopy = () => {
    window.getSelection().selectAllChildren(source);
    done(document.execCommand("copy") ? "Copied" : "Selected: press Ctrl+C");
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(source.textContent).then(() => done("Copied"), selectAndCopy);
  } else {
    selectAndCopy();
  }
});
