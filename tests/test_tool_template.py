"""The embedded model's tool-aware chat template and response template (models.py).

The checkpoint must show tools to the model, render tool calls and results in one documented format,
train on exactly what the model writes, and let `transformers serve` hand the calls back as OpenAI
`tool_calls`, all without changing a single character of the conversations without tools that
every other notebook sends.
"""

import asyncio
import json
import shutil

import pytest
import verifiers as vf
from transformers import AutoTokenizer

import wiki_search as wiki
from course_lib import models, sft, tool_sft
from course_lib.serving import LocalServerClient

CALL = {"id": "call_0", "type": "function", "function": {"name": "search_pages", "arguments": '{"query": "Mars"}'}}
CONVERSATION = [
    {"role": "system", "content": "Use the wiki."},
    {"role": "user", "content": "How many moons has Mars?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_0", "content": "1. Mars (page_id: mars)"},
    {
        "role": "assistant",
        "content": "Reading two sections.",
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "read_section", "arguments": arguments}}
            for i, arguments in ((1, {"page_id": "mars", "section_id": "moons"}), (2, '{"page_id": "mars"}'))
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "Mars has two moons."},
    {"role": "tool", "tool_call_id": "call_2", "content": "Error: no section."},
    {"role": "assistant", "content": "Two."},
]
TOOL = {"type": "function", "function": {"name": "search_pages", "description": "Search.", "parameters": {}}}


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(models.embedded_checkpoint())


def test_the_checkpoint_carries_both_templates(tokenizer):
    assert tokenizer.chat_template == models.CHAT_TEMPLATE
    assert tokenizer.response_template == models.RESPONSE_TEMPLATE
    assert sft.training_chat_template(tokenizer) == models.TRAINING_CHAT_TEMPLATE


def test_without_tools_it_renders_exactly_smollm2s_own_template(tokenizer):
    """Catches: a changed character in any conversation of the other notebooks (the tic-tac-toe
    games, a chat without a system prompt), compared with the template inside the GGUF."""
    gguf = models.find_embedded_gguf()
    original = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).chat_template
    assert original != models.CHAT_TEMPLATE
    games = [row["messages"] for row in sft.load_dataset().select(range(3)).to_list()]
    for messages in games + [games[0][1:], [{"role": "user", "content": "hi"}]]:
        for generation_prompt in (False, True):
            for template in (models.CHAT_TEMPLATE, models.TRAINING_CHAT_TEMPLATE):
                kwargs = dict(tokenize=False, add_generation_prompt=generation_prompt)
                rendered = tokenizer.apply_chat_template(messages, chat_template=template, **kwargs)
                assert rendered == tokenizer.apply_chat_template(messages, chat_template=original, **kwargs)


