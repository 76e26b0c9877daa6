"""The chat page and the dashboard in a real browser (issue 16).

Debian's `chromium` and `chromium-driver`, driven headless by PyPI `selenium` (no browser is
downloaded: selenium is pointed at /usr/bin/chromedriver), against real `triad serve` processes:
  * chat: a message typed into the page gets an answer that streams in (a MutationObserver in the
    page records the answer's text length at every change: it must grow through several values
    before the page marks the answer done), and the answer is kept in the browser's storage;
  * JSON mode: switched on in the settings, the default chat model's answer is one JSON object,
    shown pretty-printed;
  * dashboard: opened while 8 streaming requests run on Gemma 3 270M, its Running tile reaches at
    least 2 and its Output tokens/s tile shows a positive rate, and Running returns to 0 after.
Screenshots of each go to $TRIAD_SCREENSHOT_DIR (default <tmp>/triad-screenshots); their paths are
printed. Skipped with a message when selenium, chromium or chromedriver is missing."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time

import pytest

from conftest import GEMMA, MODELS_DIR, Server, need

QWEN = MODELS_DIR / "qwen2.5-0.5b-q4_k_m.gguf"

webdriver = pytest.importorskip("selenium.webdriver", reason="PyPI selenium is not installed")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service as ChromeService  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

SHOTS = os.environ.get("TRIAD_SCREENSHOT_DIR", os.path.join(tempfile.gettempdir(), "triad-screenshots"))


@pytest.fixture(scope="module")
def browser():
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    chrome = shutil.which("chromium") or shutil.which("chromium-browser")
    if not os.path.exists(driver_path) or not chrome:
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    opts = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
              "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.binary_location = chrome
    d = webdriver.Chrome(service=ChromeService(executable_path=driver_path), options=opts)
    d.set_page_load_timeout(60)
    yield d
    d.quit()


def shot(d, name: str):
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, name + ".png")
    d.save_screenshot(path)
    print(f"screenshot: {path}")


def open_chat(d, base: str, model: str):
    d.get(base + "/")
    d.execute_script("localStorage.clear();")
    d.get(base + "/")
    WebDriverWait(d, 30).until(lambda x: any(o.get_attribute("value") == model
                                             for o in x.find_elements(By.CSS_SELECTOR, "#model option")))
    Select(d.find_element(By.ID, "model")).select_by_value(model)


def send_and_watch(d, text: str, timeout: float = 120) -> dict:
    """Types text, sends it, and waits for the answer to finish; returns the text lengths the
    answer went through, its final text and the stored conversation's last message."""
    d.execute_script("""
      window.__lens = [];
      window.__obs = new MutationObserver(() => {
        const a = document.querySelectorAll('#msgs article.msg.assistant');
        if (!a.length) return;
        const last = a[a.length - 1];
        window.__lens.push([last.querySelector('.body').textContent.length, last.getAttribute('aria-busy')]);
      });
      window.__obs.observe(document.getElementById('msgs'), {subtree: true, childList: true, characterData: true,
                                                           attributes: true});""")
    box = d.find_element(By.ID, "input")
    box.clear()
    box.send_keys(text)
    d.find_element(By.ID, "send").click()
    # The page re-renders its messages: read them by script, never through held elements.
    last = """const a = document.querySelectorAll('#msgs article.msg.assistant');
              const m = a.length ? a[a.length - 1] : null;"""
    WebDriverWait(d, timeout).until(lambda x: x.execute_script(last + "return m && m.getAttribute('aria-busy') === 'false';"))
    r = d.execute_script(last + """window.__obs.disconnect();
      const code = m.querySelector('.body pre code');
      return {lens: window.__lens, text: code ? code.textContent : m.querySelector('.body').innerText, error: m.querySelector('.error').hidden ? '' : m.querySelector('.error span').textContent,
              store: localStorage.getItem('triad_chat_conversations')};""")
    store = json.loads(r["store"] or "{}")
    conv = next(c for c in store["convs"] if c["id"] == store["current"])
    return {"lens": r["lens"], "text": r["text"], "stored": conv["messages"][-1], "error": r["error"].strip()}


