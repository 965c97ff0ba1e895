"""`gpuscope serve --web` in a real browser: headless Chromium (Debian's
`chromium`) driven by Selenium through Debian's `chromium-driver`, which is
built from the same sources, so the two always match.

Run by tests/serve_web.rs, which passes the program in GPUSCOPE_BIN (and the
environment the other serve tests give it), and the browser and its driver
in GPUSCOPE_TEST_CHROMIUM and GPUSCOPE_TEST_CHROMEDRIVER.
"""

import json
import os
import subprocess
import tempfile
import threading
import time
import unittest

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

GPUSCOPE = os.environ["GPUSCOPE_BIN"]
CHROMIUM = os.environ["GPUSCOPE_TEST_CHROMIUM"]
CHROMEDRIVER = os.environ["GPUSCOPE_TEST_CHROMEDRIVER"]
INTERVAL_MS = 500
# How long to wait for what must happen; the machine may be loaded, so
# this bounds a hang, it does not measure speed.
PATIENCE_S = 30
TOKEN = "web-t0ken-5b1c"
H100 = "NVIDIA H100 80GB HBM3"


class Server:
    """`gpuscope [BEFORE] serve --web [EXTRA]` on a free port, found on
    stderr: the demo unless `before` says otherwise."""

    def __init__(self, *extra, before=("--demo",), env=None):
        args = [GPUSCOPE, *before, "serve", "--web", "--listen", "127.0.0.1:0", "--interval", f"{INTERVAL_MS}ms"]
        self.proc = subprocess.Popen(
            args + list(extra), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env,
        )
        self.stderr = []
        found = threading.Event()
        self.url = None

        def read():
            for line in self.proc.stderr:
                self.stderr.append(line)
                if "serving http://" in line and self.url is None:
                    addr = line.split("serving http://", 1)[1].split("/", 1)[0]
                    self.url = f"http://{addr}/"
                    found.set()
            found.set()  # it exited: no need to wait any longer

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(PATIENCE_S) or self.url is None:
            self.stop()
            raise AssertionError("gpuscope serve never said where it listens: " + "".join(self.stderr))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()


def browser(width=1280, height=1000):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # --no-sandbox: CI runs as root, where Chromium refuses its sandbox.
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def errors(driver):
    """The console's errors since the last call (the log is drained)."""
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait(driver, what, condition):
    try:
        return WebDriverWait(driver, PATIENCE_S, poll_frequency=0.05).until(lambda d: condition(d))
    except Exception as e:
        status = driver.find_element(By.ID, "status").text
        raise AssertionError(f"never saw {what} (status: {status!r})") from e


