// The operator's path through the Paperclip web UI, one scene per run:
//
//   node flow.mjs '<json>'
//
// where the JSON names the scene and its inputs (see scenes below). It
// drives Debian's Chromium through playwright-core, asserts on what the
// page shows (texts and states, never internals), saves a screenshot per
// step in shots/, prints one JSON line per step to stdout and a last line
// {"ok":true,...} or {"ok":false,"error":...}; the exit status is 0 only
// for ok. make server-e2e (e2e/server/browser.go) runs the scenes.
import { chromium } from 'playwright-core';
import path from 'node:path';

const args = JSON.parse(process.argv[2] ?? '{}');
const wait = 60_000; // any one thing the page must show, unless a step says otherwise (a busy machine's CI)

// Chromium as this machine's closed network needs it: no sandbox (the
// harness runs as root), no background or update traffic, a fresh profile.
const launchArgs = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let page;
let shotNo = 0;

function say(step, fields = {}) {
  process.stdout.write(JSON.stringify({ step, ...fields }) + '\n');
}

// shot saves the page as <scene>-<n>-<name>.png and reports the step.
async function shot(name, saw) {
  shotNo++;
  const file = `${args.scene}${args.tag ? '-' + args.tag : ''}-${String(shotNo).padStart(2, '0')}-${name}.png`;
  await page.screenshot({ path: path.join(args.shots, file), fullPage: true });
  say(name, { saw, shot: file });
}

// see waits until text is on the page and returns it.
async function see(text, timeout = wait) {
  await page.getByText(text, { exact: false }).filter({ visible: true }).first().waitFor({ state: 'visible', timeout });
  return text;
}

// field is the input, select or textarea of the form row labelled label
// (the UI's labels are not tied to their inputs).
function field(label, sel = 'input,select,textarea') {
  return row(label).locator(sel).first();
}

// row is the form row of label, up levels from it: 2 holds the label and
// its input, 3 also a list field's items. A label's first text is
// matched: a required field's label ends in a "*".
function row(label, levels = 2) {
  return page.locator(`xpath=//label[normalize-space(text()[1])=${JSON.stringify(label)}]/ancestor::div[${levels}]`).first();
}

// open goes to a page of the company, the way the sidebar links do.
async function open(route, heading) {
  await page.goto(`${args.base}/${args.prefix}/${route}`, { waitUntil: 'domcontentloaded' });
  if (heading) await see(heading);
}