def test_chat_page_streams_an_answer(browser, server):
    d = browser
    open_chat(d, server.base, "stories")
    r = send_and_watch(d, "Once upon a time, a little fox")
    assert not r["error"], r["error"]
    live = [n for n, busy in r["lens"] if busy == "true"]
    grew = sorted(set(n for n in live if n > 0))
    assert len(grew) >= 3, f"the answer did not stream in: lengths seen while live {live[:40]}"
    assert r["text"].strip() and r["stored"]["role"] == "assistant" and r["stored"]["content"].strip()
    # The page renders markdown (whitespace and markup change): compare letters and digits.
    alnum = lambda t: "".join(ch for ch in t if ch.isalnum())  # noqa: E731
    assert alnum(r["stored"]["content"])[:40] in alnum(r["text"])
    shot(d, "chat-streamed")


@pytest.fixture(scope="module")
def qwen_server():
    """The default chat model (fetched by scripts/fetch_models.sh), as the page's user meets it."""
    need(QWEN)
    s = Server(["-m", str(QWEN), "--alias", "qwen", "--ctx", "2048"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def test_chat_page_json_mode_gives_a_json_object(browser, qwen_server):
    d = browser
    open_chat(d, qwen_server.base, "qwen")
    d.find_element(By.ID, "setBtn").click()
    WebDriverWait(d, 10).until(lambda x: x.find_element(By.ID, "jsonMode").is_displayed())
    mt = d.find_element(By.ID, "maxTok")
    mt.clear()
    mt.send_keys("300")
    if not d.find_element(By.ID, "jsonMode").is_selected():
        d.find_element(By.ID, "jsonMode").click()
    r = send_and_watch(d, "Describe a cat in JSON with the keys name, age and color.")
    assert not r["error"], r["error"]
    content = r["stored"]["content"]
    obj = json.loads(content)
    assert isinstance(obj, dict), content
    assert json.loads(r["text"]) == obj and r["text"] == json.dumps(obj, indent=2, ensure_ascii=False)  # pretty-printed
    shot(d, "chat-json-mode")


def tile(d, label: str) -> str:
    return d.execute_script("""
      for (const t of document.querySelectorAll('section.card .tile'))
        if (t.querySelector('.k').textContent === arguments[0]) return t.querySelector('.v').textContent;
      return null;""", label)


def number(v) -> float:
    """A tile's number as the page formats it ("0", "7.25", "1,234"); 0 for "—" or nothing."""
    try:
        return float((v or "").replace(",", ""))
    except ValueError:
        return 0.0


def test_dashboard_moves_under_8_concurrent_requests(browser):
    need(GEMMA)
    import openai
    s = Server(["-m", str(GEMMA), "--alias", "gemma", "--ctx", "1024"])
    try:
        d = browser
        d.get(s.base + "/dashboard")
        WebDriverWait(d, 30).until(lambda x: tile(x, "Running") not in (None, "—"))
        assert tile(d, "Running") == "0"
        client = openai.OpenAI(base_url=s.base_url, api_key="none", timeout=300)
        errors = []

        def one(i):
            try:
                stream = client.chat.completions.create(
                    model="gemma", stream=True, max_tokens=96, temperature=0.8, seed=i,
                    messages=[{"role": "user", "content": f"Write a short story about the number {i}."}])
                for _ in stream:
                    pass
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        seen_running, seen_rate, shot_taken = [], [], False
        while any(t.is_alive() for t in threads):
            run, rate = tile(d, "Running"), tile(d, "Output tokens/s")
            seen_running.append(run)
            seen_rate.append(rate)
            if not shot_taken and run and run.isdigit() and int(run) >= 2 and number(rate) > 0:
                shot(d, "dashboard-under-load")
                shot_taken = True
            time.sleep(0.25)
        for t in threads:
            t.join()
        assert not errors, errors
        running = [int(v) for v in seen_running if v and v.isdigit()]
        rates = [number(v) for v in seen_rate]
        assert running and max(running) >= 2, f"Running tile over the run: {seen_running}"
        assert rates and max(rates) > 0, f"Output tokens/s tile over the run: {seen_rate}"
        WebDriverWait(d, 10).until(lambda x: tile(x, "Running") == "0")
        shot(d, "dashboard-after")
    finally:
        assert s.stop() == 0, "".join(s.log[-30:])
