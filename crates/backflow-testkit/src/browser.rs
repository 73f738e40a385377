//! A real headless Chromium (Debian's `chromium`), driven by `playwright-core` (npm) through a
//! small node program that takes one JSON command per line and answers one JSON line each:
//! pages are loaded, read from the DOM, clicked and photographed as a person's browser would.
//! `scripts/test.sh` installs both; `BACKFLOW_TEST_CHROMIUM` names another browser binary.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

/// The node program: launches the browser, then answers commands.
const DRIVER: &str = r"
import { chromium } from 'playwright-core';
import readline from 'node:readline';
const browser = await chromium.launch({ executablePath: process.argv[process.argv.length - 1], headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const say = (v) => process.stdout.write(JSON.stringify(v) + '\n');
say({ ready: true });
for await (const line of readline.createInterface({ input: process.stdin })) {
  const c = JSON.parse(line);
  try {
    if (c.op === 'goto') { const r = await page.goto(c.url, { waitUntil: 'load' }); say({ status: r.status() }); }
    else if (c.op === 'texts') { say({ texts: await page.$$eval(c.selector, (els) => els.map((e) => e.innerText)) }); }
    else if (c.op === 'html') { say({ html: await page.content() }); }
    else if (c.op === 'mark') { await page.evaluate(() => { window.__backflowMark = 'kept'; }); say({ ok: true }); }
    else if (c.op === 'waitText') {
      await page.waitForFunction(([s, t]) => [...document.querySelectorAll(s)].some((e) => e.innerText.includes(t)),
        [c.selector, c.contains], { timeout: c.timeout });
      say({ mark: await page.evaluate(() => window.__backflowMark || null) });
    }
    else if (c.op === 'select') { await page.selectOption(c.selector, c.value); say({ ok: true }); }
    else if (c.op === 'submit') { await Promise.all([page.waitForNavigation(), page.click(c.selector)]); say({ url: page.url() }); }
    else if (c.op === 'screenshot') { await page.screenshot({ path: c.path, fullPage: true }); say({ ok: true }); }
    else if (c.op === 'focusOrder') {
      const seen = [];
      for (let i = 0; i < c.count; i++) { await page.keyboard.press('Tab');
        seen.push(await page.evaluate(() => { const e = document.activeElement; return e ? (e.id || e.tagName) : null; })); }
      say({ seen });
    }
    else { say({ error: 'unknown op ' + c.op }); }
  } catch (e) { say({ error: String(e) }); }
}
await browser.close();
";

/// The browser binary: `BACKFLOW_TEST_CHROMIUM`, else Debian's `/usr/bin/chromium`. Panics,
/// saying how to install it, when it is missing: a test that needs it fails rather than skips.
#[must_use]
pub fn chromium() -> PathBuf {
    let path = std::env::var_os("BACKFLOW_TEST_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    assert!(
        path.is_file(),
        "{} is not there: run ./scripts/test.sh (it installs Debian's chromium), or set \
         BACKFLOW_TEST_CHROMIUM",
        path.display()
    );
    path
}

/// A headless Chromium with one page, driven command by command.
pub struct Browser {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Browser {
    /// Starts the browser.
    ///
    /// # Panics
    /// When node, `playwright-core` or the browser cannot be started.
    #[must_use]
    pub fn start() -> Self {
        let dir = crate::node::dir();
        assert!(
            dir.join("node_modules/playwright-core").is_dir(),
            "playwright-core is not in {}: run ./scripts/test.sh (it installs it)",
            dir.display()
        );
        let mut child = Command::new("node")
            .args(["--input-type=module", "-e", DRIVER, "--"])
            .arg(chromium())
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("node is needed by this test: {e}"));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut browser = Self {
            child,
            stdin: Some(stdin),
            stdout,
        };
        let hello = browser.read();
        assert_eq!(hello["ready"], true, "the browser did not start: {hello}");
        browser
    }

    /// Sends `command` and returns its answer; panics on an `error` answer.
    ///
    /// # Panics
    /// When the driver fails the command or goes away.
    pub fn ask(&mut self, command: &Value) -> Value {
        let stdin = self.stdin.as_mut().expect("the browser is open");
        writeln!(stdin, "{command}").expect("the browser driver takes commands");
        stdin.flush().expect("flush");
        let answer = self.read();
        assert!(
            answer.get("error").is_none(),
            "the browser could not {command}: {answer}"
        );
        answer
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("the browser driver answers");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the browser driver said {line:?}: {e}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The driver closes the browser when its input ends; stopped by its own PID if it
        // does not within a few seconds (the browser then goes with its pipe).
        drop(self.stdin.take());
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
