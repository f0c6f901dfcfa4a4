"""Notebook 05's workshop: the learner's tic-tac-toe parts, checked, packaged and compared with the reference.

tests/test_workshop.py runs what every workshop notebook shares on 05 too (stubs fail with their TODO,
"Run All" goes on with the solutions, every solution passes, a collapsed solution after each check, no
library source printed). Here: a deliberately wrong version of each part fails with one sentence that
names it, the solutions written out by the notebook's own package cell load with vf.load_environment,
pass check_environment and play the reference's seeded games move for move, and the experiment's answer
is checked.
"""

import re
import sys

import pytest
import verifiers as vf
from test_workshop import load_alone, notebook_namespace, parts, write_and_load

import tictactoe
from course_lib import exercise_mechanism, exercises, exercises_tictactoe, workshop

NOTEBOOK = "05_tictactoe_env.ipynb"

WRONG = {  # a deliberately wrong version of a part -> the words its one sentence must contain
    "winner without the diagonals": (
        "def winner(board):\n"
        "    for a, b, c in [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8)]:\n"
        "        if board[a] is not None and board[a] == board[b] == board[c]:\n"
        "            return board[a]\n"
        "    return None\n",
        "winner: for three X on the line 0-4-8",
    ),
    "an opponent that ignores the game's seed": (
        "def opponent_reply(board, random_move_prob, game_seed):\n"
        "    rng = random.Random(board_to_text(board))\n"
        "    if rng.random() < random_move_prob:\n"
        "        return rng.choice(legal_moves(board))\n"
        "    return rng.choice(best_moves(board, OPPONENT))\n",
        "opponent_reply: at random_move_prob 0.0, over 800 game seeds, O answered X in the centre with cell",
    ),
    "an opponent with one generator for every game": (
        "SHARED = random.Random(0)\n"
        "def opponent_reply(board, random_move_prob, game_seed):\n"
        "    if SHARED.random() < random_move_prob:\n"
        "        return SHARED.choice(legal_moves(board))\n"
        "    return SHARED.choice(best_moves(board, OPPONENT))\n",
        "when asked again: the same game and board must get the same reply",
    ),
    "an opponent that always plays the first optimal move": (
        "def opponent_reply(board, random_move_prob, game_seed):\n"
        "    rng = random.Random(f'{game_seed}:{board_to_text(board)}')\n"
        "    if rng.random() < random_move_prob:\n"
        "        return rng.choice(legal_moves(board))\n"
        "    return best_moves(board, OPPONENT)[0]\n",
        "O answered X in the centre with cell 0 800 times; expected each corner",
    ),
    "an opponent that plays at random too rarely": (
        "def opponent_reply(board, random_move_prob, game_seed):\n"
        "    rng = random.Random(f'{game_seed}:{board_to_text(board)}')\n"
        "    if rng.random() < random_move_prob**2:  # right at 0 and 1 only\n"
        "        return rng.choice(legal_moves(board))\n"
        "    return rng.choice(best_moves(board, OPPONENT))\n",
        "opponent_reply: at random_move_prob 0.3, over 800 game seeds, O answered X in the centre with an edge",
    ),
    "a parser with a regular expression": (
        "def parse_move(text):\n"
        "    found = re.findall(r'<move>(.*?)</move>', text, re.DOTALL)\n"
        "    return found[-1].strip() if found else None\n",
        "never closes it",
    ),
    "a parser that reads the first move": (
        "def parse_move(text):\n"
        "    start = text.find('<move>')\n"
        "    end = text.find('</move>', start)\n"
        "    return None if -1 in (start, end) else text[start + 6:end].strip()\n",
        "parse_move: for two moves (the last one counts)",
    ),
    "a judge that calls int() on any number": (
        "def judge(text, board):\n"
        "    content = parse_move(text)\n"
        "    if content is None:\n"
        "        return None, 'no <move>N</move> tag found'\n"
        "    if not re.fullmatch(r'[+-]?[0-9]+', content):\n"
        "        return None, f'{content[:40]!r} is not a cell number'\n"
        "    cell = int(content)\n"
        "    if not 0 <= cell <= 8:\n"
        "        return None, f'cell {content[:12]} does not exist (cells are 0 to 8)'\n"
        "    if board[cell] is not None:\n"
        "        return None, f'cell {cell} is already taken by {board[cell]}'\n"
        "    return cell, None\n",
        "raised ValueError",
    ),
    "a judge that lets a taken cell through": (
        "def judge(text, board):\n"
        "    content = parse_move(text)\n"
        "    if content is None or content not in '012345678' or not content:\n"
        "        return None, 'no <move>N</move> tag found'\n"
        "    return int(content), None\n",
        "judge: for a cell taken by O",
    ),
    "a judge with one explanation for every mistake": (
        "def judge(text, board):\n"
        "    content = parse_move(text)\n"
        "    if content is None or not re.fullmatch(r'[+-]?[0-9]+', content):\n"
        "        return None, 'Invalid move'\n"
        "    digits = content.lstrip('+-').lstrip('0') or '0'\n"
        "    if len(digits) > 1 or digits == '9' or (content.startswith('-') and digits != '0'):\n"
        "        return None, 'Invalid move'\n"
        "    if board[int(digits)] is not None:\n"
        "        return None, 'Invalid move'\n"
        "    return int(digits), None\n",
        "judge: an answer with no tag, 'I will play 2.', and one with not a number",
    ),
    "a judge that explains nothing": (
        "def judge(text, board):\n"
        "    content = parse_move(text)\n"
        "    if content is None or not re.fullmatch(r'[+-]?[0-9]+', content):\n"
        "        return None, None\n"
        "    digits = content.lstrip('+-').lstrip('0') or '0'\n"
        "    if len(digits) > 1 or digits == '9' or (content.startswith('-') and digits != '0'):\n"
        "        return None, ''\n"
        "    if board[int(digits)] is not None:\n"
        "        return None, 'taken'\n"
        "    return int(digits), None\n",
        "judge: for a cell that does not exist, '<move>9</move>', your explanation is ''",
    ),
    "a reward off by a sign": (
        "def make_game_rubric(parser, penalty=0.1):\n"
        "    def win_reward(state):\n"
        "        return {MODEL: 1.0, 'draw': 0.5}.get(state['winner'], 0.0)\n"
        "    def format_reward(state):\n"
        "        return state['well_formed_turns'] / state['model_turns'] if state['model_turns'] else 0.0\n"
        "    def any_invalid_move(state):\n"
        "        return 1.0 if state['invalid_moves'] > 0 else 0.0\n"
        "    funcs = [win_reward, format_reward, any_invalid_move, *METRICS]\n"
        "    return vf.Rubric(funcs=funcs, weights=[1.0, 0.2, penalty, *[0.0] * len(METRICS)], parser=parser)\n",
        "make_game_rubric(parser): your first functions and weights are",
    ),
    "a format reward that divides by zero": (
        "def make_game_rubric(parser, penalty=0.1):\n"
        "    def win_reward(state):\n"
        "        return {MODEL: 1.0, 'draw': 0.5}.get(state['winner'], 0.0)\n"
        "    def format_reward(state):\n"
        "        return state['well_formed_turns'] / state['model_turns']\n"
        "    def any_invalid_move(state):\n"
        "        return 1.0 if state['invalid_moves'] > 0 else 0.0\n"
        "    funcs = [win_reward, format_reward, any_invalid_move, *METRICS]\n"
        "    return vf.Rubric(funcs=funcs, weights=[1.0, 0.2, -penalty, *[0.0] * len(METRICS)], parser=parser)\n",
        "make_game_rubric: for the ending 'unfinished: no answer judged', format_reward(",
    ),
    "games drawn with the global random module": (
        "def make_games(num_examples, seed, min_random_move_prob=0.0, max_random_move_prob=1.0, num_groups=10,\n"
        "               split='train'):\n"
        "    width = (max_random_move_prob - min_random_move_prob) / num_groups\n"
        "    rows = []\n"
        "    for i in range(num_examples):\n"
        "        bucket = i % num_groups\n"
        "        prob = min_random_move_prob + bucket * width + width * random.random()\n"
        "        game_seed = random.randrange(2**31)\n"
        "        model_starts = random.Random(game_seed).random() < 0.5\n"
        "        board = new_board()\n"
        "        if not model_starts:\n"
        "            board[opponent_reply(board, prob, game_seed)] = OPPONENT\n"
        "        info = {'seed': game_seed, 'model_starts': model_starts, 'random_move_prob': prob,\n"
        "                'board': board_to_text(board), 'bucket': bucket}\n"
        "        rows.append({'question': first_user_message(board, model_starts), 'answer': '', 'info': info})\n"
        "    return rows\n",
        "returned other rows when called again",
    ),
}

