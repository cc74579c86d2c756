// Small SVG charts for the dashboard: horizontal bars, columns over time and a funnel.
// Each chart is drawn at its container's real width (so its text stays readable on a phone) and redrawn when the
// window is resized. Every chart is an <svg role="img"> with a <title> and <desc>; the page puts the same numbers
// in a <table> beside it. Text is always set with textContent.

const SVG = "http://www.w3.org/2000/svg";
const FONT = 14;
let serial = 0;
const drawn = new Set();

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    node.setAttribute(name, String(value));
  }
  if (text !== undefined) {
    node.textContent = String(text);
  }
  return node;
}

function frame(width, height, title, desc) {
  serial += 1;
  const id = "chart-" + serial;
  const svg = svgEl("svg", {
    width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-labelledby": `${id}-title ${id}-desc`, class: "chart",
  });
  svg.setAttribute("aria-label", title);
  svg.appendChild(svgEl("title", { id: `${id}-title` }, title));
  svg.appendChild(svgEl("desc", { id: `${id}-desc` }, desc));
  return svg;
}

function widthOf(container) {
  return Math.max(260, Math.floor(container.clientWidth || 320));
}

// Draws `draw(width)` into `container` now and again whenever the window's width changes, while it is in the page.
function mount(container, draw) {
  const render = () => {
    if (!container.isConnected) {
      drawn.delete(render);
      return;
    }
    if (container.offsetParent === null) {
      return;  // hidden (another tab): drawn when shown
    }
    container.replaceChildren(draw(widthOf(container)));
  };
  drawn.add(render);
  container.replaceChildren(draw(widthOf(container)));
  return render;
}

let resizeTimer = 0;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(redrawAll, 150);
});

export function redrawAll() {
  for (const render of Array.from(drawn)) {
    render();
  }
}

function describe(items, unit) {
  if (!items.length) {
    return "No data for this period.";
  }
  return items.map((item) => `${item.label}: ${item.value}${unit ? " " + unit : ""}`).join("; ") + ".";
}

// One row per item: its label on a line, a bar below with the number at its end. Fits any width.
export function barChart(container, { title, items, unit = "", format = String }) {
  return mount(container, (width) => {
    const rowHeight = 46;
    const height = Math.max(1, items.length) * rowHeight + 8;
    const svg = frame(width, height, title, describe(items.map((i) => ({ ...i, value: format(i.value) })), unit));
    const max = Math.max(1, ...items.map((item) => item.value));
    const room = width - 64;  // space for the number after the longest bar
    if (!items.length) {
      svg.appendChild(svgEl("text", { x: 0, y: FONT + 4, class: "chart-note" }, "No data for this period."));
    }
    items.forEach((item, index) => {
      const top = index * rowHeight;
      const bar = Math.max(item.value > 0 ? 2 : 0, Math.round((item.value / max) * room));
      const group = svgEl("g", { class: "bar", "data-label": item.label, "data-value": item.value });
      group.appendChild(svgEl("text", { x: 0, y: top + FONT, class: "chart-label" }, item.label));
      group.appendChild(svgEl("rect", { x: 0, y: top + FONT + 6, width: bar, height: 18, rx: 2 }));
      group.appendChild(svgEl("text", { x: bar + 6, y: top + FONT + 20, class: "chart-value" }, format(item.value)));
      svg.appendChild(group);
    });
    return svg;
  });
}

// Columns over time (one per day), with the largest value and zero marked on the left, the first and last dates
// below. `items` are {label, value} in time order.
export function columnChart(container, { title, items, unit = "" }) {
  return mount(container, (width) => {
    const height = 200;
    const left = 40;
    const bottom = 24;
    const top = 10;
    const svg = frame(width, height, title, describe(items, unit));
    const max = Math.max(1, ...items.map((item) => item.value));
    const plot = height - top - bottom;
    svg.appendChild(svgEl("line", { x1: left, y1: top + plot, x2: width, y2: top + plot, class: "chart-axis" }));
    svg.appendChild(svgEl("text", { x: left - 6, y: top + FONT - 2, "text-anchor": "end", class: "chart-tick" }, max));
    svg.appendChild(svgEl("text", { x: left - 6, y: top + plot, "text-anchor": "end", class: "chart-tick" }, 0));
    const step = items.length ? (width - left) / items.length : 0;
    items.forEach((item, index) => {
      const h = Math.round((item.value / max) * plot);
      const rect = svgEl("rect", {
        x: left + index * step + step * 0.15, y: top + plot - h, width: Math.max(1, step * 0.7), height: h,
        class: "column", "data-label": item.label, "data-value": item.value,
      });
      rect.appendChild(svgEl("title", {}, `${item.label}: ${item.value}`));
      svg.appendChild(rect);
    });
    if (items.length) {
      const y = height - 6;
      svg.appendChild(svgEl("text", { x: left, y, class: "chart-tick" }, items[0].label));
      if (items.length > 1) {
        svg.appendChild(svgEl("text", { x: width, y, "text-anchor": "end", class: "chart-tick" },
          items[items.length - 1].label));
      }
    } else {
      svg.appendChild(svgEl("text", { x: left + 6, y: top + plot / 2, class: "chart-note" }, "No data for this period."));
    }
    return svg;
  });
}

// A funnel: one centred bar per stage, as wide as its share of the first stage, labelled with count and share.
export function funnelChart(container, { title, stages }) {
  return mount(container, (width) => {
    const rowHeight = 52;
    const height = Math.max(1, stages.length) * rowHeight + 4;
    const first = stages.length ? stages[0].value : 0;
    const share = (value) => (first > 0 ? Math.round((value / first) * 100) : 0);
    const items = stages.map((s) => ({ label: s.label, value: `${s.value} (${share(s.value)}%)` }));
    const svg = frame(width, height, title, describe(items, ""));
    stages.forEach((stage, index) => {
      const top = index * rowHeight;
      const bar = first > 0 ? Math.max(stage.value > 0 ? 2 : 0, Math.round((stage.value / first) * width)) : 0;
      const group = svgEl("g", { class: "stage", "data-label": stage.label, "data-value": stage.value });
      group.appendChild(svgEl("text", { x: width / 2, y: top + FONT, "text-anchor": "middle", class: "chart-label" },
        `${stage.label}: ${stage.value} (${share(stage.value)}%)`));
      group.appendChild(svgEl("rect", { x: (width - bar) / 2, y: top + FONT + 6, width: bar, height: 24, rx: 2 }));
      svg.appendChild(group);
    });
    return svg;
  });
}