async function board() {
  await page.goto(args.base + '/', { waitUntil: 'domcontentloaded' });
  await see('Dashboard');
  const m = new URL(page.url()).pathname.match(/^\/([^/]+)\//);
  if (!m) throw new Error(`the board opened at ${page.url()}, not a company page`);
  args.prefix = m[1];
  await see('Agents Enabled');
  await shot('board', 'the board dashboard');
}

const scenes = {
  // install: the plugin installed by its npm name through Plugin Manager.
  async install() {
    await board();
    await open('company/settings/instance/plugins', 'Plugin Manager');
    await page.getByRole('button', { name: 'Install Plugin' }).click();
    await see('Enter the npm package name of the plugin you wish to install.');
    await page.locator('#packageName').fill(args.package);
    await shot('install-dialog', `Install Plugin with ${args.package}`);
    await page.getByRole('dialog').getByRole('button', { name: 'Install', exact: true }).click();
    await see(args.pluginName, 3 * 60_000);
    await page.getByRole('dialog').waitFor({ state: 'hidden', timeout: wait });
    await shot('installed', `${args.pluginName} under Installed Plugins`);
    return { prefix: args.prefix };
  },

  // environments: Environments switched on, then each environment made
  // through the form its driver's configSchema generates, tested before
  // it is saved, saved, and tested again from the list.
  async environments() {
    await board();
    await open('company/settings/instance/experimental', 'Experimental');
    const on = page.getByRole('switch', { name: 'Toggle environments experimental setting' });
    if ((await on.getAttribute('aria-checked')) !== 'true') await on.click();
    await page.waitForFunction(() => document.querySelector('[aria-label="Toggle environments experimental setting"]')?.getAttribute('aria-checked') === 'true', null, { timeout: wait });
    await shot('environments-on', 'Enable Environments switched on');
    const made = {};
    for (const env of args.environments) made[env.name] = await createEnvironment(env);
    return { environments: made };
  },

  // heartbeat: the agent's environment override set to one environment,
  // Run now, and the run's live log watched until it shows the agent's
  // output and the run succeeds.
  async heartbeat() {
    await board();
    const tab = await openEnvironmentOverride();
    const select = field('Environment override', 'select');
    await select.selectOption({ label: args.environmentLabel });
    if (tab === 'runtime') {
      await page.getByRole('button', { name: 'Save changes' }).click();
      // Saved: no enabled "Save changes" and no "Saving..." left. A Run now
      // while the save is in flight starts no run.
      await page.waitForFunction(() => ![...document.querySelectorAll('button')].some((b) => {
        const t = b.textContent.trim();
        return (t === 'Save changes' && !b.disabled) || t === 'Saving...';
      }), null, { timeout: 2 * 60_000 });
    } else {
      // Configuration's floating bar (Cancel, Save) goes once it has saved.
      const save = page.getByRole('button', { name: 'Save', exact: true });
      await save.click();
      await save.waitFor({ state: 'hidden', timeout: 2 * 60_000 });
    }
    await shot('environment', `environment override ${args.environmentLabel}`);
    // The agent header's button: Run now (2026.916.1), Run Heartbeat (2026.831.1).
    // A click that lands while the page re-renders after the save sends
    // nothing: it is clicked again only when no run request (heartbeat/invoke) went out,
    // so it never starts two runs.
    const run = page.getByRole('button', { name: tab === 'runtime' ? 'Run now' : 'Run Heartbeat' });
    for (let attempt = 1; ; attempt++) {
      const woke = page.waitForRequest((r) => r.method() === 'POST' && /\/api\/agents\/[^/]+\/(heartbeat\/invoke|wakeup)/.test(r.url()),
        { timeout: 15_000 }).then(() => true, () => false);
      await run.click();
      if (await woke) break;
      if (attempt === 3) throw new Error(`${attempt} clicks on the run button sent no run request`);
    }
    await page.waitForURL(/\/runs\/[0-9a-f-]{36}/, { timeout: 2 * 60_000 });
    const runId = page.url().match(/\/runs\/([0-9a-f-]{36})/)[1];
    await see(args.logText, 3 * 60_000);
    await shot('live-log', `the run's log shows "${args.logText}"`);
    await see(args.doneText, 3 * 60_000);
    await shot('succeeded', `the run shows "${args.doneText}"`);
    return { runId };
  },

  // setup: the environment's custom-image setup opened, what the operator
  // is told to do read off the page, and the setup cancelled.
  async setup() {
    await editEnvironment(args.environment);
    await page.getByRole('button', { name: 'Configure image' }).click();
    const setup = page.locator('div').filter({ has: page.getByRole('button', { name: 'Finished' }) }).last();
    await setup.waitFor({ state: 'visible', timeout: 2 * 60_000 });
    const fallback = page.locator('summary', { hasText: 'SSH command fallback' });
    if (await fallback.count()) await fallback.first().click(); // the command is folded away
    for (const text of args.expect) await see(text, wait);
    await shot('setup', args.expect.join(' / '));
    await setup.getByRole('button', { name: 'Cancel', exact: true }).click();
    await see('Configure image');
    await shot('setup-cancelled', 'setup cancelled: Configure image again');
    return {};
  },

  // delete: each environment deleted from its edit page.
  async delete() {
    for (const name of args.environments) {
      await editEnvironment(name);
      await page.getByRole('button', { name: `Delete ${name}` }).click();
      const confirm = page.getByTestId('environment-delete-confirm');
      await confirm.waitFor({ state: 'visible', timeout: wait });
      await page.waitForFunction(() => !document.querySelector('[data-testid="environment-delete-confirm"]')?.disabled, null, { timeout: wait });
      await shot(`delete-${slug(name)}`, `the delete dialog of ${name}`);
      await confirm.click();
      await page.waitForURL(/\/environments$/, { timeout: wait });
      await page.getByText(name, { exact: false }).first().waitFor({ state: 'detached', timeout: wait });
    }
    await shot('deleted', `${args.environments.join(', ')} no longer listed`);
    return {};
  },
};

// openEnvironmentOverride opens the agent's tab with its environment
// override and returns its route: Runtime (2026.916.1), or Configuration
// where the release has no Runtime tab and sends that route to the agent's
// dashboard (2026.831.1).
async function openEnvironmentOverride() {
  await open(`agents/${args.agent}/runtime`, null);
  const label = page.getByText('Environment override', { exact: false }).filter({ visible: true }).first();
  const shown = await Promise.race([
    label.waitFor({ state: 'visible', timeout: wait }).then(() => 'runtime', () => null),
    page.waitForURL(/\/agents\/[^/]+\/dashboard$/, { timeout: wait }).then(() => 'dashboard', () => null),
  ]);
  if (shown === 'runtime') return shown;
  if (shown === null) throw new Error('the agent\'s runtime route showed no Environment override and did not go to its dashboard');
  await open(`agents/${args.agent}/configuration`, 'Environment override');
  return 'configuration';
}

async function createEnvironment(env) {
  await open('company/settings/instance/environments/new', 'Add environment');
  await field('Name').fill(env.name);
  await page.locator('option', { hasText: 'Sandbox' }).first().waitFor({ state: 'attached', timeout: wait });
  await field('Driver', 'select').selectOption({ label: 'Sandbox' });
  await field('Provider', 'select').selectOption({ label: env.provider });
  await see(env.providerDescription);
  await fill(env.fields ?? []);
  const saw = {};
  for (const t of env.tests ?? []) {
    await fill(t.fields ?? []);
    await page.getByRole('button', { name: 'Test', exact: true }).click();
    saw[t.name] = await see(t.expect, 2 * 60_000);
    await shot(`${slug(env.name)}-test-${t.name}`, `Test: "${t.expect}"`);
  }
  await page.getByRole('button', { name: 'Create environment' }).click();
  await page.waitForURL(/\/environments$/, { timeout: wait });
  const row = page.locator('div', { has: page.getByText(`${env.name} · sandbox`, { exact: true }) })
    .filter({ has: page.getByRole('button', { name: 'Test provider' }) }).last();
  await row.waitFor({ state: 'visible', timeout: wait });
  await row.getByRole('button', { name: 'Test provider' }).click();
  saw.saved = await see(env.savedProbe, 2 * 60_000);
  await shot(`${slug(env.name)}-saved`, `listed and tested: "${env.savedProbe}"`);
  return saw;
}

// fill sets form fields: {label, value} for text, {label, select} for a
// native select, {label, choose} for the generated form's option list,
// {label, add: [...]} for a list field, {label, secret} for a secret
// field's raw value.
async function fill(fields) {
  for (const f of fields) {
    if (f.select !== undefined) {
      await field(f.label, 'select').selectOption({ label: f.select });
    } else if (f.choose !== undefined) {
      await field(f.label, 'button,[role=combobox]').click();
      await page.getByRole('option', { name: f.choose, exact: true }).click();
    } else if (f.add !== undefined) {
      const list = row(f.label, 3);
      for (const v of f.add) {
        await list.getByRole('button', { name: 'Add', exact: true }).click();
        await list.locator('input').last().fill(v);
      }
    } else if (f.secret !== undefined) {
      const r = row(f.label);
      const paste = r.getByRole('button', { name: 'Or paste a raw value' });
      if (await paste.count()) await paste.click();
      await r.locator('input,textarea').last().fill(f.secret);
    } else {
      await field(f.label).fill(String(f.value));
    }
  }
}

async function editEnvironment(name) {
  await board();
  await open('company/settings/instance/environments', `${name} · sandbox`);
  const row = page.locator('div', { has: page.getByText(`${name} · sandbox`, { exact: true }) })
    .filter({ has: page.getByText('Edit', { exact: true }) }).last();
  await row.getByText('Edit', { exact: true }).click();
  await see('Edit environment');
}

function slug(s) {
  return s.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

async function main() {
  const scene = scenes[args.scene];
  if (!scene) throw new Error(`no scene ${JSON.stringify(args.scene)}`);
  const browser = await chromium.launch({ executablePath: args.chromium, args: launchArgs });
  try {
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.setDefaultTimeout(wait);
    try {
      const result = await scene();
      say('done', { ok: true, ...result });
    } catch (err) {
      const file = `${args.scene}${args.tag ? '-' + args.tag : ''}-failed.png`;
      await page.screenshot({ path: path.join(args.shots, file), fullPage: true }).catch(() => {});
      const text = await page.locator('main').first().innerText({ timeout: 2000 }).catch(() => '');
      say('done', { ok: false, error: String(err.message ?? err).split('\n')[0], url: page.url(), page: text.slice(0, 3000), shot: file });
      process.exitCode = 1;
    }
  } finally {
    await browser.close();
  }
}

await main();
