#!/usr/bin/python3
"""The console in a real browser: Debian's chromium, driven by chromium-driver
through python3-selenium, against the console that
tests/daemon/console_browser_pgtest.cpp started (real PostgreSQL, a real
`cairn run` serving the example order workflow). That test passes one JSON
file naming the console, its token, the runs it seeded and where screenshots
go; this script exits 0 when every check passed, else prints each failure.
"""

import json
import os
import sys
import time
import traceback
from urllib.parse import parse_qs, urlparse

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAILED: " + what, flush=True)
    return condition


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,1000",
                     "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


class Console:
    def __init__(self, driver, base, token, shots):
        self.driver = driver
        self.base = base
        self.token = token
        self.shots = shots

    def open(self, path):
        self.driver.get(self.base + path)

    def click_and_load(self, element):
        """Clicks a link or a submit button and waits for the next page: a
        click returns before the browser has navigated. The old page is
        told apart by a mark on its document, not by an element of it:
        asking chromedriver about an element of a page that is being
        replaced can fail with "Node with given id does not belong to the
        document" instead of reporting the element stale."""
        self.driver.execute_script("document.cairnOldPage = true")
        element.click()
        # A script run in the middle of the navigation may fail; the next
        # try runs in the new page.
        WebDriverWait(self.driver, 15, ignored_exceptions=[WebDriverException]).until(
            lambda driver: driver.execute_script(
                "return document.cairnOldPage === undefined && document.readyState === 'complete'"))

    def text(self):
        return self.driver.find_element(By.TAG_NAME, "main").text

    def shot(self, name, whole=False):
        """Saves the window, or with whole the whole page (as tall as it is)."""
        size = self.driver.get_window_size()
        if whole:
            height = self.driver.execute_script("return document.documentElement.scrollHeight")
            self.driver.set_window_size(size["width"], min(int(height) + 120, 4000))
        self.driver.save_screenshot(os.path.join(self.shots, name + ".png"))
        if whole:
            self.driver.set_window_size(size["width"], size["height"])

    def sign_in(self, next_path):
        self.open("/login?next=" + next_path)
        self.driver.find_element(By.NAME, "token").send_keys(self.token)
        self.click_and_load(self.driver.find_element(By.CSS_SELECTOR, "form.login button"))

    def run_status(self):
        return self.driver.find_element(By.CSS_SELECTOR, "p.lead .status").text

    def wait_for_status(self, run_id, wanted, seconds=20):
        deadline = time.time() + seconds
        status = ""
        while time.time() < deadline:
            self.open("/runs/" + run_id)
            status = self.run_status()
            if any(w in status for w in wanted):
                return status
            time.sleep(0.3)
        return status

    def run_ids_on_page(self):
        # One round trip for the whole table, not one per link.
        hrefs = self.driver.execute_script(
            "return Array.from(document.querySelectorAll('table.runs tbody a.mono'))"
            ".map(function (a) { return a.href; })")
        return [urlparse(href).path.split("/")[-1] for href in hrefs]


def runs_list(c, runs):
    c.open("/runs?workflow=order")
    page = c.driver.page_source
    for name in ("paid", "refunded", "to_signal", "to_cancel"):
        check(runs[name] in page, "the runs list shows the %s order %s" % (name, runs[name]))
    check("Runs" in c.driver.title, "the runs page has its title")
    c.shot("runs")
    # The filter form narrows the list, and the URL carries the filter.
    Select(c.driver.find_element(By.NAME, "status")).select_by_visible_text("failed")
    c.click_and_load(c.driver.find_element(By.CSS_SELECTOR, "form.filters button"))
    query = parse_qs(urlparse(c.driver.current_url).query)
    check(query.get("status") == ["failed"], "the filter is in the URL: " + c.driver.current_url)
    ids = c.run_ids_on_page()
    check(runs["refunded"] in ids, "the failed filter keeps the refunded order")
    check(runs["paid"] not in ids and runs["to_signal"] not in ids,
          "the failed filter drops the paid and the waiting orders")
    statuses = [e.text for e in c.driver.find_elements(By.CSS_SELECTOR, "table.runs .status")]
    check(statuses and all("failed" in s for s in statuses),
          "every row of the failed filter says failed in words: %s" % statuses)
    c.driver.set_window_size(390, 844)
    c.open("/runs?workflow=order")
    c.shot("runs-phone")
    c.driver.set_window_size(1280, 1000)


