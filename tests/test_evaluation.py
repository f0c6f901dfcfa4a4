"""Tests for course_lib/evaluation.py and course_lib/scripted_client.py: intervals, the harness, the clients.

The harness is checked with players whose results are known: the scripted expert never loses
(against any opponent), a random player never beats the optimal opponent.
"""

import asyncio
import json
import random
from collections import Counter
from fractions import Fraction

import pytest
import verifiers as vf

import course_lib.evaluation as evaluation
from course_lib.evaluation import eval_environment, evaluate_player, load_transcripts, wilson_interval
from course_lib.scripted_client import ScriptedClient, read_board
from tictactoe.game import is_over, legal_moves, random_player_results, render


def run(coro):
    return asyncio.run(coro)


# --- Wilson interval ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, n, low, high",
    [
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (5, 10, 0.2366, 0.7634),
    ],
)
def test_wilson_interval_known_values(k, n, low, high):
    """Catches: the Wald interval (zero width at 0/n) or a wrong z."""
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


@pytest.mark.parametrize("k, n", [(1, 40), (36, 40), (3, 7), (0, 4)])
def test_wilson_bounds_solve_the_score_equation(k, n):
    """The interval is every p with (k/n - p)^2 <= z^2 p (1 - p) / n: its ends are the two roots."""
    z2, p_hat = 1.96**2, k / n
    a, b, c = 1 + z2 / n, -(2 * p_hat + z2 / n), p_hat**2
    root = (b * b - 4 * a * c) ** 0.5
    assert wilson_interval(k, n) == pytest.approx(((-b - root) / (2 * a), (-b + root) / (2 * a)), abs=1e-12)


def test_wilson_interval_is_symmetric_contains_the_estimate_and_shrinks_with_n():
    for n in (1, 7, 40):
        for k in range(n + 1):
            lo, hi = wilson_interval(k, n)
            assert 0 <= lo <= k / n <= hi <= 1
            assert (lo, hi) == pytest.approx(tuple(1 - x for x in reversed(wilson_interval(n - k, n))))

    def width(k, n):
        return wilson_interval(k, n)[1] - wilson_interval(k, n)[0]

    assert width(20, 40) < width(5, 10)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_wilson_interval_contains_all_or_nothing_despite_rounding():
    # at 0/n and n/n the exact bound equals the estimate; rounding once put it on the wrong side
    for n in range(1, 500):
        assert wilson_interval(0, n)[0] == 0.0
        assert wilson_interval(n, n)[1] == 1.0


# --- Scripted players ----------------------------------------------------------------------------


def test_read_board_reads_back_every_rendered_board():
    rng = random.Random(0)
    for _ in range(200):
        board = [rng.choice(["X", "O", None]) for _ in range(9)]
        assert read_board(f"You played 3.\n\n{render(board)}\n\nYour move.") == board
    assert read_board("no board here") is None


def test_read_board_takes_the_last_board_in_a_message():
    first, last = [None] * 9, ["X"] + [None] * 8
    assert read_board(render(first) + "\n\n" + render(last)) == last


def test_scripted_client_answers_like_a_model_through_the_client_interface():
    """get_response is the method environments call: the answer must be a legal, well-formed move."""
    board = ["X", None, "O", None, None, None, None, None, None]
    prompt = [vf.UserMessage(content=f"{render(board)}\n\nYour move.")]
    for policy in ("expert", "random"):
        response = run(ScriptedClient(policy).get_response(prompt, model=policy, sampling_args={}))
        text = response.message.content
        assert text.rstrip().endswith("</move>")
        cell = int(text.split("<move>")[1].split("</move>")[0])
        assert cell in legal_moves(board)
        assert ("<think>" in text) == (policy == "expert")


# --- The harness ---------------------------------------------------------------------------------


def test_eval_environment_has_n_games_against_one_opponent_with_the_model_starting_half():
    """Catches: unbalanced starts (a first-move advantage mistaken for skill) or mixed opponents."""
    for opponent, prob in evaluation.OPPONENTS.items():
        for games in (4, 7, 40):
            rows = eval_environment(opponent, games).get_eval_dataset().to_list()
            assert len(rows) == games
            assert sum(r["info"]["model_starts"] for r in rows) == (games + 1) // 2
            assert {r["info"]["random_move_prob"] for r in rows} == {prob}

    def rows(**kwargs):
        return eval_environment("random", 10, **kwargs).get_eval_dataset().to_list()

    assert rows() == rows()
    assert rows(seed=1) != rows()