def gpu_cards(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#gpus .gpu")


def shown_time(driver):
    return int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-time") or 0)


class DemoPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.driver = browser()

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()
        cls.server.stop()

    def test_shows_the_demo_live_without_console_errors(self):
        d = self.driver
        d.get(self.server.url)
        cards = wait(d, "the demo's five GPUs", lambda d: len(gpu_cards(d)) == 5 and gpu_cards(d))
        names = [c.find_element(By.CLASS_NAME, "name").text for c in cards]
        self.assertEqual(names[:4], [H100] * 4)
        self.assertIn("lost", cards[4].text, "the demo's GPU 4 has fallen off the bus")
        # The memory bar's four parts, each with its figure, on a probed GPU.
        parts = [li.get_attribute("data-part") for li in cards[0].find_elements(By.CSS_SELECTOR, ".legend li")]
        self.assertEqual(parts, ["allocated", "cached", "other", "free"])
        self.assertRegex(cards[0].text, r"SM active\s+\d+ %")
        # A training rank with its allocator figures.
        row = wait(d, "a process row", lambda d: d.find_elements(By.CSS_SELECTOR, "#procs tr.proc"))[0]
        cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
        self.assertEqual(cells[0], row.get_attribute("data-pid"))
        self.assertEqual(cells[3], "python3")
        self.assertRegex(cells[5], r"^\d+\.\d GiB$", f"allocated: {cells}")
        self.assertIn("fell off the bus", d.find_element(By.ID, "alerts").text)
        self.assertEqual(errors(d), [])

    def test_a_figure_updates_within_two_intervals(self):
        d = self.driver
        d.get(self.server.url)
        wait(d, "GPU figures", lambda d: len(gpu_cards(d)) == 5)
        self.assertIn(f"every {INTERVAL_MS / 1000} s", d.find_element(By.ID, "status").text)
        before = (shown_time(d), d.find_element(By.ID, "gpus").text)
        after = wait(d, "a figure change", lambda d: d.find_element(By.ID, "gpus").text != before[1]
                     and (shown_time(d), d.find_element(By.ID, "gpus").text))
        # Measured in the snapshots' own time, not this loaded machine's:
        # the page drew a snapshot at most two intervals newer than the one
        # before it, so it polls at the server's pace and redraws each time.
        # The server's ticks themselves run a few ms late on a loaded
        # machine; three intervals would mean two snapshots skipped.
        slack = INTERVAL_MS // 2
        self.assertLessEqual(after[0] - before[0], 2 * INTERVAL_MS + slack, "the page skipped snapshots")
        self.assertGreater(after[0], before[0])
        self.assertEqual(errors(d), [])

    def test_fits_a_phone(self):
        d = browser(390, 844)
        try:
            d.get(self.server.url)
            wait(d, "GPU figures", lambda d: len(gpu_cards(d)) == 5)
            overflow = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            self.assertLessEqual(overflow, 0, "the page scrolls sideways on a 390 px screen")
            self.assertFalse(d.find_element(By.CSS_SELECTOR, "#procs th.wide").is_displayed())
            self.assertEqual(errors(d), [])
        finally:
            d.quit()


class TokenPage(unittest.TestCase):
    def test_asks_for_the_token_once_and_keeps_it_in_the_tab(self):
        with tempfile.TemporaryDirectory() as dir:
            path = os.path.join(dir, "token")
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(TOKEN + "\n")
            server = Server("--token-file", path)
            d = browser()
            try:
                d.get(server.url)
                form = wait(d, "the token form", lambda d: d.find_element(By.ID, "login").is_displayed()
                            and d.find_element(By.ID, "login"))
                self.assertFalse(d.find_element(By.ID, "view").is_displayed())
                self.assertEqual(gpu_cards(d), [], "no data without the token")

                field = d.find_element(By.ID, "token")
                self.assertEqual(field.get_attribute("type"), "password")
                field.send_keys("wrong-token")
                form.find_element(By.TAG_NAME, "button").click()
                wait(d, "the refusal", lambda d: "refused" in d.find_element(By.ID, "login-error").text)
                self.assertEqual(gpu_cards(d), [])

                d.find_element(By.ID, "token").send_keys(TOKEN)
                d.find_element(By.CSS_SELECTOR, "#login button").click()
                wait(d, "the GPUs", lambda d: len(gpu_cards(d)) == 5)
                self.assertFalse(form.is_displayed())
                stored = d.execute_script(
                    "return [sessionStorage.getItem('gpuscope-token'), localStorage.length]")
                self.assertEqual(stored, [TOKEN, 0], "in this tab's sessionStorage only")
                self.assertNotIn(TOKEN, d.current_url)
                self.assertNotIn("wrong-token", d.current_url)
                # Polling goes on with the stored token, without asking again.
                shown = shown_time(d)
                wait(d, "a newer snapshot", lambda d: shown_time(d) > shown)
                self.assertFalse(form.is_displayed())
                # The only errors are the browser's note of the two 401s.
                for e in errors(d):
                    self.assertIn("401", e["message"], e)
            finally:
                d.quit()
                server.stop()


class HostileStrings(unittest.TestCase):
    """A GPU and a process named as markup, on the simulated NVML that
    tests/serve_web.rs sets up: the page shows the words, runs nothing."""

    def test_snapshot_strings_are_shown_as_text(self):
        spec = os.environ.get("GPUSCOPE_TEST_HOSTILE")
        if not spec:
            self.skipTest("needs the simulated GPU and process that tests/serve_web.rs starts")
        spec = json.loads(spec)
        env = dict(os.environ)
        for name, value in spec["env"].items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        server = Server(before=spec["args"], env=env)
        d = browser()
        try:
            d.get(server.url)
            row = wait(d, "the process row", lambda d: d.find_elements(By.CSS_SELECTOR, f"tr.proc[data-pid='{spec['pid']}']"))[0]
            command = row.find_elements(By.TAG_NAME, "td")[-1].get_attribute("textContent")
            self.assertTrue(command.endswith(spec["markup"]), command)
            name = d.find_element(By.CSS_SELECTOR, "#gpus .gpu .name").get_attribute("textContent")
            self.assertEqual(name, spec["markup"])
            self.assertEqual(d.execute_script("return document.querySelectorAll('img, b').length"), 0)
            self.assertIsNone(d.execute_script("return window.pwned === undefined ? null : window.pwned"))
            self.assertEqual(errors(d), [])
        finally:
            d.quit()
            server.stop()


if __name__ == "__main__":
    unittest.main()