# Correct parts that draw their dice otherwise than the reference: other seed strings, other order of draws.
OTHER_DRAWS = {
    "opponent_reply": (
        "def opponent_reply(board, random_move_prob, game_seed):\n"
        "    rng = random.Random(f'game {game_seed}, board {board_to_text(board)}')\n"
        "    best = rng.choice(best_moves(board, OPPONENT))  # both choices first, then the coin\n"
        "    anywhere = rng.choice(legal_moves(board))\n"
        "    return anywhere if rng.random() < random_move_prob else best\n"
    ),
    "make_games": (
        "def make_games(num_examples, seed, min_random_move_prob=0.0, max_random_move_prob=1.0, num_groups=10,\n"
        "               split='train'):\n"
        "    rng = random.Random(f'{split}/{seed}')\n"
        "    width = (max_random_move_prob - min_random_move_prob) / num_groups\n"
        "    rows, seeds = [], set()\n"
        "    for i in range(num_examples):\n"
        "        game_seed = rng.getrandbits(40)  # the seed first, who starts from the same generator\n"
        "        while game_seed in seeds:\n"
        "            game_seed = rng.getrandbits(40)\n"
        "        seeds.add(game_seed)\n"
        "        model_starts = rng.random() < 0.5\n"
        "        bucket = i % num_groups\n"
        "        prob = min(min_random_move_prob + (bucket + rng.random()) * width, max_random_move_prob)\n"
        "        board = new_board()\n"
        "        if not model_starts:\n"
        "            board[opponent_reply(board, prob, game_seed)] = OPPONENT\n"
        "        info = {'seed': game_seed, 'model_starts': model_starts, 'random_move_prob': prob,\n"
        "                'board': board_to_text(board), 'bucket': bucket}\n"
        "        rows.append({'question': first_user_message(board, model_starts), 'answer': '', 'info': info})\n"
        "    return rows\n"
    ),
}