@pytest.fixture(scope="module")
def expert_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval")
    return run(evaluate_player(ScriptedClient("expert"), "expert", "expert", 40, out_dir=out))


def test_the_expert_never_loses_and_beats_the_random_opponent_mostly(expert_result):
    """Catches: a harness or environment that scores games wrongly (the expert's results are known)."""
    summary = expert_result.summary.set_index("opponent")
    assert list(summary.index) == ["random", "optimal"] and (summary["games"] == 40).all()
    assert (summary["loss"] == 0).all() and (summary["unfinished"] == 0).all()
    assert summary.loc["optimal", "draw"] == 1.0
    assert summary.loc["random", "win"] >= 0.8
    assert (summary["format_compliance"] == 1.0).all() and (summary["invalid_per_move"] == 0).all()
    assert (summary["games_with_invalid"] == 0).all() and (summary["errors"] == 0).all()


def test_summary_rates_add_up_and_intervals_contain_them(expert_result):
    summary = expert_result.summary
    total = summary[["win", "draw", "loss", "unfinished"]].sum(axis=1)
    assert total.to_numpy() == pytest.approx([1.0, 1.0])
    for result in ("win", "draw", "loss"):
        assert (summary[f"{result}_lo"] <= summary[result]).all() and (summary[result] <= summary[f"{result}_hi"]).all()
    assert (summary["model_first"] == 20).all()


def test_results_run_per_opponent_concatenate_into_one(expert_result):
    parts = [
        run(evaluate_player(ScriptedClient("expert"), "expert", "expert", 40, opponents=[opponent]))
        for opponent in ("random", "optimal")
    ]
    combined = evaluation.EvalResult.concat(parts)
    assert combined.summary.equals(expert_result.summary)
    assert len(combined.games) == 80


def test_transcripts_are_saved_one_game_per_line(expert_result):
    assert len(expert_result.transcripts) == 2
    for path in expert_result.transcripts:
        records = load_transcripts(path)
        assert len(records) == 40
        record = records[0]
        assert record["player"] == "expert" and record["result"] in ("win", "draw")
        assert [m["role"] for m in record["messages"][:2]] == ["system", "user"]
        assert record["messages"][-1]["content"].count("Game over") == 1
        json.dumps(record)


def test_the_random_player_never_beats_the_optimal_opponent_and_plays_plausibly_against_random():
    """Random vs random: X moving first wins about 58%, second about 29% (about 44% at 50/50)."""
    result = run(evaluate_player(ScriptedClient("random"), "random", "random", 40))
    summary = result.summary.set_index("opponent")
    assert summary.loc["optimal", "win"] == 0 and summary.loc["optimal", "loss"] >= 0.6
    assert 0.2 <= summary.loc["random", "win"] <= 0.7 and summary.loc["random", "loss"] >= 0.1
    assert (summary["invalid_per_move"] == 0).all()


@pytest.fixture(scope="module")
def random_vs_optimal(tmp_path_factory):
    """1,000 games of the random player against the optimal opponent (about 7 s)."""
    out = tmp_path_factory.mktemp("random")
    return run(evaluate_player(ScriptedClient("random"), "random", "random", 1000, opponents=["optimal"], out_dir=out))


def chi_square(counts: Counter, categories: int) -> float:
    n = sum(counts.values())
    return sum((counts[i] - n / categories) ** 2 / (n / categories) for i in range(categories))


def test_the_random_players_first_move_is_uniform_over_the_free_cells(random_vs_optimal):
    """Catches: a "random" player seeded on the text alone, which opened every game it started with cell 5."""
    opening, reply = Counter(), Counter()  # cell when X starts; rank among the 8 free cells when O did
    for record in load_transcripts(random_vs_optimal.transcripts[0]):
        (first_player, first_cell), second_cell = record["moves"][0], record["moves"][1][1]
        if first_player == "X":
            opening[first_cell] += 1
        else:
            reply[[c for c in range(9) if c != first_cell].index(second_cell)] += 1
    assert sum(opening.values()) == sum(reply.values()) == 500
    assert chi_square(opening, 9) < 26.12 and chi_square(reply, 8) < 24.32  # p = 0.001 at 8 and 7 degrees of freedom


