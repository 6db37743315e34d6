// ptyd web: the page keeps the daemon's state as the server pushes it (server-sent events) and draws it.
// Read-only: nothing here writes to a session.
"use strict";

const state = { sessions: new Map(), screens: new Map(), connected: false, zoomed: null };
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function ago(ms) {
  if (ms == null) return "before this view";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

function statusText(status) {
  if (status.kind !== "exited") return "running";
  return status.signal ? `killed by ${status.signal}` : `exited ${status.exit_code}`;
}

// A sandbox profile, where the daemon reports one (newer daemons): a string or an object with a name.
function sandboxText(info) {
  const sandbox = info.sandbox;
  if (sandbox == null) return "—";
  if (typeof sandbox === "string") return sandbox;
  return sandbox.profile || sandbox.name || JSON.stringify(sandbox);
}

function label(info) {
  return info.name || info.session_id;
}

function drawSessions() {
  const body = $("sessions").querySelector("tbody");
  body.replaceChildren();
  const sessions = [...state.sessions.values()].sort((a, b) => a.created_at_ms - b.created_at_ms);
  $("empty").hidden = sessions.length > 0;
  for (const info of sessions) {
    const flags = el("td");
    if (info.recording) flags.append(el("span", { class: "flag rec" }, "rec"));
    if (info.password_prompt) flags.append(el("span", { class: "flag pw" }, "password prompt"));
    if (info.busy) flags.append(el("span", { class: "flag" }, "busy"));
    if (info.alt_screen) flags.append(el("span", { class: "flag" }, "full-screen"));
    const row = el(
      "tr",
      { "data-session": info.session_id },
      el("td", { class: "id" }, label(info)),
      el("td", {}, info.owner_name || info.owner),
      el("td", {}, info.foreground ? info.foreground.name : "—"),
      el("td", { class: `status-${info.status.kind}` }, statusText(info.status)),
      el("td", {}, sandboxText(info)),
      el("td", {}, `${info.cols}×${info.rows}`),
      el("td", { class: "activity", "data-ms": String(info.last_activity_ms ?? "") }, ago(info.last_activity_ms)),
      flags,
    );
    body.append(row);
  }
  // One thumbnail per session, in the list's order; those of closed sessions go. One session is zoomed above
  // them: the one last clicked (a thumbnail or a row), else the first.
  const screens = $("screens");
  const wanted = new Set(sessions.map((s) => s.session_id));
  for (const card of [...screens.children]) if (!wanted.has(card.dataset.session)) card.remove();
  if (!wanted.has(state.zoomed)) state.zoomed = sessions.length ? sessions[0].session_id : null;
  for (const info of sessions) {
    let card = screens.querySelector(`[data-session="${CSS.escape(info.session_id)}"]`);
    if (!card) {
      card = el(
        "div",
        { class: "card", "data-session": info.session_id },
        el("h2"),
        el("img", { class: "picture", alt: "", hidden: "" }),
        el("pre", { class: "screen" }),
      );
      card.addEventListener("click", () => zoom(info.session_id));
      screens.append(card);
      const screen = state.screens.get(info.session_id);
      if (screen) drawCard(card, screen, info);
    }
    card.classList.toggle("zoomed", info.session_id === state.zoomed);
    const program = info.foreground ? info.foreground.name : statusText(info.status);
    card.querySelector("h2").textContent = `${label(info)} · ${info.owner_name || info.owner} · ${program}`;
  }
  for (const row of body.querySelectorAll("tr")) row.addEventListener("click", () => zoom(row.dataset.session));
  drawZoom();
}

function zoom(sid) {
  state.zoomed = sid;
  for (const card of $("screens").children) card.classList.toggle("zoomed", card.dataset.session === sid);
  for (const row of $("sessions").querySelectorAll("tbody tr")) row.classList.toggle("selected", row.dataset.session === sid);
  drawZoom();
}

// The zoomed session: its picture as the daemon drew it (colours, cursor), else its text.
function drawZoom() {
  const box = $("zoom");
  const info = state.sessions.get(state.zoomed);
  box.hidden = !info;
  if (!info) return;
  box.dataset.session = info.session_id;
  const program = info.foreground ? info.foreground.name : statusText(info.status);
  box.querySelector("h2").textContent = `${label(info)} · ${info.owner_name || info.owner} · ${program}`;
  const screen = state.screens.get(info.session_id);
  if (screen) drawCard(box, screen, info);
}

// A card (or the zoomed box): the picture when the daemon draws them, the text otherwise (kept for both).
function drawCard(card, screen, info) {
  const picture = card.querySelector("img");
  const pre = card.querySelector("pre");
  const cursor = screen.cursor_visible ? [screen.cursor_x, screen.cursor_y] : null;
  drawScreen(pre, screen.lines, cursor, info && info.cols, info && info.rows);
  if (screen.picture) {
    if (picture.getAttribute("src") !== screen.picture) picture.setAttribute("src", screen.picture);
    picture.dataset.current = String(screen.picture_current !== false); // an older picture until the next is due
    picture.hidden = false;
    pre.hidden = true;
  } else {
    picture.hidden = true;
    pre.hidden = false;
  }
}

// The rows as text, the cursor cell inverted; padded to the terminal's size so the card keeps its shape.
function drawScreen(pre, lines, cursor, cols, rows) {
  const out = [];
  const height = Math.max(rows || 0, lines.length);
  for (let y = 0; y < height; y++) {
    const line = [...(lines[y] || "")];
    if (cursor && cursor[1] === y) {
      while (line.length <= cursor[0]) line.push(" ");
      out.push(document.createTextNode(line.slice(0, cursor[0]).join("")));
      out.push(el("span", { class: "cursor" }, line[cursor[0]]));
      out.push(document.createTextNode(line.slice(cursor[0] + 1).join("") + "\n"));
    } else {
      out.push(document.createTextNode(line.join("") + "\n"));
    }
  }
  pre.replaceChildren(...out);
  if (cols) pre.style.width = `calc(${cols}ch + 1.2em)`;
}

function applyScreen(screen) {
  state.screens.set(screen.session_id, screen);
  const card = $("screens").querySelector(`[data-session="${CSS.escape(screen.session_id)}"]`);
  const info = state.sessions.get(screen.session_id);
  if (card) drawCard(card, screen, info);
  if (screen.session_id === state.zoomed) drawZoom();
}

function setLink(up) {
  state.connected = up;
  const link = $("link");
  link.textContent = up ? "live" : "daemon not reachable";
  link.className = `link ${up ? "up" : "down"}`;
}

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("state", (e) => {
    const data = JSON.parse(e.data);
    state.sessions = new Map(data.sessions.map((s) => [s.session_id, s]));
    state.screens = new Map(Object.entries(data.screens));
    $("screens").replaceChildren();
    setLink(data.connected);
    drawSessions();
  });
  source.addEventListener("sessions", (e) => {
    state.sessions = new Map(JSON.parse(e.data).map((s) => [s.session_id, s]));
    setLink(true);
    drawSessions();
  });
  source.addEventListener("screen", (e) => applyScreen(JSON.parse(e.data)));
  source.addEventListener("closed", (e) => {
    const sid = JSON.parse(e.data);
    state.sessions.delete(sid);
    state.screens.delete(sid);
    drawSessions();
  });
  source.onerror = () => setLink(false); // EventSource reconnects by itself
}