def refunded_timeline(c, runs):
    c.open("/runs/" + runs["refunded"])
    kinds = [e.get_attribute("data-kind") for e in c.driver.find_elements(By.CSS_SELECTOR, "ol.timeline li")]
    check("compensated" in kinds, "the refunded order's timeline has compensation events: %s" % kinds)
    timeline = c.driver.find_element(By.CSS_SELECTOR, "ol.timeline").text
    check("refund_payment" in timeline and "release_stock" in timeline,
          "the timeline names refund_payment and release_stock")
    check(timeline.index("refund_payment") < timeline.rindex("release_stock"),
          "refund_payment comes before release_stock")
    check("failed" in c.run_status(), "the refunded order is failed")
    check("the carrier cannot deliver" in c.text(), "the page shows the error")
    check("+" in timeline, "the timeline shows the time between events")
    c.shot("run", whole=True)
    c.driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                             {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    c.open("/runs/" + runs["refunded"])
    c.shot("run-dark", whole=True)
    c.driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def signal_from_the_page(c, runs):
    run_id = runs["to_signal"]
    c.sign_in("/runs/" + run_id)
    check(urlparse(c.driver.current_url).path == "/runs/" + run_id,
          "signing in returns to the run page: " + c.driver.current_url)
    area = c.driver.find_element(By.CSS_SELECTOR, "form.signal textarea")
    button = c.driver.find_element(By.CSS_SELECTOR, "form.signal button")
    area.clear()
    area.send_keys('{"provider_ref": ')
    check(not button.is_enabled(), "the payload editor holds back JSON that does not parse")
    check("Not valid JSON" in c.driver.find_element(By.CSS_SELECTOR, "form.signal .json-problem").text,
          "the payload editor says why")
    area.send_keys('"ch_browser"}')
    check(button.is_enabled(), "valid JSON can be sent")
    c.click_and_load(button)
    outcome = c.driver.find_element(By.ID, "outcome").text
    check("delivered" in outcome, "the signal's outcome is shown in words: " + outcome)
    c.shot("signal-outcome")
    status = c.wait_for_status(run_id, ["completed"])
    check("completed" in status, "after the signal the order completes (page says %s)" % status)


def cancel_needs_the_token(c, runs):
    run_id = runs["to_cancel"]
    c.driver.delete_all_cookies()
    c.open("/runs/" + run_id)
    check("waiting" in c.run_status(), "the order to cancel waits")
    c.click_and_load(c.driver.find_element(By.CSS_SELECTOR, "form.cancel button"))
    refused = c.driver.find_element(By.ID, "outcome").text
    check("sign in" in refused and "nothing changed" in refused,
          "cancelling without the token is refused: " + refused)
    c.open("/runs/" + run_id)
    check("waiting" in c.run_status(), "the refused cancel changed nothing")
    c.sign_in("/runs/" + run_id)
    reason = c.driver.find_element(By.CSS_SELECTOR, "form.cancel input[name=reason]")
    reason.clear()
    reason.send_keys("customer called")
    c.click_and_load(c.driver.find_element(By.CSS_SELECTOR, "form.cancel button"))
    outcome = c.driver.find_element(By.ID, "outcome").text
    check("cancelled" in outcome, "with the token the cancel is done: " + outcome)
    status = c.wait_for_status(run_id, ["cancelled"])
    check("cancelled" in status, "the cancelled order ends cancelled (page says %s)" % status)
    check("customer called" in c.text(), "the page shows the cancel reason")


def hostile_run_is_inert(c, runs):
    c.open("/runs/" + runs["xss"])
    try:
        alert = c.driver.switch_to.alert
        check(False, "no alert may open, but one says: " + alert.text)
    except NoAlertPresentException:
        pass
    scripts = c.driver.execute_script(
        "return Array.from(document.scripts).map(function (s) { return s.src + '|' + s.text; })")
    check(scripts == [c.base + "/static/console.js|"],
          "the only script is the console's own file: %s" % scripts)
    handlers = c.driver.execute_script(
        "return Array.from(document.querySelectorAll('*')).filter(function (e) {"
        " return Array.from(e.attributes).some(function (a) { return a.name.startsWith('on'); });"
        "}).length")
    check(handlers == 0, "no element carries an event handler attribute")
    page = c.text()
    check('<script>alert("k")</script>' in page, "the hostile key is shown as text")
    check("<img src=x onerror=alert(3)>" in page, "the hostile input is shown as text")
    c.open("/runs?workflow=order&status=failed")
    try:
        c.driver.switch_to.alert
        check(False, "no alert may open on the runs list")
    except NoAlertPresentException:
        pass
    c.shot("run-hostile")


def pagination(c, runs):
    c.open("/runs?workflow=bulk&limit=50")
    seen = []
    pages = 0
    while True:
        pages += 1
        seen.extend(c.run_ids_on_page())
        older = c.driver.execute_script("return document.querySelectorAll('nav.pages a.next')")
        if not older or pages > 20:
            break
        c.click_and_load(older[0])
    check(pages == 10, "500 runs at 50 a page are 10 pages, got %d" % pages)
    check(len(seen) == 500, "pagination shows 500 runs, got %d" % len(seen))
    check(len(set(seen)) == len(seen), "no run shows twice")
    check(set(seen) == set(runs["bulk"]), "every bulk run shows once: no gaps")


def other_pages(c, runs):
    for name, wanted in (("queues", "Backlog"), ("workers", "live"), ("schedules", "Schedules"),
                         ("definitions", "order")):
        c.open("/" + name)
        check(wanted in c.text(), "the %s page shows %s" % (name, wanted))
        c.shot(name)
    c.open("/login")
    c.shot("login")


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        setup = json.load(f)
    os.makedirs(setup["screenshots"], exist_ok=True)
    driver = browser()
    driver.set_page_load_timeout(20)
    driver.implicitly_wait(2)
    c = Console(driver, setup["base"], setup["token"], setup["screenshots"])
    try:
        for part in (runs_list, refunded_timeline, hostile_run_is_inert, pagination, other_pages,
                     signal_from_the_page, cancel_needs_the_token):
            started = time.time()
            try:
                part(c, setup["runs"])
            except Exception as error:  # one broken part must not hide the others
                check(False, "%s raised %r" % (part.__name__, error))
                # Which call raised: a driver's error often has no message.
                traceback.print_exc(file=sys.stdout)
                c.shot("error-" + part.__name__)
            print("%s: %.1f s" % (part.__name__, time.time() - started), flush=True)
    finally:
        driver.quit()
    if failures:
        print("%d checks failed" % len(failures))
        return 1
    print("all browser checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