def test_the_random_players_draw_rate_against_the_optimal_opponent_is_the_exact_one(random_vs_optimal):
    """Catches: a random baseline that is not random (seeded on the text, it drew 0 of 300 games, not about 13%)."""
    summary = random_vs_optimal.summary.iloc[0]
    share_first = Fraction(int(summary["model_first"]), int(summary["games"]))
    exact = share_first * random_player_results(0, True)[1] + (1 - share_first) * random_player_results(0, False)[1]
    low, high = wilson_interval(round(summary["draw"] * summary["games"]), summary["games"], z=3.29)  # 99.9%
    assert low <= exact <= high and summary["win"] == 0


def test_the_same_seed_replays_the_same_games():
    """Catches: unseeded opponents or players (results that cannot be reproduced)."""
    a = run(evaluate_player(ScriptedClient("random"), "random", "random", 10)).games
    b = run(evaluate_player(ScriptedClient("random"), "random", "random", 10)).games
    assert a.drop(columns=["completion_tokens"]).equals(b.drop(columns=["completion_tokens"]))


class CountingClient(ScriptedClient):
    """The expert, answering after a short wait, that records the most requests ever in flight."""

    def __init__(self):
        super().__init__("expert")
        self.in_flight = self.most_in_flight = 0

    async def get_native_response(self, *args, **kwargs):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        return await super().get_native_response(*args, **kwargs)


def test_max_concurrent_caps_the_games_in_flight_over_all_opponents():
    """Catches: each opponent getting max_concurrent games in flight, twice what a local model's
    batch and prefix cache hold (the cache then drops games and reads them again from the start)."""
    client = CountingClient()
    run(evaluate_player(client, "expert", "expert", 12, max_concurrent=8))
    assert client.most_in_flight == 8


def test_every_game_through_the_harness_ends(expert_result):
    for record in load_transcripts(expert_result.transcripts[0]):
        cells = [None] * 9
        for player, cell in record["moves"]:
            assert cells[cell] is None
            cells[cell] = player
        assert is_over(cells)