setInterval(() => {
  for (const cell of document.querySelectorAll("td.activity")) {
    cell.textContent = ago(cell.dataset.ms ? Number(cell.dataset.ms) : null);
  }
}, 1000);

// --- recordings and their player -------------------------------------------------------------------------

const player = { frames: [], duration: 0, playing: false, position: 0, startedAt: 0, from: 0, timer: null, size: [80, 24] };

async function loadRecordings() {
  const response = await fetch("/api/recordings");
  const data = await response.json();
  const body = $("recording-list").querySelector("tbody");
  body.replaceChildren();
  $("no-recordings").hidden = data.recordings.length > 0;
  for (const rec of data.recordings.slice().reverse()) {
    const button = el("button", {}, "Play");
    button.addEventListener("click", () => openRecording(rec));
    body.append(
      el(
        "tr",
        { "data-path": rec.path },
        el("td", { class: "id" }, rec.session_id),
        el("td", {}, String(rec.part)),
        el("td", {}, new Date(rec.started_at_ms).toLocaleString()),
        el("td", {}, `${rec.cols}×${rec.rows}`),
        el("td", {}, String(rec.bytes)),
        el("td", {}, rec.title + (rec.active ? " (recording)" : "")),
        el("td", {}, button),
      ),
    );
  }
}