def test_tools_calls_and_results_render_in_the_qwen_hermes_format(tokenizer):
    text = tokenizer.apply_chat_template(CONVERSATION, tools=[TOOL], tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nUse the wiki.\n\n# Tools\n\n")
    assert f"<tools>\n{json.dumps(TOOL, ensure_ascii=False)}\n</tools>" in text
    assert text.count("<|im_start|>system") == 1
    expected_tail = (
        "<|im_start|>user\nHow many moons has Mars?<|im_end|>\n"
        '<|im_start|>assistant\n<tool_call>\n{"name": "search_pages", "arguments": {"query": "Mars"}}\n'
        "</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n1. Mars (page_id: mars)\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nReading two sections.\n<tool_call>\n"
        '{"name": "read_section", "arguments": {"page_id": "mars", "section_id": "moons"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "read_section", "arguments": {"page_id": "mars"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nMars has two moons.\n</tool_response>\n"
        "<tool_response>\nError: no section.\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nTwo.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert text.endswith(expected_tail)


def test_training_twin_trains_exactly_what_the_model_writes(tokenizer):
    """Catches: tool results or the tool schemas trained as if the model wrote them, or a tool
    call (or its <|im_end|>) left out of the loss."""
    kwargs = dict(tools=[TOOL], chat_template=models.TRAINING_CHAT_TEMPLATE)
    encoded = tokenizer.apply_chat_template(CONVERSATION, return_dict=True, return_assistant_tokens_mask=True, **kwargs)
    assert tokenizer.decode(encoded["input_ids"]) == tokenizer.apply_chat_template(
        CONVERSATION, tokenize=False, tools=[TOOL]
    )
    trained = tokenizer.decode([t for t, m in zip(encoded["input_ids"], encoded["assistant_masks"]) if m])
    assert trained == (
        '<tool_call>\n{"name": "search_pages", "arguments": {"query": "Mars"}}\n</tool_call><|im_end|>'
        "Reading two sections.\n<tool_call>\n"
        '{"name": "read_section", "arguments": {"page_id": "mars", "section_id": "moons"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "read_section", "arguments": {"page_id": "mars"}}\n</tool_call><|im_end|>'
        "Two.<|im_end|>"
    )


@pytest.mark.parametrize(
    "written, expected",
    [
        (
            '<tool_call>\n{"name": "search_pages", "arguments": {"query": "Mars"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "view_sections", "arguments": {"page_id": "mars"}}\n</tool_call><|im_end|>',
            {
                "tool_calls": [
                    {"type": "function", "function": {"name": "search_pages", "arguments": {"query": "Mars"}}},
                    {"type": "function", "function": {"name": "view_sections", "arguments": {"page_id": "mars"}}},
                ]
            },
        ),
        (
            'Let me look. <tool_call>\n{"name": "search_pages", "arguments": {"query": "x"}}\n</tool_call><|im_end|>',
            {
                "content": "Let me look.",
                "tool_calls": [{"type": "function", "function": {"name": "search_pages", "arguments": {"query": "x"}}}],
            },
        ),
        # Tic-tac-toe's reasoning stays in the content, where the environment's parser reads it.
        ("<think>Empty cells: 4 8. Take the centre.</think>\n<move>4</move><|im_end|>", None),
        ("Mars has two moons.<|im_end|>", None),
    ],
)
def test_the_response_template_reads_calls_and_leaves_other_text_alone(tokenizer, written, expected):
    prefix = tokenizer.apply_chat_template(CONVERSATION[:2], tokenize=False, add_generation_prompt=True)
    parsed = tokenizer.parse_response(tokenizer(written, add_special_tokens=False)["input_ids"], prefix=prefix)
    expected = expected or {"content": written.removesuffix("<|im_end|>")}
    assert parsed == {"role": "assistant", **expected}


def test_a_checkpoint_converted_before_gets_the_templates(tmp_path, monkeypatch, tokenizer):
    """Catches: a learner's cache from an earlier version of the course keeping SmolLM2's template,
    on which no model ever sees a tool (the weights are not converted again)."""
    checkpoint = tmp_path / models.cached_embedded_checkpoint().name
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").touch()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(models.cached_embedded_checkpoint() / name, checkpoint / name)
    gguf = models.find_embedded_gguf()
    old = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    old.save_pretrained(checkpoint)
    monkeypatch.setenv(models.CACHE_DIR_VARIABLE, str(tmp_path))
    assert models.embedded_checkpoint() == checkpoint
    upgraded = AutoTokenizer.from_pretrained(checkpoint)
    assert upgraded.chat_template == models.CHAT_TEMPLATE and upgraded.response_template == models.RESPONSE_TEMPLATE


def test_sft_rows_render_as_transformers_serve_renders_the_same_rollout(tokenizer):
    """The tool SFT data (tool_sft.tool_trace_rows) must train on the very text the server builds when
    verifiers sends the same conversation: the tools as verifiers' client sends them, the calls'
    arguments as the server re-serializes them. Catches a training text that differs from the
    serving text by one space or escape."""
    from transformers.cli.serving.utils import BaseHandler, Modality
    from verifiers.legacy.clients.openai_chat_completions_client import OpenAIChatCompletionsClient

    from course_lib.scripted_client import wiki_expert_client

    train, _ = tool_sft.wiki_split()
    env = wiki.load_environment(questions=train[:2])
    outputs = asyncio.run(env.evaluate(client=wiki_expert_client(), model="expert", num_examples=-1))["outputs"]
    rows = tool_sft.tool_trace_rows(outputs)
    assert len(rows) == 2
    client = LocalServerClient(None)

    def as_sent(message):  # outputs store an assistant message as a dict, its calls as JSON text
        if not isinstance(message, dict):
            return message
        calls = [vf.ToolCall(**json.loads(call)) for call in message.get("tool_calls") or []]
        return vf.AssistantMessage(content=message["content"], tool_calls=calls or None)

    for output, row in zip(outputs, rows):
        conversation = [as_sent(m) for m in list(output["prompt"]) + list(output["completion"])]
        native, _ = asyncio.run(client.to_native_prompt(conversation))
        sent_tools = [asyncio.run(OpenAIChatCompletionsClient.to_native_tool(client, t)) for t in env.tool_defs]
        # The server receives the request as JSON: round-trip it as the wire does.
        native, sent_tools = json.loads(json.dumps(native)), json.loads(json.dumps(sent_tools))
        served = tokenizer.apply_chat_template(
            BaseHandler.get_processor_inputs_from_messages(native, Modality.LLM), tools=sent_tools, tokenize=False
        )
        trained = tokenizer.apply_chat_template(row["messages"], tools=json.loads(row["tools"]), tokenize=False)
        assert trained == served
        assert trained.count('<tool_call>\n{"name": "') == output["total_tool_calls"]


def test_transformers_serve_returns_the_models_tool_calls_streaming_and_not():
    """End to end through the server the notebooks start: the base model, shown three examples in
    which the assistant answers with a call, writes a fourth; the server must hand it back as an
    OpenAI tool call (with finish_reason "tool_calls"), whole or streamed."""
    from course_lib import serving

    def search(query: str, i: int) -> list[dict]:
        arguments = json.dumps({"query": query})
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "search_pages", "arguments": arguments}}
        return [{"role": "user", "content": query}, {"role": "assistant", "content": "", "tool_calls": [call]}]

    messages = [{"role": "system", "content": "Call search_pages with the user's words."}]
    messages += [m for i, query in enumerate(["honeybee", "octopus", "printing press"]) for m in search(query, i)]
    messages += [{"role": "user", "content": "mount everest"}]
    request = dict(messages=messages, tools=[TOOL], max_tokens=40, temperature=0.1)
    with serving.start_server() as server:
        reply = server.openai.chat.completions.create(model=server.model, **request).choices[0]
        chunks = list(server.openai.chat.completions.create(model=server.model, stream=True, **request))
    assert reply.finish_reason == "tool_calls" and not reply.message.content
    [call] = reply.message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("search_pages", {"query": "mount everest"})
    streamed = [c for chunk in chunks for c in chunk.choices[0].delta.tool_calls or [] if chunk.choices]
    assert [(c.function.name, json.loads(c.function.arguments)) for c in streamed] == [
        ("search_pages", {"query": "mount everest"})
    ]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_the_held_out_questions_share_no_page_with_the_training_ones():
    """Catches: a split by question, under which a held-out answer could be one the model read in a
    training conversation about the same page."""
    train, held_out = tool_sft.wiki_split()
    assert {q["page_id"] for q in train}.isdisjoint({q["page_id"] for q in held_out})
    assert len(train) + len(held_out) == len(wiki.load_questions()) and len(held_out) >= 20
    assert (train, held_out) == tool_sft.wiki_split()  # the same split every time


