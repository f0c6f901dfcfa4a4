"""Write assets/course_model_game.json: one game of the GRPO model of the course's cpu run, against the
random opponent. Rule fixed before looking: the first game in the stored evaluation's order that the model won
with no invalid answer."""

import datetime
import json
import pathlib

root = pathlib.Path(__file__).resolve().parent.parent
keys = {f.parent: json.loads(f.read_text()) for f in (root / "outputs/cpu/evaluations").glob("*/key.json")}
folders = [f for f, key in keys.items() if "grpo" in key["model"] and key["opponent"] == "random"]
assert len(folders) == 1, folders
key = keys[folders[0]]
games = [json.loads(line) for line in open(folders[0] / "transcripts.jsonl")]
game = next(g for g in games if g["result"] == "win" and g["metrics"]["invalid_moves"] == 0)
stamp = datetime.datetime.fromtimestamp((folders[0] / "games.csv").stat().st_mtime, datetime.timezone.utc)
about = (
    f"The course's GRPO model (SmolLM2-135M-Instruct after notebook 08's SFT and notebook 09's GRPO with every cell "
    f"scored, answering with the move alone, cpu profile, "
    f"run of {stamp:%Y-%m-%d}) against the random opponent: game {game['example_id']} of the {key['games']} "
    f"evaluation games (seed {key['seed']}), the first one it won without an invalid answer. "
    f"Reward {game['reward']:.2f}."
)
asset = {
    "about": about,
    "model": "grpo final (outputs/cpu/grpo/final)",
    "opponent": "random",
    "games": key["games"],
    "example_id": game["example_id"],
    "result": game["result"],
    "reward": game["reward"],
    "answer_format": key.get("answer_format", "think"),
    "messages": game["messages"][1:],
}  # without the system prompt: the rules, shown in notebook 05
(root / "assets/course_model_game.json").write_text(json.dumps(asset, indent=1, ensure_ascii=False) + "\n")
print(about)
print(sum(g["result"] == "win" for g in games), "wins of", len(games))