# A correct judge in its own words: the check tests behaviour (the cell, or an explanation of the mistake), not the
# reference's sentences.
JUDGE_IN_OTHER_WORDS = (
    "def judge(text, board):\n"
    "    content = parse_move(text)\n"
    "    if content is None:\n"
    "        return None, 'I found no move: write it as <move>N</move>'\n"
    "    if not re.fullmatch(r'[+-]?[0-9]+', content):\n"
    "        return None, 'a move is one whole number from 0 to 8'\n"
    "    digits = content.lstrip('+-').lstrip('0') or '0'\n"
    "    if len(digits) > 1 or digits == '9' or (content.startswith('-') and digits != '0'):\n"
    "        return None, 'that square is off the board'\n"
    "    if board[int(digits)] is not None:\n"
    "        return None, f'square {digits} is occupied'\n"
    "    return int(digits), None\n"
)

# The environment class: the solution with one method replaced.
CLASS_WRONG = {
    "a reply after the end changes the game": (
        "if state['game_over']:",
        "if False:",
        "play_turn: a reply sent after the end of a game changed state",
    ),
    "O's opening move not recorded": (
        "        state['moves'] = [[OPPONENT, cell] for cell in range(9) if board[cell] == OPPONENT]\n",
        "        state['moves'] = []\n",
        "setup_state: for the row info",
    ),
    "verifiers' own turn cap kept": (
        "    @vf.stop\n"
        "    async def max_turns_reached(self, state: vf.State) -> bool:\n"
        "        return self.max_turns > 0 and state.get('model_turns', 0) >= self.max_turns\n",
        "",
        "max_turns_reached: in game seed",
    ),
    "a slip not counted as invalid": (
        "            state['invalid_moves'] += 1\n",
        "",
        "play_turn: in game seed",
    ),
}


