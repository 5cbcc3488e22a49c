#!/usr/bin/env python3
"""What Hugging Face's apply_chat_template renders, for
tests/unit/data/test_chat_template.cpp: Jinja2 set up as transformers sets
it up (trim_blocks, lstrip_blocks, loop controls, its tojson,
raise_exception and strftime_now), over the chat templates of the Llama 3,
Qwen 3 and Gemma 3 tokenizers the set-up installs and over constructs.jinja (every
construct levers' engine knows), for the conversations in conversations.json.

    /usr/bin/python3 tests/reference/chat/render.py TOKENIZERS_DIR > tests/reference/chat/rendered.json

Needs Jinja2 (Debian's python3-jinja2); what it wrote is committed.
"""
import json
import pathlib
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

here = pathlib.Path(__file__).parent


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def main():
    tokenizers = pathlib.Path(sys.argv[1])
    env = environment()
    templates = {"constructs": (here / "constructs.jinja").read_text()}
    special = {}
    for name in ("llama3", "qwen3", "gemma3"):
        config = json.loads((tokenizers / name / "tokenizer_config.json").read_text())
        templates[name] = config["chat_template"]
        special[name] = {k: config.get(k) for k in ("bos_token", "eos_token")}
    special["constructs"] = {"bos_token": "<s>", "eos_token": "</s>"}
    out = []
    for case in json.loads((here / "conversations.json").read_text()):
        for name, source in templates.items():
            variables = {**special[name], "messages": case["messages"], "tools": case.get("tools"),
                         "add_generation_prompt": case["add_generation_prompt"], **case.get("extra", {})}
            try:
                out.append({"template": name, "case": case["name"],
                            "text": env.from_string(source).render(**variables)})
            except jinja2.exceptions.TemplateError as e:  # the template refuses the conversation
                out.append({"template": name, "case": case["name"], "raised": str(e)})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    print()


if __name__ == "__main__":
    main()
