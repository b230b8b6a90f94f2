"""The dashboard in a real browser (headless Chromium driven by Selenium) on ``flotilla up``.

``flotilla up --detach`` prints the dashboard URL with a one-time token; Chromium opens it and lands on the fleet page
logged in. The pages stay open while the README tour's failover happens (``examples/tour/``: the Deployment ``web``
with purgeMode Directly and its replica count preserved, member1 powered off, then fenced): without any reload the
fleet page shows member1 not Ready, the workloads page shows ``web`` placed on member2 with the eviction task and its
preserved state, and the timeline gains the failover's steps. Screenshots go to a temporary directory, or with
``FLOTILLA_SCREENSHOTS=docs/img`` to where docs/dashboard.md shows them (``dashboard-*.png``).

By default (HTTPS, tokens) a browser without the token gets 401 and the login page, with no
cluster in it; the printed URL opens the fleet, and the same URL a second time no longer logs anyone in.

Needs /usr/bin/chromium and /usr/bin/chromedriver (Debian's ``chromium`` and ``chromium-driver``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

REPO = Path(__file__).resolve().parents[2]
TOUR = REPO / "examples" / "tour"
#: where the screenshots go: docs/img (FLOTILLA_SCREENSHOTS=docs/img) to refresh those docs/dashboard.md shows,
#: else a directory of their own that a test run leaves behind without touching the checkout
IMG = Path(os.environ.get("FLOTILLA_SCREENSHOTS") or tempfile.mkdtemp(prefix="flotilla-dashboard-shots-"))
if not IMG.is_absolute():
    IMG = REPO / IMG
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
T = TypeVar("T")

pytestmark = pytest.mark.kubectl

if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip("the dashboard's browser tests need Chromium: install chromium and chromium-driver "
                "(apt-get install chromium chromium-driver) to run these", allow_module_level=True)
selenium = pytest.importorskip("selenium", reason="pip install selenium (the test extras) to run these")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402


def flotilla(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flotilla.main", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def kubectl(*args: str, cwd: Path, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "kubectl"), "--kubeconfig", str(kubeconfig), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=60, check=True)


def eventually(check: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            return check()
        except Exception as e:  # noqa: BLE001 (a stale element, a page still loading: try again)
            last = e
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}: {last}")


def dashboard_url(stdout: str) -> str:
    found = re.search(r"dashboard (https?://\S+/dashboard/\?token=\S+)", stdout)
    assert found, stdout
    return found.group(1)


@pytest.fixture
def browser() -> Iterator[Any]:
    with tempfile.TemporaryDirectory() as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--ignore-certificate-errors", "--window-size=1400,1000",
                     f"--user-data-dir={profile}"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
        driver.set_page_load_timeout(30)
        try:
            yield driver
        finally:
            driver.quit()


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    started: list[Path] = []

    def start(*extra: str) -> subprocess.CompletedProcess[str]:
        data = tmp_path / "flotilla"
        r = flotilla("up", "--detach", "--port", "0", "--data-dir", str(data), "--metrics-bind-address", "0", *extra,
                     cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        started.append(data)
        return r

    yield start
    for data in started:
        flotilla("down", "--data-dir", str(data), cwd=tmp_path)


def text_of(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def shot(driver: Any, name: str) -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(IMG / f"dashboard-{name}.png"))


@pytest.mark.timeout(150)
def test_the_dashboard_follows_a_failover_live_without_a_reload(up: Callable[..., Any], browser: Any,
                                                                tmp_path: Path) -> None:
    r = up("--members", "3")
    url = dashboard_url(r.stdout)
    kubeconfig = tmp_path / "flotilla" / "kubeconfig"
    browser.get(url)
    assert "token=" not in browser.current_url  # the one-time token was exchanged and left the address bar
    eventually(lambda: _assert(text_of(browser, "#cluster-member3").startswith("member3")), "the fleet page")
    eventually(lambda: _assert(text_of(browser, "#live-status") == "live"), "the event stream open")
    browser.execute_script("window.notReloaded = true")

    def all_ready() -> None:
        rows = browser.find_elements(By.CSS_SELECTOR, "#clusters tbody tr")
        assert [row.get_attribute("data-ready") for row in rows] == ["True", "True", "True"]

    eventually(all_ready, "member1..3 Ready on the fleet page", timeout=40)
    kubectl("apply", "-f", str(TOUR), cwd=tmp_path, kubeconfig=kubeconfig)

    # the workloads page, open before the workload has a binding, shows it placed on member1
    base = url.split("?")[0]
    browser.get(base + "workloads")
    browser.execute_script("window.notReloaded = true")
    eventually(lambda: _assert("member1" in text_of(browser, "#wl-default-web-deployment .placement")),
               "web-deployment on member1 on the workloads page")
    eventually(lambda: _assert("Healthy" in text_of(browser, "#wl-default-web-deployment")), "web healthy")
    assert browser.execute_script("return window.notReloaded") is True
    # search on the server: typing asks for the fragment of the matching rows and puts the query in the URL
    browser.find_element(By.CSS_SELECTOR, "#search").send_keys("no-such-thing")
    eventually(lambda: _assert("No workload matches." in text_of(browser, "#workloads")), "the search's empty page")
    assert "q=no-such-thing" in browser.current_url
    browser.back()  # the browser's history brings back a whole page, not a fragment
    eventually(lambda: _assert("member1" in text_of(browser, "#wl-default-web-deployment .placement")), "back")
    assert browser.find_elements(By.CSS_SELECTOR, "header nav") != []

    # a second tab keeps the timeline open from before the fault to the end
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    timeline_tab = browser.current_window_handle
    browser.get(base + "timeline")
    eventually(lambda: _assert(text_of(browser, "#live-status") == "live"), "the timeline's event stream open")
    browser.execute_script("window.notReloaded = true")
    assert "fence" not in {e.get_attribute("data-kind") for e in browser.find_elements(By.CSS_SELECTOR, ".step-row")}
    browser.switch_to.window(first)

    # the fleet page, open while member1 loses power
    browser.get(base)
    browser.execute_script("window.notReloaded = true")
    r = flotilla("sim", "fault", "member1", "--mode", "off", "--data-dir", str(tmp_path / "flotilla"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    eventually(lambda: _assert(browser.find_element(By.CSS_SELECTOR, "#cluster-member1")
                               .get_attribute("data-ready") != "True"), "member1 not Ready on the fleet page")
    eventually(lambda: _assert("cluster.karmada.io/not-ready:NoExecute" in text_of(browser, "#cluster-member1")),
               "member1's not-ready taint on the fleet page")
    assert browser.execute_script("return window.notReloaded") is True  # followed live, never reloaded

    # the workloads page: web is moving to member2, its eviction task carries the preserved replica count; the
    # new copy waits (purgeMode Directly) until member1 is fenced, and then runs
    browser.get(base + "workloads")
    browser.execute_script("window.notReloaded = true")
    eventually(lambda: _assert(text_of(browser, "#wl-default-web-deployment .placement") == "member2 (2)"),
               "web-deployment placed on member2 on the workloads page")
    eventually(lambda: _assert("failover.example.com/replicas=2" in text_of(browser, "#wl-default-web-deployment")),
               "the eviction task from member1 with its preserved state")
    assert "from member1" in text_of(browser, "#wl-default-web-deployment")
    shot(browser, "workloads")
    r = flotilla("fence", "member1", "--kubeconfig", str(kubeconfig), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    eventually(lambda: _assert("member2: Healthy" in text_of(browser, "#wl-default-web-deployment")
                               and "from member1" not in text_of(browser, "#wl-default-web-deployment")),
               "web healthy on member2, the eviction task gone", timeout=40)
    assert "member1 → member2" in text_of(browser, "#wl-default-web-deployment")  # the last failover
    assert browser.execute_script("return window.notReloaded") is True

    browser.get(base)
    eventually(lambda: _assert("fenced: Manual" in text_of(browser, "#cluster-member1")), "member1 fenced")
    assert text_of(browser, "#clusters-notready") == "1" and text_of(browser, "#clusters-fenced") == "1"
    shot(browser, "fleet")

    browser.switch_to.window(timeline_tab)  # open since before the fault, never reloaded

    def steps() -> set[str]:
        return {str(e.get_attribute("data-kind")) for e in browser.find_elements(By.CSS_SELECTOR, ".step-row")}

    eventually(lambda: _assert({"fault", "taint", "eviction", "fence", "placed", "running"} <= steps()),
               "the failover's steps on the timeline")
    assert "running on member2" in text_of(browser, "#steps") and "state gap" in text_of(browser, "#steps")
    assert browser.execute_script("return window.notReloaded") is True
    shot(browser, "timeline")

    browser.get(base + "workloads/default/web-deployment")
    eventually(lambda: _assert("member1" in text_of(browser, "#history") and "member2" in text_of(browser, "#history")),
               "the workload's failover history")
    shot(browser, "workload")
    browser.get(base + "workloads/default/no-such-workload")
    assert "no workload default/no-such-workload" in text_of(browser, "#error-message")


@pytest.mark.timeout(120)
def test_the_dashboard_shows_no_data_without_the_token(up: Callable[..., Any], browser: Any) -> None:
    r = up("--members", "1")
    url = dashboard_url(r.stdout)
    assert url.startswith("https://")
    clean = url.split("?")[0]
    browser.get(clean)
    assert "Log in" in browser.page_source and "member1" not in browser.page_source
    assert browser.find_elements(By.CSS_SELECTOR, "#clusters") == []
    # the 401 itself, as fetch sees it from the page (no cookie yet)
    status = browser.execute_script("return fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.status)",
                                    clean + "workloads")
    assert status == 401
    browser.get(url)
    eventually(lambda: _assert(text_of(browser, "#cluster-member1").startswith("member1")), "the fleet, logged in")
    assert "token=" not in browser.current_url
    browser.delete_all_cookies()
    browser.get(url)  # the same one-time token again: spent
    assert "used already" in browser.page_source and "member1" not in browser.page_source


def _assert(condition: bool) -> None:
    assert condition