def test_wdl_plot_keeps_the_interval_whiskers_off_the_percentages(expert_result):
    """Catches: whiskers drawn through the middle of the bars, over the written percentages."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.collections import LineCollection

    fig = evaluation.plot_wdl(expert_result.summary, "expert")
    for ax in fig.axes:
        label_rows = {round(text.get_position()[1], 2) for text in ax.texts if text.get_text().endswith("%")}
        assert label_rows == {0.0}
        whisker_rows = {
            round(y, 2)
            for lines in ax.collections
            if isinstance(lines, LineCollection)
            for segment in lines.get_segments()
            for _, y in segment
        }
        assert whisker_rows == {-0.25, 0.25}


# --- Argument checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, n, z",
    [
        (3, -5, 1.96),
        (-1, 4, 1.96),
        (5, 4, 1.96),
        (float("nan"), 10, 1.96),
        (2.5, 4, 1.96),
        (1, 4, 0),
        (1, 4, -1.96),
        (1, 4, float("nan")),
        (1, 4, float("inf")),
    ],
)
def test_wilson_interval_refuses_impossible_counts_and_z(k, n, z):
    """Catches: wilson_interval(3, -5) = (0.0, -0.187), (nan, 10) = (0, 1) and a zero-width interval at z <= 0."""
    with pytest.raises(ValueError):
        wilson_interval(k, n, z)


@pytest.mark.parametrize(
    "games, opponents, message",
    [
        (0, ["random"], "games must be"),
        (-3, ["random"], "games must be"),
        (2.5, ["random"], "games must be"),
        (True, ["random"], "games must be"),
        (4, [], "opponents must be"),
        (4, "random", "opponents must be"),
        (4, ["randon"], "opponents must be"),
    ],
)
def test_evaluate_player_refuses_what_it_cannot_play(games, opponents, message):
    """Catches: games=0 or opponents=[] -> KeyError: 'player'; opponents="random" -> KeyError: 'r'."""
    with pytest.raises(ValueError, match=message):
        run(evaluate_player(ScriptedClient("random"), "random", "random", games, opponents=opponents))


def test_eval_environment_refuses_no_games_and_unknown_opponents():
    with pytest.raises(ValueError, match="games must be"):
        eval_environment("random", 0)
    with pytest.raises(ValueError, match="opponents must be"):
        eval_environment("strong", 4)


def test_empty_results_give_a_clear_error(expert_result):
    """Catches: EvalResult.concat([]), summarize and plot_wdl on an empty table raising KeyError."""
    with pytest.raises(ValueError, match="no results"):
        evaluation.EvalResult.concat([])
    with pytest.raises(ValueError, match="no games"):
        evaluation.summarize(expert_result.games.iloc[:0])
    with pytest.raises(ValueError, match="nothing to plot"):
        evaluation.plot_wdl(expert_result.summary.iloc[:0], "empty")


# --- Paired comparison -----------------------------------------------------------------------------


def test_mcnemar_p_value_matches_the_exact_binomial_values():
    assert evaluation.mcnemar_p_value(0, 0) == 1.0
    assert evaluation.mcnemar_p_value(5, 5) == 1.0
    assert evaluation.mcnemar_p_value(0, 6) == pytest.approx(2 / 64)  # six discordant games, all one way
    assert evaluation.mcnemar_p_value(1, 9) == pytest.approx(2 * 11 / 1024)
    assert evaluation.mcnemar_p_value(9, 1) == evaluation.mcnemar_p_value(1, 9)


def test_paired_comparison_pairs_the_same_games_and_finds_a_real_difference():
    """Catches: pairing games by position instead of by (opponent, row), and a test that cannot
    tell 30 games flipped from loss to win apart from noise."""
    import pandas as pd

    rows = []
    for i in range(40):
        rows.append({"player": "before", "opponent": "random", "example_id": i, "result": "loss" if i < 30 else "win"})
        rows.append({"player": "after", "opponent": "random", "example_id": 39 - i, "result": "win"})
    table = evaluation.paired_comparison(pd.DataFrame(rows), "before", "after", outcomes=("win",))
    row = table.iloc[0]
    assert (row["games"], row["only before"], row["only after"]) == (40, 0, 30)
    assert row["before"] == 0.25 and row["after"] == 1.0 and row["p_value"] < 1e-8
    with pytest.raises(ValueError, match="no game played by both"):
        evaluation.paired_comparison(pd.DataFrame(rows), "before", "nobody")


def test_paired_comparison_pools_both_opponents_without_mixing_their_games():
    """Catches: pooled rows that pair games of different opponents sharing a row number, or that
    drop an opponent's discordant games (the pooled test of notebook 09 counts them all)."""
    import pandas as pd

    rows = []
    for opponent, flipped in (("random", 6), ("optimal", 4)):
        for i in range(10):
            rows.append({"player": "before", "opponent": opponent, "example_id": i, "result": "loss"})
            rows.append(
                {"player": "after", "opponent": opponent, "example_id": i, "result": "draw" if i < flipped else "loss"}
            )
    table = evaluation.paired_comparison(pd.DataFrame(rows), "before", "after", outcomes=("non-loss",))
    assert list(table["opponent"]) == ["random", "optimal", "both"]
    both = table.iloc[2]
    assert (both["games"], both["only before"], both["only after"]) == (20, 0, 10)
    assert both["after"] == 0.5 and both["p_value"] == pytest.approx(evaluation.mcnemar_p_value(0, 10))
    single = evaluation.paired_comparison(pd.DataFrame(rows[:20]), "before", "after", outcomes=("non-loss",))
    assert list(single["opponent"]) == ["random"]  # one opponent: nothing to pool


def test_paired_comparison_counts_games_with_an_invalid_answer_not_invalid_answers():
    """Catches: the "invalid answer" outcome counting answers (a game with three would weigh three
    times) or reading the result column instead of the invalid answers."""
    import pandas as pd

    rows = []
    for i in range(10):
        rows.append({"player": "before", "opponent": "random", "example_id": i, "result": "win", "invalid_moves": 3})
        rows.append({"player": "after", "opponent": "random", "example_id": i, "result": "win", "invalid_moves": i % 2})
    row = evaluation.paired_comparison(pd.DataFrame(rows), "before", "after", outcomes=("invalid answer",)).iloc[0]
    assert (row["before"], row["after"], row["only before"], row["only after"]) == (1.0, 0.5, 5, 0)


class AnswerCountingClient(ScriptedClient):
    """The scripted expert, counting the answers it was asked for."""

    def __init__(self):
        super().__init__("expert")
        self.answers = 0

    def respond(self, prompt, state=None, **kwargs) -> str:
        self.answers += 1
        return super().respond(prompt, state=state, **kwargs)


