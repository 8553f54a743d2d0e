"""The operator console in a real browser: headless Chromium driven through chromedriver (Selenium).

Run by scripts/test/console-test.sh, which starts a relay in demo mode (the demo app delivering to the
built-in sandbox, on a fresh embedded PostgreSQL) and passes its address and keys in the
environment. The steps run in order against one browser, as an operator would: a wrong key is
refused; sign in; a webhook's pushes appear on Overview and in Find as delivered; a device is
looked up with its unread counts and unregistered; a bulk-unregister job started from a file
reaches succeeded; the Apps page; a form without its CSRF token is refused; no page shows a
secret. Each page is saved as a PNG in CONSOLE_TEST_OUTPUT.
"""

import hashlib
import json
import os
import time
import unittest
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE = os.environ["CONSOLE_BASE_URL"]
ADMIN_KEY = os.environ["CONSOLE_ADMIN_KEY"]
APP_KEY = os.environ["CONSOLE_APP_KEY"]
WEBHOOK_URL = os.environ["CONSOLE_WEBHOOK_URL"]
WEBHOOK_SECRET = WEBHOOK_URL.rstrip("/").rsplit("/", 1)[1]
# The webhook secret of the app test_08a manages through the console; console-test.sh checks the log for it.
MANAGED_SECRET = "browser-managed-secret-0123456789"
OUTPUT = os.environ.get("CONSOLE_TEST_OUTPUT", ".build/console-test")

IOS_TOKEN = "6b1c0f5e8d2a4b7c9e3f1a0d5c8b2e4f6a9d1c3b5e7f0a2d4c6b8e1f3a5c7d9e"
ANDROID_TOKEN = "android-console-browser-token"
TICKET = "console-7"
TITLE = "Console check reply"


