// A --trace file opened in Chromium's own DevTools Performance panel
// (devtools://devtools/bundled/trace_app.html: the Performance tab, its file
// input), as a user opens it, and what DevTools made of it, read from its own
// parsed model, printed as one JSON object:
//   tracks: per pid/tid: x_in_file (the file's "X" events there, as DevTools
//           received them), shown (those the flame chart draws on the track),
//           kept (those in DevTools' slice tree), dropped (x_in_file - kept),
//           shown_other (B/E pairs and "I" instants drawn there);
//           with --slices, each kept slice as [name, ts, dur, depth];
//   order:  processes and, in each, threads, top to bottom as the flame chart
//           lists them (entries: the thread's count DevTools sorts by);
//   groups: the flame chart's track headers in order;
//   flows:  each flow DevTools built, its events in its own order (the first
//           is drawn as the initiator of the second, and so on);
//   arrows: how many events have an initiator (the arrows it can draw);
//   load_ms: from handing over the file to the parsed model being drawn;
//   console_errors: the first few errors DevTools logged meanwhile.
//
//   apt-get install chromium; npm install -g playwright-core (NODE_PATH=$(npm root -g))
//   node dev/trace_devtools.js TRACE.json [--slices]
//
// Exits 1 with a one-line reason when DevTools cannot load the file. It reads
// the Timeline panel's test hooks (Chromium 156): TimelinePanel.instance()
// .getParsedTraceForLayoutTests() and the flame chart's main data provider;
// another version may rename them. test/test_trace_browser.sh runs it.
const { chromium } = require('playwright-core');
const fs = require('fs');
const os = require('os');
const path = require('path');

const TIMELINE = 'devtools://devtools/bundled/panels/timeline/timeline.js';

// Runs in the DevTools page; null until a trace is parsed and drawn.
async function summarize({ timelineUrl, withSlices }) {
  const T = await import(timelineUrl);
  let panel, data, raw;
  try {
    panel = T.TimelinePanel.TimelinePanel.instance();
    data = panel.getParsedTraceForLayoutTests();
    raw = panel.getTraceEngineRawTraceEventsForLayoutTests();
  } catch (e) { return null; }
  const provider = panel.getFlameChart().getMainDataProvider();
  let appenders, timeline;
  try {  // (throws until the flame chart has the parsed trace)
    appenders = provider.compatibilityTracksAppenderInstance();
    timeline = provider.timelineData();
  } catch (e) { return null; }
  const tracks = new Map();
  const track = (pid, tid) => {
    const key = pid + '/' + tid;
    if (!tracks.has(key)) tracks.set(key, { pid, tid, x_in_file: 0, shown: 0, shown_other: 0, kept: 0, dropped: 0 });
    return tracks.get(key);
  };
  const fileX = new Set(raw.filter((e) => e.ph === 'X'));
  for (const e of fileX) track(e.pid, e.tid).x_in_file++;
  const nodes = data.Renderer.entryToNode;  // a slice in the tree has a node
  for (const [pid, proc] of data.Renderer.processes)
    for (const [tid, thread] of proc.threads) {
      const t = track(pid, tid);
      if (withSlices) t.slices = [];
      for (const e of thread.entries) {
        if (!fileX.has(e) || !nodes.has(e)) continue;
        t.kept++;
        if (withSlices) t.slices.push([e.name, e.ts, e.dur, nodes.get(e).depth]);
      }
    }
  const order = [];
  for (const [pid, threads] of appenders.allThreadAppendersByProcess()) {
    const entry = { pid, name: data.Meta.processNames.get(pid)?.args?.name ?? null, threads: [] };
    for (const a of threads) {
      const shown = appenders.eventsInTrack(a), t = track(pid, a.threadId());
      t.shown = shown.filter((e) => fileX.has(e)).length;
      t.shown_other = shown.length - t.shown;  // B/E pairs, "I" instants
      entry.threads.push({ tid: a.threadId(), name: a.trackName(), entries: a.getEntries().length });
    }
    order.push(entry);
  }
  for (const t of tracks.values()) t.dropped = t.x_in_file - t.kept;
  const ev = (e) => ({ pid: e.pid, tid: e.tid, ts: e.ts, name: e.name, ph: e.ph });
  return { generic: data.Meta.traceIsGeneric, events: raw.length, tracks: [...tracks.values()], order,
    groups: timeline.groups.map((g) => g.name), flows: data.Flows.flows.map((chain) => chain.map(ev)),
    arrows: data.Initiators.eventToInitiator.size };
}

async function load(file, withSlices) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'trace_devtools'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
    args: ['--no-sandbox'], viewport: { width: 1600, height: 900 } });
  try {
    const page = await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push('Uncaught ' + e.message));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    await page.goto('devtools://devtools/bundled/trace_app.html');
    const tab = page.getByText('Performance', { exact: true }).first();
    await tab.waitFor({ timeout: 30000 });
    for (let tries = 0; ; tries++) {  // its "debugging connection was closed" note may cover the tab
      await page.keyboard.press('Escape');
      try { await tab.click({ timeout: 1000 }); break; } catch (e) { if (tries > 20) throw e; }
    }
    const input = page.locator('input[type=file]').first();
    await input.waitFor({ state: 'attached', timeout: 30000 });
    // Note what the panel is handed when loading ends, and any failure it reports.
    await page.evaluate(async (timelineUrl) => {
      const panel = (await import(timelineUrl)).TimelinePanel.TimelinePanel.instance();
      const complete = panel.loadingComplete, failed = panel.recordingFailed;
      panel.loadingComplete = function (events, ...rest) {
        window.traceDevtoolsEvents = events.length;
        return complete.call(this, events, ...rest);
      };
      panel.recordingFailed = function (message, ...rest) {
        window.traceDevtoolsFailure = String(message);
        return failed.call(this, message, ...rest);
      };
    }, TIMELINE);
    const errorsBefore = errors.length;
    const started = Date.now();
    await input.setInputFiles(file);
    const deadline = started + Number(process.env.TRACE_DEVTOOLS_TIMEOUT_MS || 120000);
    for (;;) {
      const summary = await page.evaluate(summarize, { timelineUrl: TIMELINE, withSlices });
      const seen = errors.slice(errorsBefore);
      if (summary) return Object.assign(summary, { load_ms: Date.now() - started, file, console_errors: seen.slice(0, 5) });
      const [handed, failure] = await page.evaluate(() => [window.traceDevtoolsEvents, window.traceDevtoolsFailure]);
      const failed = failure || seen.find((m) => m.startsWith('Uncaught') || /Malformed/i.test(m)) ||
        (handed === 0 && 'no trace events in it');
      if (failed) throw new Error('DevTools could not load ' + file + ': ' + failed);
      if (Date.now() > deadline) throw new Error('DevTools did not finish loading ' + file + ' in time');
      await page.waitForTimeout(100);
    }
  } finally {
    await ctx.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--'));
const oneLine = (s) => 'trace_devtools: ' + String(s).split('\n')[0] + '\n';
if (!file || !fs.existsSync(file)) {
  process.stderr.write(oneLine(file ? 'no such file: ' + file : 'usage: node dev/trace_devtools.js TRACE.json [--slices]'));
  process.exit(2);
}
load(file, args.includes('--slices')).then(
  (summary) => process.stdout.write(JSON.stringify(summary) + '\n'),
  (e) => { process.stderr.write(oneLine(e.message)); process.exit(1); });