def test_evaluate_model_plays_each_evaluation_once_and_again_when_the_weights_change(tmp_path, monkeypatch):
    """Catches: a notebook replaying games another notebook already played with the same weights
    (minutes each on a CPU), or reusing games of weights that were retrained since."""
    from types import SimpleNamespace

    import course_lib.profiles
    from course_lib.profiles import PROFILES

    monkeypatch.setattr(course_lib.profiles, "output_dir", lambda profile=None: tmp_path / "outputs")
    profile, checkpoint = PROFILES["smoke"], tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"weights 1")

    def evaluate(player, games=6, **kwargs):
        client = AnswerCountingClient()
        llm = SimpleNamespace(client=client, model="expert")
        result = run(evaluation.evaluate_model(profile, str(checkpoint), player, games, llm=llm, **kwargs))
        return result, client.answers

    first, answers = evaluate("after SFT")
    assert answers > 0 and set(first.summary["opponent"]) == {"random", "optimal"}
    again, answers = evaluate("start")  # e.g. notebook 09's start model is notebook 08's SFT model
    assert answers == 0 and set(again.games["player"]) == {"start"}
    assert again.games.drop(columns="player").equals(first.games.drop(columns="player"))
    assert load_transcripts(again.transcripts[0])[0]["opponent"] in ("random", "optimal")
    assert evaluate("start", opponents=["optimal"])[1] == 0
    assert evaluate("start", games=8)[1] > 0  # other games
    (checkpoint / "model.safetensors").write_bytes(b"weights 2, retrained")
    assert evaluate("start")[1] > 0


def test_plays_better_needs_an_effect_its_p_value_and_no_measure_worse():
    """Catches: a verdict from a small effect, from a large one that could be luck, or one that ignores a
    play measure that got worse (the decided test of notebook 09 and RESULTS)."""
    import pandas as pd

    from course_lib.evaluation import plays_better

    def table(optimal, random):  # (start, after, p) per measure
        rows = [("optimal", "non-loss", *optimal), ("random", "win", *random), ("both", "non-loss", 0.5, 0.5, 1.0)]
        return pd.DataFrame(rows, columns=["opponent", "outcome", "start", "after", "p_value"])

    assert plays_better(table((0.20, 0.30, 0.001), (0.5, 0.5, 1.0)), "start", "after").endswith(": plays better")
    assert plays_better(table((0.20, 0.26, 0.001), (0.5, 0.5, 1.0)), "start", "after").endswith(": not shown")
    assert plays_better(table((0.20, 0.30, 0.02), (0.5, 0.5, 1.0)), "start", "after").endswith(": not shown")
    verdict = plays_better(table((0.20, 0.30, 0.001), (0.60, 0.50, 0.03)), "start", "after")
    assert verdict.endswith(": worse on a measure")
    assert "non-loss vs optimal: 20.0% -> 30.0% (p = 0.001)" in verdict


def test_tiny_p_values_print_in_scientific_notation_not_as_zero():
    """Catches: a p-value of 4e-31 printed as "0.0000" (by a table's round(4), or a :.4f), which reads as
    impossible rather than as very strong evidence; and helpers that print the same p two ways."""
    import pandas as pd

    from course_lib.evaluation import p_value_text, readable_p_values

    assert [p_value_text(p) for p in (4.2e-31, 6.8e-4, 2e-5, 0.0)] == ["4e-31", "7e-4", "2e-5", "0"]
    assert [p_value_text(p) for p in (0.001, 0.0032, 0.0114, 0.5, 1.0)] == ["0.001", "0.0032", "0.011", "0.5", "1"]
    rows = [{"player": "before", "opponent": "random", "example_id": i, "result": "loss"} for i in range(110)]
    rows += [{"player": "after", "opponent": "random", "example_id": i, "result": "win"} for i in range(110)]
    table = evaluation.paired_comparison(pd.DataFrame(rows), "before", "after", outcomes=("win",))
    assert table["p_value"].iloc[0] < 1e-30  # 110 discordant games, all one way: p = 2 / 2**110
    shown = readable_p_values(table)
    assert shown["p_value"].iloc[0] == p_value_text(table["p_value"].iloc[0]) == "2e-33"
    assert shown["after"].iloc[0] == 1.0 and "2e-33" in shown.to_string() and "0.0000" not in shown.to_string()
    verdict = pd.DataFrame(
        [("optimal", "non-loss", 0.1, 0.9, 4.2e-31), ("random", "win", 0.5, 0.5, 1.0)],
        columns=["opponent", "outcome", "start", "after", "p_value"],
    )
    assert "(p = 4e-31)" in evaluation.plays_better(verdict, "start", "after")
