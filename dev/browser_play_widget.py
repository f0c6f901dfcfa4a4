"""Check the play widget (notebook 10) in a real browser: JupyterLab in headless Chromium.

The tests press the widget's buttons in Python (`Button.click()`), which cannot see what the
browser draws; this script clicks the rendered buttons like a person and reads the board back
from the page. It found that "New game" left the last game's marks on screen (fixed in play.py).
Not part of `make test`: it needs a browser. Setup, once (Debian):

    apt-get install -y chromium && pip install playwright
    python dev/browser_play_widget.py      # prints each click and saves screenshots

The scripted expert stands in for the model, so no model server is needed.
"""

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CELL = f"""import sys
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / "course_lib" / "envs")!r}]
from course_lib import play

widget = play.play_widget(play.expert_answer())
widget"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def board_on_page(page) -> str:
    cells = [page.locator(f'button[title="cell {c}"]').inner_text() for c in range(9)]
    return "".join(text if text in ("X", "O") else "." for text in cells)


def main(out_dir: Path) -> int:
    work = Path(tempfile.mkdtemp(prefix="play_widget_"))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, work / "play.ipynb")
    port = free_port()
    lab = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter",
            "lab",
            "--no-browser",
            f"--port={port}",
            "--ServerApp.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={work}",
            "--allow-root",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    problems = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            for _ in range(60):  # the server takes a few seconds to start
                try:
                    page.goto(f"http://127.0.0.1:{port}/lab/tree/play.ipynb")
                    break
                except Exception:
                    time.sleep(1)
            page.wait_for_selector(".jp-Notebook", timeout=120_000)
            time.sleep(3)
            page.locator(".jp-Cell").first.click()
            page.keyboard.press("Shift+Enter")  # run the cell, as a learner does
            page.wait_for_selector('button[title="cell 4"]', timeout=180_000)
            for cell in range(9):  # you start; click the first free cell until the game ends
                button = page.locator(f'button[title="cell {cell}"]')
                if button.is_disabled():
                    continue
                button.click()
                time.sleep(1.5)
                status = page.locator(".widget-html-content").first.inner_text()
                think = page.locator("textarea").first.input_value()
                print(f"clicked {cell}: board {board_on_page(page)} | {status} | think: {think[:80]!r}")
                if "wins" in status or "Draw" in status:
                    break
            page.screenshot(path=str(out_dir / "play_widget_game.png"))
            page.get_by_text("Model starts").click()
            page.get_by_text("New game").click()
            time.sleep(2)
            board = board_on_page(page)
            print(f"New game, model starts: board {board}")
            if board.count("X") != 1 or board.count("O") != 0:
                problems.append(f"after New game the page shows {board}: stale marks")
            page.screenshot(path=str(out_dir / "play_widget_new_game.png"))
            browser.close()
    finally:
        lab.terminate()
        lab.wait(timeout=30)
    print("\n".join(problems) or f"OK; screenshots in {out_dir}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="screens_"))))
