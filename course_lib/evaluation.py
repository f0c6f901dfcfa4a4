"""The tic-tac-toe evaluation harness: W/D/L with 95% Wilson intervals, through the environment.

`evaluate_player(client, model, name, games)` plays `games` games against the random opponent
(random_move_prob 1.0) and `games` against the optimal one (0.0), the model starting in half
of each, with the environment's ordinary `evaluate`. Any verifiers client works: a local model
(`serving.start_model().client`), an API, or `ScriptedClient("expert" | "random")`, so the
baselines run through exactly the code that scores the model. It returns a tidy table (one
row per opponent), a table of games, and writes every transcript to JSONL.

The games are fixed by `seed`: every player meets the same opponents in the same openings,
and later notebooks compare against these numbers with the same seed.
"""

import asyncio
import contextlib
import functools
import hashlib
import json
import math
import numbers
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import verifiers as vf

from course_lib.profiles import get_profile
from tictactoe import GAME_STATE_COLUMNS, MAX_TURNS, TicTacToeEnv, load_environment, outcome

OPPONENTS = {"random": 1.0, "optimal": 0.0}  # opponent name -> random_move_prob
EVAL_SEED = 0
# Games are capped at the environment's MAX_TURNS answers. A model that rambles without a move
# costs max_turns x max_tokens per game: most of the CPU time.


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a proportion (95% for z=1.96); (0, 1) when n is 0.

    Unlike p ± z·sqrt(p(1-p)/n), it stays inside [0, 1] and is not zero-width at 0/n or n/n.
    """
    if not (isinstance(successes, numbers.Integral) and isinstance(n, numbers.Integral) and 0 <= successes <= n):
        raise ValueError(f"need whole numbers 0 <= successes <= n, got successes={successes!r}, n={n!r}")
    if not (isinstance(z, numbers.Real) and 0 < z < math.inf):
        raise ValueError(f"z must be a positive number (1.96 for 95%), got {z!r}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # min/max: rounding must not leave p itself outside (at 0/n or n/n), or error bars go negative
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def turn_sampling_args(profile) -> dict:
    """Sampling for one model turn: the profile's token budget per turn (temperature: the server's default)."""
    return {"max_tokens": profile.eval.max_tokens_per_turn}


# --- Games ---------------------------------------------------------------------------------


def check_games_and_opponents(games, opponents) -> None:
    """A clear ValueError for what evaluate_player and eval_environment cannot play."""
    if not isinstance(games, numbers.Integral) or isinstance(games, bool) or games < 1:
        raise ValueError(f"games must be a whole number of games per opponent, at least 1, got {games!r}")
    if isinstance(opponents, str) or not opponents or any(o not in OPPONENTS for o in opponents):
        raise ValueError(
            f"opponents must be a non-empty list of names from {list(OPPONENTS)} "
            f"(e.g. opponents=['random']), got {opponents!r}"
        )


def eval_environment(
    opponent: str, games: int, seed: int = EVAL_SEED, max_turns: int = MAX_TURNS, load=load_environment
) -> TicTacToeEnv:
    """The environment whose eval set is `games` games against `opponent`, the model starting
    in ceil(games/2) of them: the first rows of each kind from a seeded pool. `load`: the course's
    load_environment, or the learner's when it plays the same games (`exercises_tictactoe.yours_or_reference`)."""
    check_games_and_opponents(games, [opponent])
    prob = OPPONENTS[opponent]
    pool = 3 * games + 20  # who starts is a coin flip per row, so this has enough of each kind
    env = load(
        num_train_examples=0,
        num_eval_examples=pool,
        min_random_move_prob=prob,
        max_random_move_prob=prob,
        num_groups=1,
        max_turns=max_turns,
        seed=seed,
    )
    starts = [info["model_starts"] for info in env.eval_dataset["info"]]
    first = [i for i, s in enumerate(starts) if s][: (games + 1) // 2]
    second = [i for i, s in enumerate(starts) if not s][: games // 2]
    assert len(first) + len(second) == games, "the pool is too small"
    env.eval_dataset = env.eval_dataset.select(sorted(first + second))
    return env


def game_rows(outputs: list[dict], player: str, opponent: str) -> list[dict]:
    rows = []
    for out in outputs:
        usage = out.get("token_usage") or {}
        rows.append(
            {
                "player": player,
                "opponent": opponent,
                "example_id": out["example_id"],
                "game_seed": out["game_seed"],
                "model_starts": out["model_starts"],
                "result": outcome(out["winner"]),
                "reward": out["reward"],
                "model_turns": out["model_turns"],
                "well_formed_turns": out["well_formed_turns"],
                "invalid_moves": out["invalid_moves"],
                "completion_tokens": usage.get("output_tokens", 0.0),
                "error": (out.get("error") or {}).get("error_chain_repr"),
                "stop_condition": out.get("stop_condition"),
            }
        )
    return rows


def summarize(games: pd.DataFrame) -> pd.DataFrame:
    """One row per (player, opponent): rates with 95% Wilson intervals and N."""
    if games.empty:
        raise ValueError("no games to summarize: the table is empty")
    rows = []
    for (player, opponent), g in games.groupby(["player", "opponent"], sort=False):
        n = len(g)
        row = {"player": player, "opponent": opponent, "games": n, "model_first": int(g["model_starts"].sum())}
        for result in ("win", "draw", "loss", "unfinished"):
            k = int((g["result"] == result).sum())
            row[result] = k / n
            row[f"{result}_lo"], row[f"{result}_hi"] = wilson_interval(k, n)
        turns = g["model_turns"].sum()
        row["format_compliance"] = g["well_formed_turns"].sum() / turns if turns else float("nan")
        row["invalid_per_move"] = g["invalid_moves"].sum() / turns if turns else float("nan")
        row["games_with_invalid"] = float((g["invalid_moves"] > 0).mean())
        tokens = g["completion_tokens"].mean()
        row["tokens_per_game"] = tokens if tokens > 0 else float("nan")  # scripted players generate none
        row["mean_reward"] = g["reward"].mean()
        row["errors"] = int(g["error"].notna().sum())
        rows.append(row)
    return pd.DataFrame(rows)


def with_interval(row, key: str) -> str:
    """A rate of a `summarize` row with its 95% interval, for tables: '62% [48%, 74%]'."""
    return f"{row[key]:.0%} [{row[key + '_lo']:.0%}, {row[key + '_hi']:.0%}]"


def mcnemar_p_value(only_first: int, only_second: int) -> float:
    """Exact two-sided McNemar test: the chance of a split of the discordant games at least this
    uneven if both players were equally good (each discordant game a fair coin)."""
    n, k = only_first + only_second, min(only_first, only_second)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def p_value_text(p: float) -> str:
    """A p-value as the course prints it: two significant digits ("0.0032", "0.011", "0.5"), and below 0.001
    one, in scientific notation ("4e-31", "7e-4"), never a rounded "0.0000" that reads as impossible."""
    if p >= 0.001:
        return f"{p:.2g}"
    if p <= 0:
        return "0"
    mantissa, exponent = f"{p:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def readable_p_values(table: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """A table with a p_value column (`paired_comparison`'s) for reading: the other numbers rounded to
    `digits`, the p-values as `p_value_text` writes them."""
    return table.round(digits).assign(p_value=table["p_value"].map(p_value_text))


def paired_outcome(pairs: pd.DataFrame, side: str, name: str) -> pd.Series:
    """Whether each game of one side of `paired_comparison`'s pairs had the outcome `name`."""
    result = pairs[f"result_{side}"]
    if name == "non-loss":
        return (result != "loss") & (result != "unfinished")
    if name == "invalid answer":
        return pairs[f"invalid_moves_{side}"] > 0
    return result == name


def paired_comparison(
    games: pd.DataFrame, first: str, second: str, outcomes: tuple[str, ...] = ("win", "loss", "non-loss")
) -> pd.DataFrame:
    """Compare two players on the *same* games (same opponent, same seed, same row), per opponent.

    For each outcome: both players' rates, the games only the first or only the second got it,
    and the exact McNemar p-value. Pairing removes the luck of the draw (who starts, the
    opponent's dice), so it tells a real difference from noise with fewer games than comparing
    two independent rates. "non-loss" = win or draw; "invalid answer" = a game with at least one
    invalid answer. With several opponents, rows for "both" pool their games: twice the games, so a
    smaller difference can be told from luck.
    """
    columns = [c for c in ("opponent", "example_id", "result", "invalid_moves") if c in games]
    a = games[games["player"] == first][columns]
    b = games[games["player"] == second][columns]
    pairs = a.merge(b, on=["opponent", "example_id"], suffixes=("_first", "_second"))
    if pairs.empty:
        raise ValueError(f"no game played by both {first!r} and {second!r}: evaluate both with the same seed")
    groups = list(pairs.groupby("opponent", sort=False))
    if len(groups) > 1:
        groups.append(("both", pairs))
    rows = []
    for opponent, g in groups:
        for name in outcomes:
            got = {side: paired_outcome(g, side, name) for side in ("first", "second")}
            only_first = int((got["first"] & ~got["second"]).sum())
            only_second = int((got["second"] & ~got["first"]).sum())
            rows.append(
                {
                    "opponent": opponent,
                    "outcome": name,
                    "games": len(g),
                    first: got["first"].mean(),
                    second: got["second"].mean(),
                    f"only {first}": only_first,
                    f"only {second}": only_second,
                    "p_value": mcnemar_p_value(only_first, only_second),
                }
            )
    return pd.DataFrame(rows)


# The play measures a training stage is judged on (decided before the runs, RESULTS.md): the optimal
# opponent can only be drawn, so not losing to it; the random one can be beaten, so winning.
PLAY_MEASURES = (("optimal", "non-loss"), ("random", "win"))


def plays_better(table: pd.DataFrame, first: str, second: str, effect: float = 0.08, alpha: float = 0.01) -> str:
    """The decided verdict on `paired_comparison(..., first, second)`: `second` plays better if one play
    measure rises by at least `effect` with p < `alpha`, and neither falls with p < 0.05."""
    rows = {m: table[(table["opponent"] == m[0]) & (table["outcome"] == m[1])].iloc[0] for m in PLAY_MEASURES}
    change = {m: row[second] - row[first] for m, row in rows.items()}
    better = [m for m, row in rows.items() if change[m] >= effect and row["p_value"] < alpha]
    worse = [m for m, row in rows.items() if change[m] < 0 and row["p_value"] < 0.05]
    said = "; ".join(
        f"{outcome} vs {opponent}: {row[first]:.1%} -> {row[second]:.1%} (p = {p_value_text(row['p_value'])})"
        for (opponent, outcome), row in rows.items()
    )
    verdict = "plays better" if better and not worse else "worse on a measure" if worse else "not shown"
    return f"{said}: {verdict}"


@dataclass
class EvalResult:
    summary: pd.DataFrame  # one row per opponent
    games: pd.DataFrame  # one row per game
    transcripts: list[Path]

    @staticmethod
    def concat(results: list["EvalResult"]) -> "EvalResult":
        """One result from several runs (e.g. one per opponent, run in separate cells)."""
        if not results:
            raise ValueError("no results to concatenate: pass a non-empty list of EvalResult")
        return EvalResult(
            summary=pd.concat([r.summary for r in results], ignore_index=True),
            games=pd.concat([r.games for r in results], ignore_index=True),
            transcripts=[path for r in results for path in r.transcripts],
        )


async def evaluate_player(
    client: vf.Client,
    model: str,
    player: str,
    games: int,
    *,
    sampling_args: dict | None = None,
    max_concurrent: int | None = None,
    opponents=tuple(OPPONENTS),
    seed: int = EVAL_SEED,
    max_turns: int = MAX_TURNS,
    out_dir: Path | None = None,
    load=load_environment,
) -> EvalResult:
    """Play `games` games against each opponent through the environment's `evaluate`, with at most
    `max_concurrent` games in flight in all (default: the profile's), shared by the opponents, so
    that a local model's batch and prefix cache, both `max_concurrent` wide, hold every game in flight.
    `load`: the environment's load_environment (see `eval_environment`)."""
    check_games_and_opponents(games, opponents)
    max_concurrent = max_concurrent or get_profile().max_concurrent
    per_opponent = max(1, max_concurrent // len(opponents))

    async def play(opponent):
        env = eval_environment(opponent, games, seed=seed, max_turns=max_turns, load=load)
        results = await env.evaluate(
            client,
            model,
            sampling_args=sampling_args,
            num_examples=-1,
            rollouts_per_example=1,
            max_concurrent=per_opponent,
            state_columns=GAME_STATE_COLUMNS,
        )
        return opponent, results["outputs"]

    all_rows, paths = [], []
    # Every opponent at once: a local model answers all their games' turns in the same batches.
    for opponent, outputs in await asyncio.gather(*(play(opponent) for opponent in opponents)):
        all_rows += game_rows(outputs, player, opponent)
        if out_dir is not None:
            path = Path(out_dir) / f"transcripts_{player}_{opponent}.jsonl"
            paths.append(save_transcripts(outputs, path, player=player, opponent=opponent, seed=seed))
    table = pd.DataFrame(all_rows)
    summary = summarize(table)
    summary["seed"], summary["max_turns"] = seed, max_turns
    summary["max_tokens_per_turn"] = (sampling_args or {}).get("max_tokens")
    return EvalResult(summary=summary, games=table, transcripts=paths)


# --- One evaluation service: each (weights, opponent, games, budget) is played once -----------------

STORE = "evaluations"  # outputs/<profile>/evaluations/<model>-<opponent>-<key hash>/
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.gguf")


def weights_fingerprint(model: str) -> str:
    """A checkpoint folder's weights as names, sizes and modification times (retraining into the
    same folder changes it); a Hub id or a name stands for itself."""
    path = Path(model)
    files = sorted(f for pattern in WEIGHT_FILES for f in path.glob(pattern)) if path.is_dir() else []
    return ";".join(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files) or model


def evaluation_key(
    profile, model: str, opponent: str, games: int, seed: int, max_turns: int, answer_format: str = "think"
) -> dict:
    """What decides an evaluation's games: the weights, the opponent, the games, the turn and token caps,
    the answer format asked for, and the precision a CPU generates in."""
    from course_lib.local_model import generation_dtype

    model = str(Path(model).resolve()) if Path(model).exists() else model
    asked = {} if answer_format == "think" else {"answer_format": answer_format}  # the default keeps older keys
    return {
        **asked,
        "model": model,
        "weights": weights_fingerprint(model),
        "opponent": opponent,
        "games": games,
        "seed": seed,
        "max_turns": max_turns,
        "sampling": turn_sampling_args(profile),
        "cpu_dtype": generation_dtype(),  # bfloat16 and float32 sample slightly different games
    }


def stored_evaluation(profile, key: dict) -> Path:
    from course_lib.profiles import output_dir

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return output_dir(profile) / STORE / f"{Path(key['model']).name}-{key['opponent']}-{digest}"


async def evaluate_model(
    profile,
    model: str,
    player: str,
    games: int,
    *,
    opponents=tuple(OPPONENTS),
    seed: int = EVAL_SEED,
    max_turns: int = MAX_TURNS,
    llm=None,
    load=load_environment,
    answer_format: str | None = None,
) -> EvalResult:
    """`model` (a checkpoint folder, or the profile's model from `resolve_model`) as `player` in
    `games` games per opponent. Each opponent's games are played once per weights and budget and
    stored under outputs/<profile>/evaluations/: whichever notebook asks again, in this run or a
    later one, gets the stored games instead of replaying them (same seed, so the same games).
    `llm`: an already started model to play with; otherwise one is started if anything is missing.
    `load`: the course's load_environment, or the learner's when it plays the same games
    (`exercises_tictactoe.yours_or_reference` checks it): the stored games do not say which played them.
    `answer_format`: what the environment asks each turn ("think" or "move", see tictactoe.ANSWER_FORMATS);
    None: the profile's, the format notebooks 08-10 train in."""
    check_games_and_opponents(games, opponents)
    answer_format = answer_format or profile.answer_format
    if answer_format != "think":
        load = functools.partial(load, answer_format=answer_format)
    keys = {
        opponent: evaluation_key(profile, model, opponent, games, seed, max_turns, answer_format)
        for opponent in opponents
    }
    folders = {opponent: stored_evaluation(profile, key) for opponent, key in keys.items()}
    missing = [opponent for opponent, folder in folders.items() if not (folder / "games.csv").is_file()]
    if missing:
        from course_lib.serving import start_model

        start = time.monotonic()
        folders[missing[0]].parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="playing-", dir=folders[missing[0]].parent))
        with contextlib.nullcontext(llm) if llm is not None else start_model(profile, model_path=model) as playing:
            result = await evaluate_player(
                playing.client,
                playing.model,
                player,
                games,
                sampling_args=turn_sampling_args(profile),
                max_concurrent=profile.max_concurrent,
                opponents=missing,
                seed=seed,
                max_turns=max_turns,
                out_dir=staging,
                load=load,
            )
        print(f"{player}: {games * len(missing)} games in {(time.monotonic() - start) / 60:.1f} min")
        for opponent in missing:
            folder = folders[opponent]
            folder.mkdir(parents=True, exist_ok=True)
            result.summary[result.summary["opponent"] == opponent].to_csv(folder / "summary.csv", index=False)
            result.games[result.games["opponent"] == opponent].to_csv(folder / "games.csv", index=False)
            (folder / "key.json").write_text(json.dumps(keys[opponent], indent=2))
            played = next(path for path in result.transcripts if path.stem.endswith(f"_{opponent}"))
            played.replace(folder / "transcripts.jsonl")
        staging.rmdir()
    if stored := [opponent for opponent in folders if opponent not in missing]:
        print(f"{player}: its games against the {' and '.join(stored)} opponent read back, not replayed")
    parts = []
    for folder in folders.values():
        parts.append(
            EvalResult(
                summary=pd.read_csv(folder / "summary.csv").assign(player=player),
                games=pd.read_csv(folder / "games.csv").assign(player=player),
                transcripts=[folder / "transcripts.jsonl"],
            )
        )
    return EvalResult.concat(parts)


def save_transcripts(outputs: list[dict], path: Path, **fields) -> Path:
    """One JSON line per game: who played, the result, the moves and every message."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for out in outputs:
            conversation = (out["prompt"] or []) + (out["completion"] or [])
            messages = [{"role": m["role"], "content": m["content"]} for m in conversation]
            record = {
                **fields,
                "example_id": out["example_id"],
                "info": out.get("info"),
                "result": outcome(out["winner"]),
                "reward": out["reward"],
                "metrics": out["metrics"],
                "moves": out["moves"],
                "error": (out.get("error") or {}).get("error_chain_repr"),
                "messages": messages,
            }
            f.write(json.dumps(record) + "\n")
    return path


def load_transcripts(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


# --- Plots ---------------------------------------------------------------------------------------

RESULT_COLORS = {"win": "#2e7d32", "draw": "#9e9e9e", "unfinished": "#e0e0e0", "loss": "#c62828"}


def plot_wdl(summary: pd.DataFrame, title: str, best_win_vs_random: float | None = None):
    """Win/draw/unfinished/loss stacked bars, one panel per opponent, one bar per player.

    Whiskers: 95% Wilson intervals of the win rate (at the win segment's right end, upper half of
    the bar) and of the loss rate (at the loss segment's left end, lower half); N next to each bar.
    Returns the figure.
    """
    import matplotlib.pyplot as plt

    opponents = [o for o in OPPONENTS if o in set(summary.get("opponent", []))]
    if not opponents:
        raise ValueError(f"nothing to plot: the summary has no rows against {list(OPPONENTS)}")
    players = list(dict.fromkeys(summary["player"]))
    fig, axes = plt.subplots(
        1, len(opponents), figsize=(5.5 * len(opponents), 0.6 * len(players) + 1.7), sharey=True, squeeze=False
    )
    for ax, opponent in zip(axes[0], opponents):
        rows = summary[summary["opponent"] == opponent].set_index("player").reindex(players)
        left = pd.Series(0.0, index=players)
        for result, color in RESULT_COLORS.items():
            ax.barh(players, rows[result].fillna(0), left=left, color=color, edgecolor="white", label=result)
            for y, (player, row) in enumerate(rows.iterrows()):
                if row[result] >= 0.12:
                    ax.text(
                        left[player] + row[result] / 2,
                        y,
                        f"{row[result]:.0%}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if result in ("win", "loss") else "black",
                    )
            left += rows[result].fillna(0)
        # Whiskers above (win) and below (loss) the bar's middle, where the percentages are written.
        y = pd.Series(range(len(players)), index=players, dtype=float)
        whisker = {"fmt": "none", "ecolor": "black", "capsize": 2, "lw": 1}
        ax.errorbar(rows["win"], y - 0.25, xerr=[rows["win"] - rows["win_lo"], rows["win_hi"] - rows["win"]], **whisker)
        loss_xerr = [rows["loss_hi"] - rows["loss"], rows["loss"] - rows["loss_lo"]]
        ax.errorbar(1 - rows["loss"], y + 0.25, xerr=loss_xerr, **whisker)
        for i, n in enumerate(rows["games"]):
            ax.text(1.02, i, "" if pd.isna(n) else f"N={int(n)}", va="center", fontsize=8)
        if opponent == "random" and best_win_vs_random is not None:
            ax.axvline(
                best_win_vs_random,
                color="black",
                ls="--",
                lw=1,
                label=f"best never-losing win rate ({best_win_vs_random:.1%})",
            )
        ax.set_xlim(0, 1.12)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1], ["0%", "25%", "50%", "75%", "100%"])
        ax.set_title(f"against the {opponent} opponent", fontsize=10)
    axes[0][0].invert_yaxis()
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, ncol=5, fontsize=8, loc="lower center", frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig
