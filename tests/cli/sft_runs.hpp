// What the sft tests run: a small file of examples (conversations,
// instructions and text, about sums) and the command line of a short run.
#pragma once

#include "tests/temp_dir.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace levers::testing {

// 24 examples about sums, a third each conversations, instructions and texts.
inline std::filesystem::path examples(const TempDir& tmp) {
    std::string lines;
    for (int i = 0; i < 24; ++i) {
        const std::string a = std::to_string(i), b = std::to_string(2 * i + 1), sum = std::to_string(3 * i + 1);
        if (i % 3 == 0)
            lines += R"({"messages": [{"role": "user", "content": "What is )" + a + " plus " + b +
                     R"(?"}, {"role": "assistant", "content": ")" + sum + R"(."}]})" "\n";
        else if (i % 3 == 1)
            lines += R"({"instruction": "Add )" + a + " and " + b + R"(.", "output": ")" + sum + R"("})" "\n";
        else
            lines += R"({"text": ")" + a + " plus " + b + " is " + sum + R"(."})" "\n";
    }
    return tmp.write("chat.jsonl", lines);
}

// `recipe run sft` of 6 steps of one example, a checkpoint and an evaluation every 3, on `gpus` ranks.
inline std::vector<std::string> sft(const std::filesystem::path& model, const std::filesystem::path& data,
                                    const std::filesystem::path& out, int gpus) {
    return {"run", "sft", "--gpus", std::to_string(gpus), "--threads", "1", "--out", out.string(), "--set",
            "model=" + model.string(), "--set", "data=" + data.string(), "--set", "context=64", "--set",
            "batch_size=1", "--set", "steps=6", "--set", "checkpoint_every=3", "--set", "eval_every=3", "--set",
            "log_every=1", "--set", "val_fraction=0.2"};
}

}  // namespace levers::testing
