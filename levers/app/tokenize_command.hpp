// `recipe tokenize`: text to token ids (a JSON array on one line) with a
// model's tokenizer (a directory with tokenizer.json, GPT-2's vocab.json and
// merges.txt, or a tokenizer.json file), ids back to text (--decode), or a
// conversation rendered through the directory's chat template first (--chat).
#pragma once

#include <string>

namespace levers {

struct TokenizeFlags {
    std::string tokenizer;   // DIR or FILE
    std::string input;       // a file; empty or "-": stdin
    bool decode = false;     // input: a JSON array of ids
    bool chat = false;       // input: a JSON list of messages, or {"messages": [...]}
    bool generation_prompt = false;  // with --chat: end with the assistant's turn opened
    bool render_only = false;        // with --chat: print the rendered text, not its ids
    bool add_special = false;        // the tokenizer's own tokens around plain text (BOS)
    bool skip_special = false;       // --decode: leave special tokens out
};

// Prints the result on stdout; throws levers::Error naming a bad file or input.
int tokenize(const TokenizeFlags& flags);

}  // namespace levers
