// The README's picture of a trace (dev/figures/stage3_trace.png): a --trace
// file opened in Chromium's own trace viewer, its DevTools Performance panel
// (devtools://devtools/bundled/trace_app.html, "Load profile"), its first
// rank's lanes opened and zoomed into a few layers of the forward pass.
//
//   apt-get install chromium; npm install -g playwright-core (NODE_PATH=$(npm root -g))
//   node dev/trace_screenshot.js out/reproduce/stage3_trace.json dev/figures/stage3_trace.png
//
// The clicks are at the panel's places in Chromium 156 at 1600 x 900; another
// version may move them.
const { chromium } = require('playwright-core');
const [trace, png] = process.argv.slice(2);
(async () => {
  const profile = require('fs').mkdtempSync(require('os').tmpdir() + '/trace_view');
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], viewport: { width: 1600, height: 900 } });
  const page = await ctx.newPage();
  const pause = (ms) => page.waitForTimeout(ms);
  await page.goto('devtools://devtools/bundled/trace_app.html');
  const tab = page.getByText('Performance', { exact: true }).first();
  await tab.waitFor({ timeout: 30000 });
  for (let tries = 0; ; tries++) {  // its "no debugging connection" note may cover the tab a while
    await page.keyboard.press('Escape');
    try { await tab.click({ timeout: 1000 }); break; } catch (e) { if (tries > 20) throw e; }
  }
  await pause(1000);
  await page.locator('input[type=file]').first().setInputFiles(trace);
  await pause(5000);
  await page.mouse.click(1571, 77), await pause(300);   // the shortcuts' pop-up closed
  await page.mouse.click(16, 39), await pause(500);     // the sidebar closed
  await page.mouse.click(10, 129), await pause(800);    // rank 0's lanes
  await page.mouse.click(20, 167), await pause(500);    // the comm stream's slices
  await page.mouse.click(20, 146), await pause(500);    // the compute stream's
  await page.mouse.move(60, 300);
  for (let i = 0; i < 11; i++) await page.keyboard.press('w'), await pause(60);  // zoomed into a few layers
  await pause(800);
  await page.screenshot({ path: png, clip: { x: 0, y: 0, width: 1600, height: 240 } });
  await ctx.close();
})();
