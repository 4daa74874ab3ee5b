// prism-om inspect: a little progressive enhancement. Every fragment comes from the
// server already escaped; nothing here builds HTML from text.
"use strict";

async function fragment(url) {
  const response = await fetch(url, { headers: { Accept: "text/html" } });
  return response.text();
}

function wireRecall(root) {
  root.querySelectorAll("[data-recall-url]").forEach((button) => {
    if (button.dataset.wired) return;
    button.dataset.wired = "1";
    button.addEventListener("click", async () => {
      const item = button.closest("li.mem");
      const slot = item ? item.querySelector(".recall-slot") : button.parentElement;
      if (button.classList.contains("recall-toggle") && slot.childElementCount) {
        slot.replaceChildren();
        return;
      }
      const html = await fragment(button.dataset.recallUrl);
      if (button.classList.contains("more-sources")) {
        button.parentElement.outerHTML = html;
      } else {
        slot.innerHTML = html;
      }
      wireRecall(slot.closest("li") || document);
    });
  });
}

function wireFilter() {
  const box = document.getElementById("filter");
  const table = document.getElementById("sessions");
  if (!box || !table) return;
  box.addEventListener("input", () => {
    const needle = box.value.toLowerCase();
    table.querySelectorAll("tbody tr").forEach((row) => {
      row.hidden = !row.dataset.session.toLowerCase().includes(needle);
    });
  });
}

async function loadCharts() {
  const holder = document.getElementById("charts");
  if (!holder || !holder.dataset.src) return;
  holder.innerHTML = await fragment(holder.dataset.src);
}

document.addEventListener("DOMContentLoaded", () => {
  wireRecall(document);
  wireFilter();
  loadCharts();
});