async function openRecording(rec) {
  stop();
  $("player").hidden = false;
  $("player-title").textContent = `${rec.title} · part ${rec.part}`;
  $("player-screen").textContent = "rendering…";
  $("player").dataset.state = "loading";
  const response = await fetch(`/api/frames?path=${encodeURIComponent(rec.path)}`);
  const data = await response.json();
  if (!response.ok) {
    $("player-screen").textContent = data.error || "cannot play this recording";
    $("player").dataset.state = "error";
    return;
  }
  player.frames = data.frames;
  player.duration = data.duration;
  player.size = [data.width, data.height];
  player.position = 0;
  show(0);
  play();
}

// The frame shown at time t: the last one at or before it (binary search).
function frameAt(t) {
  const frames = player.frames;
  let lo = 0;
  let hi = frames.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (frames[mid].t <= t) lo = mid;
    else hi = mid - 1;
  }
  return frames[lo];
}

function show(t) {
  player.position = Math.min(t, player.duration);
  const frame = frameAt(player.position);
  if (frame) drawScreen($("player-screen"), frame.lines, frame.cursor, player.size[0], player.size[1]);
  $("clock").textContent = `${player.position.toFixed(1)} / ${player.duration.toFixed(1)} s`;
  $("seek").value = player.duration ? String(Math.round((player.position / player.duration) * 1000)) : "0";
}

function tick() {
  const speed = Number($("speed").value);
  const t = player.from + ((performance.now() - player.startedAt) / 1000) * speed;
  show(t);
  if (t >= player.duration) {
    stop();
    $("player").dataset.state = "ended";
    return;
  }
  player.timer = requestAnimationFrame(tick);
}

function play() {
  if (!player.frames.length) return;
  if (player.position >= player.duration) player.position = 0;
  player.playing = true;
  player.from = player.position;
  player.startedAt = performance.now();
  $("play").textContent = "Pause";
  $("player").dataset.state = "playing";
  player.timer = requestAnimationFrame(tick);
}

function stop() {
  player.playing = false;
  if (player.timer) cancelAnimationFrame(player.timer);
  player.timer = null;
  $("play").textContent = "Play";
  if (player.frames.length) $("player").dataset.state = "paused";
}

$("play").addEventListener("click", () => (player.playing ? stop() : play()));
$("speed").addEventListener("change", () => {
  if (player.playing) {
    stop();
    play();
  }
});
$("seek").addEventListener("input", () => {
  const playing = player.playing;
  stop();
  show((Number($("seek").value) / 1000) * player.duration);
  if (playing) play();
});

for (const tab of document.querySelectorAll(".tab")) {
  tab.addEventListener("click", () => {
    for (const other of document.querySelectorAll(".tab")) other.classList.toggle("active", other === tab);
    for (const view of document.querySelectorAll(".view")) view.hidden = view.id !== tab.dataset.view;
    if (tab.dataset.view === "recordings") loadRecordings();
  });
}

connect();
