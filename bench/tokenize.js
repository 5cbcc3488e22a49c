// The peer of bench_tokenize (bench/tokenize.sh): @lenml/tokenizers (a fork
// of transformers.js's tokenizers, JavaScript) with the same tokenizer files,
// each file encoded whole without special tokens, the best of ROUNDS; the
// same JSON lines (FNV-1a over the ids' decimal text, comma-separated).
//
//   node bench/tokenize.js LIB_DIR TOKENIZER_DIR ROUNDS FILE...
const fs = require("fs");
const path = require("path");
const [lib, dir, rounds, ...files] = process.argv.slice(2);
const { TokenizerLoader } = require(path.resolve(lib, "dist/main.js"));
const read = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: read("tokenizer.json"),
                                             tokenizerConfig: read("tokenizer_config.json") });
for (const file of files) {
  const text = fs.readFileSync(file, "utf8");
  const bytes = fs.statSync(file).size;
  let best = Infinity, ids = [];
  for (let r = 0; r < Number(rounds); ++r) {
    const start = process.hrtime.bigint();
    ids = tok.encode(text, { add_special_tokens: false });
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
  }
  let hash = 1469598103934665603n;
  for (const id of ids)
    for (const c of id + ",") hash = ((hash ^ BigInt(c.charCodeAt(0))) * 1099511628211n) & 0xffffffffffffffffn;
  console.log(JSON.stringify({ file: path.basename(file), mb: +(bytes / 1e6).toFixed(3),
                               mb_per_s: +(bytes / 1e6 / best).toFixed(3), tokens: ids.length,
                               hash: hash.toString(16).padStart(16, "0") }));
}
