// One view in a real browser, as a client that shows MCP Apps would: an MCP
// client (the official SDK) talks to `host serve --http`, calls a tool,
// reads its view, and the ext-apps SDK's host side (AppBridge) connects
// the view, loaded in a sandboxed iframe of headless Chromium with the
// extension's restrictive default CSP, and relays its tools/call to the
// host. Run from the folder whose node_modules hold the packages
// (tests/e2e/views.rs copies it there).
//
// stdin: {url, tool, arguments, chromium, theme?, waitFor, collect: {key:
// selector}, type?: {selector: text}, click?: selector (focused, then Enter),
// afterClick?: {waitFor, collect}, screenshot?}
// stdout: {resourceUri, mimeType, result, dom, calls, afterClick?}
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { AppBridge } from "@modelcontextprotocol/ext-apps/app-bridge";
import puppeteer from "puppeteer-core";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const spec = JSON.parse(Buffer.concat(chunks).toString());

const client = new Client(
  { name: "view-test", version: "1.0.0" },
  { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } } },
);
await client.connect(new StreamableHTTPClientTransport(new URL(spec.url)));
const { tools } = await client.listTools();
const tool = tools.find((t) => t.name === spec.tool);
const resourceUri = tool?._meta?.ui?.resourceUri;
if (!resourceUri) throw new Error(`tool ${spec.tool} lists no view: ${JSON.stringify(tool?._meta)}`);
const read = await client.readResource({ uri: resourceUri });
const [contents] = read.contents;
const result = await client.callTool({ name: spec.tool, arguments: spec.arguments });

// The extension's restrictive default, enforced as a host must.
const csp = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; media-src data:; connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'self'";
const html = contents.text.replace(/<head>/i, `<head><meta http-equiv="Content-Security-Policy" content="${csp}">`);

const browser = await puppeteer.launch({
  executablePath: spec.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 860, height: 640 });
  if (spec.theme) await page.emulateMediaFeatures([{ name: "prefers-color-scheme", value: spec.theme }]);
  // The view's tools/call requests, and what the host answered (AppBridge
  // forwards them through the client).
  const calls = [];
  const transport = {
    async start() {},
    async send(message) {
      const call = calls.find((c) => c.id === message.id && c.isError === undefined);
      if (call) call.isError = !!(message.error || message.result?.isError);
      if (process.env.DRIVE_DEBUG) console.error("host->view", JSON.stringify(message).slice(0, 300));
      await page.evaluate((m) => document.getElementById("view").contentWindow.postMessage(m, "*"), message);
    },
    async close() {},
  };
  await page.exposeFunction("__fromView", (message) => {
    if (process.env.DRIVE_DEBUG) console.error("view->host", JSON.stringify(message).slice(0, 300));
    if (message?.method === "tools/call") calls.push({ id: message.id, params: message.params });
    transport.onmessage?.(message);
  });
  await page.setContent(`<!doctype html><html><body style="margin:0;background:${spec.theme === "dark" ? "#111" : "#fff"}">
    <iframe id="view" sandbox="allow-scripts" style="border:0;width:100%;height:600px"></iframe>
    <script>window.addEventListener("message", (e) => {
      if (e.source === document.getElementById("view").contentWindow) window.__fromView(e.data);
    });</script></body></html>`);
  const bridge = new AppBridge(
    client,
    { name: "view-test-host", version: "1.0.0" },
    { serverTools: {}, logging: {} },
    { hostContext: { theme: spec.theme || "light", displayMode: "inline" } },
  );
  bridge.onsizechange = ({ height }) => {
    if (height) page.evaluate((h) => { document.getElementById("view").style.height = `${h}px`; }, height).catch(() => {});
  };
  bridge.oninitialized = () => {
    bridge.sendToolInput({ arguments: spec.arguments });
    bridge.sendToolResult(result);
  };
  await bridge.connect(transport);
  await page.evaluate((doc) => { document.getElementById("view").srcdoc = doc; }, html);

  const frame = await (async () => {
    for (let i = 0; i < 100; i++) {
      const found = page.frames().find((f) => f !== page.mainFrame());
      if (found) return found;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error("the view's frame never appeared");
  })();
  const collect = async (selectors) => {
    const out = {};
    for (const [key, selector] of Object.entries(selectors || {})) {
      out[key] = await frame.$$eval(selector, (els) => els.map((e) => e.textContent.trim()));
    }
    return out;
  };
  await frame.waitForSelector(spec.waitFor, { timeout: 30000 });
  const dom = await collect(spec.collect);
  if (spec.screenshot) {
    await new Promise((r) => setTimeout(r, 300));
    await page.screenshot({ path: spec.screenshot, fullPage: true });
  }
  let afterClick;
  for (const [selector, text] of Object.entries(spec.type || {})) {
    await page.focus("#view");
    await frame.focus(selector);
    await page.keyboard.type(text);
    if (process.env.DRIVE_DEBUG) console.error("typed:", await frame.$eval(selector, (e) => e.value));
  }
  if (spec.click) {
    // By keyboard, as a person without a mouse would: the frame, then the
    // control, then Enter.
    await page.focus("#view");
    await frame.focus(spec.click);
    await page.keyboard.press("Enter");
    const deadline = Date.now() + 120000;
    while (!calls.some((c) => c.isError !== undefined) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (spec.afterClick?.waitFor) await frame.waitForSelector(spec.afterClick.waitFor, { timeout: 120000 });
    afterClick = await collect(spec.afterClick?.collect);
  }
  process.stdout.write(JSON.stringify({ resourceUri, mimeType: contents.mimeType, meta: contents._meta, result, dom, calls, afterClick }));
} finally {
  await browser.close();
  await client.close();
}
