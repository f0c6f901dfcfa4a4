"""Write assets/play_recorded_games.html: the course's recorded games as a page that opens in any browser
(no server, no network), drawn from the stored games by `course_lib.play.recorded_games_page`.

    python dev/make_play_page.py                  # the page, from play.COURSE_GAMES and play.REASONING_GAMES
    python dev/make_play_page.py --from-executed  # first (re)writes assets/play_widget_game.json: the game
                                                  # executed/cpu/10 shows (its widget's saved conversation)

tests/test_play_page.py checks that the committed page is what this writes.
"""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "course_lib" / "envs")]

from course_lib import play  # noqa: E402
from course_lib.profiles import PROFILES  # noqa: E402
from course_lib.publish_results import run_window  # noqa: E402

PAGE = ROOT / "assets" / "play_recorded_games.html"
EXECUTED = ROOT / "executed" / "cpu" / "10_evaluation_and_plots.ipynb"
RESULTS = {"You win!": "win", "a draw.": "draw", "you lose.": "loss"}  # the environment's last words
SPEAKERS = {"[environment, to the model]": "user", "[model]": "assistant"}  # play.transcript's labels


def widget_game_from_executed() -> dict:
    """The conversation notebook 10's play widget showed in its saved cpu run, back as chat messages."""
    notebook = json.loads(EXECUTED.read_text())
    window = run_window(notebook)  # from the timestamps nbclient wrote in the cells
    assert window, f"no cell timestamps in {EXECUTED.name}: publish it from a run with course_lib.publish_results"
    states = notebook["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
    logs = [s["state"]["value"] for s in states if s["state"].get("description") == "messages"]
    assert len(logs) == 1, f"expected one saved 'messages' box in {EXECUTED.name}, found {len(logs)}"
    pieces = re.split(r"(?:^|\n\n)(\[environment, to the model\]|\[model\])\n", logs[0])
    messages = [{"role": SPEAKERS[label], "content": text} for label, text in zip(pieces[1::2], pieces[2::2])]
    ending = play.game_result(messages)
    result = next((r for words, r in RESULTS.items() if words in ending), "unfinished")
    ran = f"{window[0]:%Y-%m-%d %H:%M}"
    return {
        "about": f"Notebook 10's play widget in the course's published cpu run (notebook 10 ran {ran} UTC): "
        "a scripted human clicking random empty cells (play.random_human(seed=0)) as O against the "
        "course's GRPO model (every cell scored, notebook 09) as X, its answers sampled as in evaluation. The "
        "conversation as the widget showed it; the system prompt (notebook 05's rules, asking for the move alone) "
        "is left out.",
        "model": "grpo final (outputs/cpu/grpo/final)",
        "opponent": "a scripted human clicking random empty cells",
        "result": result,
        "answer_format": PROFILES["cpu"].answer_format,  # the widget's environment asked for it
        "messages": messages,
    }


if __name__ == "__main__":
    if "--from-executed" in sys.argv:
        game = widget_game_from_executed()
        play.COURSE_GAMES[1].write_text(json.dumps(game, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {play.COURSE_GAMES[1].relative_to(ROOT)}: {len(game['messages'])} messages, {game['result']}")
    PAGE.write_text(play.recorded_games_page(play.page_games()))
    print(f"wrote {PAGE.relative_to(ROOT)}")