def wrong_class(namespace: dict, old: str, new: str) -> None:
    code = exercise_mechanism.solution_source(NOTEBOOK, "TicTacToeEnv").replace('"', "'")
    assert old in code, old
    exercise_mechanism.run_source(code.replace(old, new), namespace, "<wrong class>")


def fails_with_one_sentence(namespace: dict, name: str, words: str) -> str:
    with pytest.raises(exercise_mechanism.ExerciseError) as error:
        exercises.check(namespace[name])
    message = str(error.value)
    assert words in message and "\n" not in message and "Traceback" not in message, message
    assert error.value._render_traceback_() == [f"✗ {message}"]  # what Jupyter shows: one line
    return message


@pytest.mark.parametrize("wrong", WRONG)
def test_a_wrong_part_fails_with_one_sentence(wrong):
    code, words = WRONG[wrong]
    name = next(name for name in parts(NOTEBOOK) if f"def {name}(" in code)
    namespace = notebook_namespace(NOTEBOOK)
    exercise_mechanism.run_source(code, namespace, f"<wrong: {wrong}>")
    message = fails_with_one_sentence(namespace, name, words)
    if "int()" in wrong:  # the sentence says what to do about it, not only what went wrong
        assert message.endswith("Compare the digits as text first: int() refuses over 4,300 digits."), message


@pytest.mark.parametrize("wrong", CLASS_WRONG)
def test_a_wrong_environment_class_fails_with_one_sentence(wrong):
    old, new, words = CLASS_WRONG[wrong]
    namespace = notebook_namespace(NOTEBOOK)
    wrong_class(namespace, old, new)
    fails_with_one_sentence(namespace, "TicTacToeEnv", words)


def test_an_opponent_and_games_with_other_draws_pass_every_check(capsys):
    """Catches: checks that demand the reference's draw order (transcription) where the learner designs: a correct
    opponent and game rows with other seed strings and another order of draws pass, and so does the class that
    plays with them; the package comparison then says why its games differ."""
    namespace = notebook_namespace(NOTEBOOK)
    for name, code in OTHER_DRAWS.items():
        exercise_mechanism.run_source(code, namespace, f"<other draws: {name}>")
    assert namespace["make_games"](4, seed=0) != tictactoe.make_rows(4, seed=0)  # other games than the reference's
    opponent = namespace["opponent_reply"]
    for name in ("opponent_reply", "make_games", "TicTacToeEnv"):
        mine = namespace[name]
        assert exercises.check(mine) is mine
        assert capsys.readouterr().out.startswith("Correct: "), name
    assert namespace["opponent_reply"] is opponent  # the class's check put the learner's opponent back


def test_a_judge_in_its_own_words_passes_its_check_and_the_environment_class_check(capsys):
    """Catches: a judge check that wants the reference's sentences word for word (transcription), or a class check
    that looks for the reference's sentence in a message that shows the learner's. The wrong judges (one that lets
    a taken cell through, one that raises on a long number, one explanation for every mistake, an empty one) are in
    WRONG and still fail."""
    namespace = notebook_namespace(NOTEBOOK)
    exercise_mechanism.run_source(JUDGE_IN_OTHER_WORDS, namespace, "<judge in other words>")
    judge = namespace["judge"]
    assert judge("<move>0</move>", [None] * 9) == (0, None)
    assert judge("<move>9</move>", [None] * 9) != tictactoe.MoveParser().judge("<move>9</move>", [None] * 9)
    for name in ("judge", "TicTacToeEnv"):
        part = namespace[name]
        assert exercises.check(part) is part
        assert capsys.readouterr().out.startswith("Correct: "), name
    wrong = [w for w in WRONG if w.startswith("a judge")]
    assert len(wrong) >= 4, wrong


