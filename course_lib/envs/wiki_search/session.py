"""Wiki search with a per-rollout session: hidden tool arguments in a vf.StatefulToolEnv.

    import verifiers as vf
    env = vf.load_environment("wiki_search.session")

Some tool arguments should come from the environment, not from the model: a sandbox id, a
database handle, a user's account, or (here) the rollout's own scratch space. The model must
not see them in the tool schema (it could not fill them correctly, and it must not be able to
forge them). vf.StatefulToolEnv does exactly this:

- `add_tool(tool, args_to_skip=["session"])` removes `session` from the JSON schema;
- `setup_state` creates the rollout's session (here: the sections it opened, its notes);
- `update_tool_args` puts `state["session"]` into the call before the tool runs, overwriting
  anything the model may have sent under that name.

The session then feeds a metric the plain ToolEnv cannot compute: did the model open the
section that holds the answer (`read_gold_section`)?
"""

import verifiers as vf

import wiki_search as wiki

HIDDEN_ARG = "session"
SYSTEM_PROMPT = wiki.SYSTEM_PROMPT.replace(
    "- read_section(page_id, section_id): read one section.\n",
    "- read_section(page_id, section_id): read one section.\n- take_note(note): save a fact for later.\n",
)


def read_section(page_id: str, section_id: str, session: dict) -> str:
    """Read the text of one section of a wiki page.

    Args:
        page_id: The page_id of the page, e.g. "honeybee".
        section_id: The section_id, as listed by view_sections, e.g. "colony".
    """
    text = wiki.read_section(page_id, section_id)
    if not text.startswith("Error"):
        session["opened"].append(f"{wiki.slug(page_id)}/{wiki.slug(section_id)}")
    return text


def take_note(note: str, session: dict) -> str:
    """Save a short note for later in this conversation (e.g. a fact you found).

    Args:
        note: The note to keep, e.g. "male honeybees = drones".
    """
    session["notes"].append(str(note))
    return "Your notes so far:\n" + "\n".join(f"{i}. {n}" for i, n in enumerate(session["notes"], 1))


class WikiSessionEnv(vf.StatefulToolEnv):
    def __init__(self, **kwargs):
        super().__init__(tools=[wiki.search_pages, wiki.view_sections], **kwargs)
        self.add_tool(read_section, args_to_skip=[HIDDEN_ARG])
        self.add_tool(take_note, args_to_skip=[HIDDEN_ARG])
        self.add_rubric(vf.Rubric(funcs=[read_gold_section], weights=[0.0]))  # reported, not rewarded

    async def setup_state(self, state: vf.State) -> vf.State:
        state[HIDDEN_ARG] = {"opened": [], "notes": []}
        return await super().setup_state(state)

    def update_tool_args(
        self, tool_name: str, tool_args: dict, messages: vf.Messages, state: vf.State, **kwargs
    ) -> dict:
        if HIDDEN_ARG in self.skipped_args.get(tool_name, []):
            tool_args = {**tool_args, HIDDEN_ARG: state[HIDDEN_ARG]}  # the model cannot forge it
        return tool_args


async def read_gold_section(state: vf.State, info: dict) -> float:
    """1.0 if the rollout opened the section that contains the answer."""
    return float(f"{info['page_id']}/{info['section_id']}" in state[HIDDEN_ARG]["opened"])


def load_environment(max_turns: int = 8, num_eval_examples: int = -1, seed: int = 0, **kwargs) -> WikiSessionEnv:
    """Same data, prompt and reward as wiki_search; read_section and take_note get the session."""
    env_kwargs = {**wiki.environment_kwargs(num_eval_examples, seed), "system_prompt": SYSTEM_PROMPT}
    return WikiSessionEnv(max_turns=max_turns, **env_kwargs, **kwargs)
