"""Check assets/play_recorded_games.html in a real browser: headless Chromium opens the file itself (no
server), with every request that is not the file refused and counted.

tests/test_play_page.py reads the page as text; this script checks what a browser draws from it: one
3 x 3 grid per model answer with the recorded marks in the right cells, the move highlighted, each reason
and each "the reason is wrong" mark visible. Not part of `make test`: it needs a browser. Setup, once
(Debian; `playwright install chromium` needs its CDN, the Debian package does not):

    apt-get install -y chromium && pip install playwright
    python dev/browser_play_page.py [folder]   # prints what it checked; saves play_page.png in folder
                                               # (default outputs/)
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "course_lib" / "envs")]

from course_lib import play  # noqa: E402

PAGE = ROOT / "assets" / "play_recorded_games.html"
X_STYLE = "rgb(26, 35, 126) 25.6px"  # an X on the board: colour #1a237e, 1.6em of 16px


def main(out_dir: Path) -> int:
    turns = [turn for game in play.recorded_games() for turn in play.game_turns(game["messages"])]
    problems, requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else (
            requests.append(route.request.url), route.abort()))  # fmt: skip
        page.goto(PAGE.as_uri())
        boards = page.locator(".board")
        print(f"{boards.count()} boards drawn, {len(turns)} model answers in the stored games")
        if boards.count() != len(turns):
            problems.append(f"{boards.count()} boards for {len(turns)} answers")
        for number, (board, turn) in enumerate(zip(boards.all(), turns), start=1):
            cells = board.locator(".cell").all()
            boxes = [cell.bounding_box() for cell in cells]
            columns = {round(box["x"]) for box in boxes if box}
            rows = {round(box["y"]) for box in boxes if box}
            drawn = "".join(c.inner_text().strip() for c in cells)
            expected = "".join(mark or (play.MODEL if i == turn.move else str(i)) for i, mark in enumerate(turn.board))
            moves = board.locator(".cell.move")
            if len(cells) != 9 or len(columns) != 3 or len(rows) != 3 or min(b["width"] for b in boxes) < 20:
                problems.append(
                    f"board {number} is not drawn as a 3 x 3 grid ({len(columns)} columns, {len(rows)} rows)"
                )
            if drawn != expected:
                problems.append(f"board {number} shows {drawn}, the stored game has {expected}")
            if turn.move is not None and (moves.count() != 1 or moves.first.inner_text() != play.MODEL):
                problems.append(f"board {number}: the move, cell {turn.move}, is not the one highlighted X")
            styles = [
                cell.evaluate("e => getComputedStyle(e).color + ' ' + getComputedStyle(e).fontSize") for cell in cells
            ]
            if turn.move is not None and turn.invalid is None and styles[turn.move] != X_STYLE:
                problems.append(f"board {number}: the played X is drawn {styles[turn.move]}, a placed X {X_STYLE}")
            print(f"board {number}: {drawn[:3]}/{drawn[3:6]}/{drawn[6:]}, move {turn.move}")
        text = page.locator("body").inner_text()
        for turn in turns:
            if turn.reason not in text:
                problems.append(f"reason not visible: {turn.reason!r}")
        marks = page.locator(".wrong-reason")
        shown = [mark.inner_text() for mark in marks.all() if mark.is_visible()]
        print(f"{len(shown)} wrong reasons marked, {sum(bool(t.wrong) for t in turns)} expected")
        for mark in shown:
            print("  " + mark)
        if len(shown) != sum(bool(t.wrong) for t in turns):
            problems.append(f"{len(shown)} wrong-reason marks visible")
        colour = marks.first.evaluate("e => getComputedStyle(e).color") if shown else ""
        if colour != "rgb(198, 40, 40)":
            problems.append(f"the wrong-reason mark is {colour!r}, not red: the page's style did not apply")
        if requests:
            problems.append(f"the page asked for {requests}")
        out_dir.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out_dir / "play_page.png"), full_page=True)
        browser.close()
    print("\n".join(problems) or f"OK; no request left the file; screenshot {out_dir / 'play_page.png'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "outputs"))