def test_only_rewarded_rollouts_without_errors_become_training_conversations():
    tool = {"name": "search_pages", "description": "Search.", "parameters": {}, "strict": True}
    prompt = [{"role": "user", "content": "Q?"}]
    right = {"prompt": prompt, "completion": [{"role": "assistant", "content": "A."}], "tool_defs": [tool]}
    outputs = [right | {"reward": 1.0, "error": None}, right | {"reward": 0.0, "error": None}]
    outputs.append(right | {"reward": 1.0, "error": {"error": "ModelError"}})
    [row] = tool_sft.tool_trace_rows(outputs)
    assert row["messages"] == prompt + [{"role": "assistant", "content": "A."}]
    assert json.loads(row["tools"]) == [{"type": "function", "function": tool}]


def test_the_in_process_client_prompts_with_the_text_tool_sft_trains_on(tokenizer):
    """Notebook 08 evaluates on a CPU through `LocalModelClient`: its first prompt must be the start of
    a tool SFT row's text, tools and all (it once dropped the tools' `strict` flag that the rows keep)."""
    from course_lib.local_model import LocalModelClient
    from course_lib.scripted_client import wiki_expert_client

    train, _ = tool_sft.wiki_split()
    env = wiki.load_environment(questions=train[:1])
    [output] = asyncio.run(env.evaluate(client=wiki_expert_client(), model="expert", num_examples=-1))["outputs"]
    [row] = tool_sft.tool_trace_rows([output])
    trained = tokenizer.apply_chat_template(row["messages"], tools=json.loads(row["tools"]), tokenize=False)
    client = LocalModelClient(tokenizer, generate_batch=None, sampling={})
    tools = [asyncio.run(client.to_native_tool(tool)) for tool in env.tool_defs]
    prompt = [{"role": m["role"], "content": m["content"]} for m in output["prompt"]]
    first_prompt = tokenizer.apply_chat_template(prompt, tools=tools, tokenize=False, add_generation_prompt=True)
    assert trained.startswith(first_prompt)