def api(method, path, body=None, key=ADMIN_KEY, content_type="application/json"):
    """A request to the relay's API with an API key; returns (status, parsed JSON or None)."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(BASE + path, data=data, method=method)
    if key:
        request.add_header("Authorization", "Bearer " + key)
    if data is not None:
        request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as error:
        text = error.read()
        return error.code, (json.loads(text) if text else None)


class ConsoleInBrowser(unittest.TestCase):
    driver = None
    pages_seen = []
    notification_id = None

    @classmethod
    def setUpClass(cls):
        os.makedirs(OUTPUT, exist_ok=True)
        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
            options.add_argument(argument)
        service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
        cls.driver = webdriver.Chrome(options=options, service=service)
        cls.driver.set_page_load_timeout(30)

    @classmethod
    def tearDownClass(cls):
        if cls.driver:
            cls.driver.quit()

    # Helpers

    def open(self, path):
        self.driver.get(BASE + path)
        self.remember_page()

    def remember_page(self):
        self.pages_seen.append((self.driver.current_url, self.driver.page_source))

    def shot(self, name):
        path = os.path.join(OUTPUT, name + ".png")
        # The whole page, not just the window: size the window to the document first.
        height = self.driver.execute_script("return Math.max(document.body.scrollHeight, 600)")
        width = self.driver.get_window_size()["width"]
        self.driver.set_window_size(width, min(height + 120, 4000))
        self.driver.save_screenshot(path)
        self.driver.set_window_size(width, 1000)
        print(f"screenshot: {path}")

    def wait(self, condition, timeout=30, message=""):
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.25).until(lambda driver: condition())
        except TimeoutException:
            self.fail(message or "timed out")

    def text(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css).text

    def sign_in(self, key):
        self.open("/console/login")
        field = self.driver.find_element(By.ID, "key")
        field.clear()
        field.send_keys(key)
        self.driver.find_element(By.CSS_SELECTOR, "#login-form button").click()
        self.remember_page()

    # Steps, in order

    def test_01_wrong_key_is_refused(self):
        self.open("/console")
        self.assertTrue(self.driver.current_url.endswith("/console/login"), "a visitor without a session is sent to sign in")
        self.sign_in("prk_000000000000_thisisnotakeythisisnotakeythisisnotak")
        self.assertIn("Unknown or revoked API key", self.text("#error"))
        self.assertTrue(self.driver.current_url.endswith("/console/login"))
        self.assertIsNone(self.driver.get_cookie("pushrelay_session"))
        self.shot("01-sign-in-refused")

    def test_02_sign_in(self):
        self.sign_in(ADMIN_KEY)
        self.wait(lambda: self.driver.current_url.endswith("/console"), message="signing in lands on the Overview")
        cookie = self.driver.get_cookie("pushrelay_session")
        self.assertIsNotNone(cookie)
        self.assertTrue(cookie["httpOnly"], "the session cookie is HttpOnly")
        self.assertEqual(cookie["sameSite"], "Strict")
        self.assertEqual(self.driver.execute_script("return document.cookie"), "", "scripts cannot read the session cookie")
        self.assertIn("admin key", self.text("#who"))
        self.assertEqual(self.text("#ready"), "ready")
        self.assertRegex(self.text("#schema-version"), r"^\d+$")

    def test_03_webhook_appears_on_overview(self):
        # A device linked to a user first, so the reply is counted unread for that user.
        status, _ = api("PUT", f"/v1/apps/demo/devices/{IOS_TOKEN}", {"platform": "ios", "user_id": "dana"})
        self.assertIn(status, (200, 201))
        status, _ = api("PUT", f"/v1/apps/demo/devices/{ANDROID_TOKEN}", {"platform": "android", "user_id": "dana"})
        self.assertIn(status, (200, 201))
        before = int(self.text('section.app[data-app="demo"] [data-field="last_hour.delivered"]'))
        status, answer = api("POST", WEBHOOK_URL[len(BASE):], {
            "devices": [{"identifier": IOS_TOKEN, "type": "ios"}, {"identifier": ANDROID_TOKEN, "type": "android"}],
            "notification": {"title": TITLE, "body": "Hello from the console test", "ticket_id": TICKET},
        }, key=None)
        self.assertEqual(status, 202, answer)
        type(self).notification_id = answer["notification_id"]
        # The page refreshes itself (no reload): the two pushes show up as delivered.
        self.wait(
            lambda: int(self.text('section.app[data-app="demo"] [data-field="last_hour.delivered"]')) >= before + 2,
            timeout=40, message="the Overview shows the webhook's two pushes delivered without a reload",
        )
        self.assertGreaterEqual(int(self.text('section.app[data-app="demo"] [data-field="last_hour.webhooks"]')), 1)
        drawn = self.driver.execute_script(
            "const c = document.querySelector('canvas.chart'); const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
            "let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n;"
        )
        self.assertGreater(drawn, 100, "the chart is drawn")
        self.remember_page()
        self.shot("02-overview")
        # Readable on a phone: the same page at 390 px wide.
        self.driver.set_window_size(390, 1000)
        self.driver.refresh()
        self.wait(lambda: self.driver.execute_script("return document.body.dataset.refreshed") is not None)
        overflow = self.driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        self.assertLessEqual(overflow, 0, "no sideways scrolling on a phone")
        self.shot("03-overview-phone")
        self.driver.set_window_size(1280, 1000)

    def test_04_find_shows_the_push_delivered(self):
        self.driver.find_element(By.LINK_TEXT, "Find").click()
        Select(self.driver.find_element(By.NAME, "by")).select_by_value("notification")
        self.driver.find_element(By.ID, "q").send_keys(str(self.notification_id))
        self.driver.find_element(By.CSS_SELECTOR, "form.search button").click()
        self.wait(lambda: self.driver.find_elements(By.CSS_SELECTOR, "article.notification"), message="Find shows the notification")
        self.remember_page()
        deliveries = self.driver.find_elements(By.CSS_SELECTOR, "article.notification .delivery")
        self.assertEqual(len(deliveries), 2)
        for delivery in deliveries:
            self.assertEqual(delivery.get_attribute("data-status"), "delivered")
            self.assertTrue(delivery.find_element(By.CSS_SELECTOR, ".provider-id").text, "each push shows its provider id")
            self.assertIn("1 attempt", delivery.text)
        self.assertIn(TITLE, self.text("article.notification .meta"))
        self.assertNotIn(IOS_TOKEN, self.driver.page_source, "tokens are shortened")
        self.shot("04-find-notification")
        # The ticket's list links to the same notification.
        self.driver.find_element(By.PARTIAL_LINK_TEXT, TICKET).click()
        self.wait(lambda: f"Ticket {TICKET}" in self.driver.page_source)
        self.remember_page()
        self.assertTrue(self.driver.find_elements(By.CSS_SELECTOR, f'article[data-notification="{self.notification_id}"]'))
        self.shot("05-find-ticket")

    def test_05_devices_lookup_and_unregister(self):
        self.open(f"/console/devices?app=demo&by=user&q=dana")
        rows = self.driver.find_elements(By.CSS_SELECTOR, "table.devices tbody tr")
        self.assertEqual(len(rows), 2)
        self.assertTrue(all(row.get_attribute("data-status") == "active" for row in rows))
        self.assertEqual(self.text("#unread-total"), "1", "the reply on ticket console-7 is unread for dana")
        self.assertIn(TICKET, self.text("table.unread"))
        self.shot("06-devices")
        # Unregister the Android device, with a confirmation step.
        row = next(row for row in rows if "android" in row.text)
        row.find_element(By.LINK_TEXT, "Unregister…").click()
        self.wait(lambda: self.driver.find_elements(By.ID, "unregister-form"))
        self.remember_page()
        self.shot("07-unregister-confirm")
        self.driver.find_element(By.CSS_SELECTOR, "#unregister-form button").click()
        self.wait(lambda: "The device was unregistered." in self.driver.page_source)
        self.remember_page()
        status, _ = api("GET", f"/v1/apps/demo/devices/{ANDROID_TOKEN}")
        self.assertEqual(status, 404, "the device is gone from the registry")

    def test_06_form_without_csrf_token_is_refused(self):
        self.open(f"/console/devices/unregister?app=demo&token={IOS_TOKEN}")
        self.driver.execute_script("document.querySelector('#unregister-form input[name=csrf_token]').remove()")
        self.driver.find_element(By.CSS_SELECTOR, "#unregister-form button").click()
        self.wait(lambda: self.driver.find_elements(By.ID, "message"))
        self.remember_page()
        self.assertIn("CSRF token", self.text("#message"))
        self.shot("08-csrf-refused")
        status, device = api("GET", f"/v1/apps/demo/devices/{IOS_TOKEN}")
        self.assertEqual(status, 200, "the refused form changed nothing")
        self.assertEqual(device["status"], "active")

    def test_07_bulk_unregister_job_from_a_file(self):
        # 3,000 tokens: the 20 registered devices are removed, the rest are not found.
        for index in range(20):
            status, _ = api("PUT", f"/v1/apps/demo/devices/android-job-{index}", {"platform": "android"})
            self.assertIn(status, (200, 201))
        path = os.path.abspath(os.path.join(OUTPUT, "tokens.txt"))
        with open(path, "w") as file:
            file.write("\n".join(f"android-job-{index}" for index in range(3000)) + "\n")
        self.open("/console/jobs")
        rows_before = len(self.driver.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job]"))
        self.driver.find_element(By.ID, "job-file").send_keys(path)
        self.driver.find_element(By.CSS_SELECTOR, "#job-form button").click()
        self.wait(lambda: len(self.driver.find_elements(By.CSS_SELECTOR, "#jobs tr[data-job]")) == rows_before + 1,
                  message="the new job is listed")
        row = lambda: self.driver.find_element(By.CSS_SELECTOR, "#jobs tbody tr[data-job]")
        self.wait(lambda: row().get_attribute("data-status") == "succeeded", timeout=60, message="the job reaches succeeded")
        self.wait(lambda: row().find_element(By.CSS_SELECTOR, ".progress-text").text == "3000 / 3000")
        self.remember_page()
        self.assertIn("removed 20", row().text)
        self.assertIn("not found 2980", row().text)
        self.assertEqual(row().find_element(By.CSS_SELECTOR, "progress").get_attribute("value"), "3000")
        self.assertRegex(row().find_element(By.CSS_SELECTOR, ".rate").text, r"tokens/s|under a second")
        self.shot("09-jobs")

    def test_08_apps_page(self):
        self.open("/console/apps")
        self.assertTrue(self.driver.find_elements(By.CSS_SELECTOR, 'section[data-app="demo"]'))
        page = self.driver.page_source
        # Secrets are shown as sha256: and 8 hex digits of their SHA-256, never their first characters.
        self.assertIn("sha256:" + hashlib.sha256(WEBHOOK_SECRET.encode()).hexdigest()[:8], page)
        self.assertNotIn(WEBHOOK_SECRET[:4] + "…", page)
        self.assertIn("token", self.text('section[data-app="demo"] table'))
        self.assertNotIn("never", self.text('section[data-app="demo"] table'), "both credentials were used for the pushes above")
        self.shot("10-apps")

    def test_08a_managed_app(self):
        # An app managed through the console (the relay runs with apps_store.key_file): added with
        # the form, listed with its source and its secret's fingerprint, deleted.
        self.open("/console/apps")
        self.assertEqual(self.driver.find_element(By.CSS_SELECTOR, 'tr[data-row-app="demo"]').get_attribute("data-source"), "file")
        self.driver.find_element(By.ID, "managed-app-id").send_keys("browser-app")
        self.driver.find_element(By.ID, "managed-app-configuration").send_keys(json.dumps({"webhook_secrets": [MANAGED_SECRET]}))
        self.driver.find_element(By.CSS_SELECTOR, "#managed-app-form button").click()
        self.wait(lambda: "done=saved" in self.driver.current_url, message="the form saves the app")
        row = self.driver.find_element(By.CSS_SELECTOR, 'tr[data-row-app="browser-app"]')
        self.assertEqual(row.get_attribute("data-source"), "managed")
        self.assertIn("sha256:" + hashlib.sha256(MANAGED_SECRET.encode()).hexdigest()[:8], row.text)
        self.assertNotIn(MANAGED_SECRET, self.driver.page_source)
        self.shot("10b-managed-app")
        row.find_element(By.CSS_SELECTOR, "form.delete-app button").click()
        self.wait(lambda: "done=deleted" in self.driver.current_url, message="the delete button deletes the app")
        self.assertFalse(self.driver.find_elements(By.CSS_SELECTOR, 'tr[data-row-app="browser-app"]'))

    def test_09_an_app_key_sees_its_app_only(self):
        self.driver.find_element(By.CSS_SELECTOR, ".who button").click()  # sign out
        self.wait(lambda: self.driver.current_url.endswith("/console/login"))
        self.assertIsNone(self.driver.get_cookie("pushrelay_session"))
        self.sign_in(APP_KEY)
        self.wait(lambda: self.driver.current_url.endswith("/console"))
        self.assertIn("(demo)", self.text("#who"))
        self.open("/console/jobs")
        self.assertIn("admin API key", self.text("#error"))
        self.assertFalse(self.driver.find_elements(By.ID, "job-form"))
        self.shot("11-jobs-app-key")

    def test_10_no_page_shows_a_secret(self):
        secrets = {"admin key": ADMIN_KEY, "app key": APP_KEY, "webhook secret": WEBHOOK_SECRET}
        session = self.driver.get_cookie("pushrelay_session")
        if session:
            secrets["session token"] = session["value"]
        self.assertGreater(len(self.pages_seen), 10)
        for url, source in self.pages_seen:
            for name, secret in secrets.items():
                self.assertNotIn(secret, source, f"{url} shows the {name}")
                self.assertNotIn(secret, url, f"the {name} is in a URL")


if __name__ == "__main__":
    unittest.main(verbosity=2)