def test_the_learner_writes_at_least_90_lines():
    """Catches: a conversion that hands the learner the environment and leaves a few lines to fill in."""
    lines = [
        line
        for name in parts(NOTEBOOK)
        for line in exercise_mechanism.solution_source(NOTEBOOK, name).splitlines()
        if line.strip() and not line.strip().startswith(("#", '"""'))
    ]
    assert len(lines) >= 90, len(lines)


def test_the_solutions_as_a_package_load_pass_the_check_and_play_like_the_reference(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace = write_and_load(NOTEBOOK, notebook_namespace(NOTEBOOK))
    assert namespace["folder"] == tmp_path / "my_tictactoe"
    text = (tmp_path / "my_tictactoe" / "__init__.py").read_text()
    assert "course_lib" not in text and "import tictactoe" not in text
    report = capsys.readouterr().out  # the check_environment report the notebook prints
    for problem in ("crashes", "rewards NaN or out of range", "state changed after the end", "not deterministic"):
        assert f"{problem:<32}0\n" in report, report
    mine = vf.load_environment("my-tictactoe", num_train_examples=10, num_eval_examples=8, seed=3)
    reference = vf.load_environment("tictactoe", num_train_examples=10, num_eval_examples=8, seed=3)
    assert mine.get_dataset()["info"] == reference.get_dataset()["info"]
    table = exercises_tictactoe.compare_games(mine, reference, games=8)
    assert table.same.all() and "All 40 games are the same" in capsys.readouterr().out, table
    assert table["reference reward"].nunique() > 3, "the players must tell the rewards apart"
    assert any(" O" in moves for moves in table["reference moves"]), "the opponent must have moved"
    # Copied alone: loads with only its own folder and site-packages on the path (-I), no course_lib.
    assert load_alone(tmp_path, "my-tictactoe", "num_train_examples=0, num_eval_examples=5", ("tictactoe",)) == "5"


def test_a_wrong_part_in_the_package_is_named_by_the_comparison(tmp_path, monkeypatch, capsys):
    """Catches: a comparison that says "same" for environments whose opponents or rewards differ."""
    monkeypatch.setattr(workshop, "MY_ENVS", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))

    def compare_with(code: str):
        namespace = notebook_namespace(NOTEBOOK)
        exercise_mechanism.run_source(code, namespace, "<wrong part>")
        write_and_load(NOTEBOOK, namespace)
        capsys.readouterr()
        return exercises_tictactoe.compare_games(
            vf.load_environment("my-tictactoe", num_train_examples=0, num_eval_examples=4),
            vf.load_environment("tictactoe", num_train_examples=0, num_eval_examples=4),
            games=4,
        )

    trap = "def opponent_reply(board, random_move_prob, game_seed):\n    return best_moves(board, OPPONENT)[0]\n"
    assert not compare_with(trap).same.all()  # the first-move trap: O's opening moves differ, so do the rows
    said = capsys.readouterr().out
    assert said.startswith("Your make_games draws other games than the reference's"), said
    assert re.search(r"games differ; the first: game \d+, player '[^']+': move \d+ is O\d .*\(opponent_reply", said), (
        said
    )
    sign = WRONG["a reward off by a sign"][0]
    table = compare_with(sign)
    assert not table.same.all()
    said = capsys.readouterr().out
    assert re.search(r"games differ; the first: game \d+, player '[^']+': the same moves", said), said
    assert "make_game_rubric" in said, said


def test_the_penalty_experiment_is_checked(capsys):
    exercises_tictactoe.check_penalty_threshold(None)
    assert "Not answered yet" in capsys.readouterr().out
    exercises_tictactoe.check_penalty_threshold(0.46)
    assert "Correct" in capsys.readouterr().out
    for wrong in (0.5, 0.1, "0.46"):  # the format part forgotten; the course's penalty; a string
        with pytest.raises(exercise_mechanism.ExerciseError):
            exercises_tictactoe.check_penalty_threshold(wrong)
