#include "levers/core/error.hpp"
#include "levers/distributed/gpu_quirks.hpp"

#include <doctest/doctest.h>

#include <map>

using namespace levers;
using namespace levers::dist;

namespace {
auto env_of(const std::map<std::string, std::string>& vars) {
    return [vars](const char* name) -> const char* {
        auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    };
}
const std::string kBlackwell = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition";
}  // namespace

TEST_CASE("RTX PRO 6000 GPUs get NCCL_P2P_DISABLE=1 in one line, unless the user set it") {
    auto plan = plan_quirks({kBlackwell, kBlackwell}, 22809, env_of({}));
    REQUIRE(plan.set.size() == 1);
    CHECK(plan.set[0].first == "NCCL_P2P_DISABLE");
    CHECK(plan.set[0].second == "1");
    CHECK(plan.line.starts_with("GPU quirks: NCCL_P2P_DISABLE=1 (peer-to-peer transfers between RTX PRO 6000"));
    CHECK(plan.line.find('\n') == std::string::npos);

    auto theirs = plan_quirks({kBlackwell}, 22809, env_of({{"NCCL_P2P_DISABLE", "0"}}));
    CHECK(theirs.set.empty());
    CHECK(theirs.line == "GPU quirks: NCCL_P2P_DISABLE=0 (yours)");
}

TEST_CASE("other GPUs need nothing") {
    auto plan = plan_quirks({"NVIDIA H200", "NVIDIA H200"}, 22809, env_of({}));
    CHECK(plan.set.empty());
    CHECK(plan.line.empty());
}

TEST_CASE("a Blackwell workstation GPU with NCCL older than 2.26 is refused, naming the package") {
    CHECK_THROWS_WITH_AS(plan_quirks({kBlackwell}, 22105, env_of({})),
                         doctest::Contains("needs NCCL 2.26.0 or newer, but NCCL 2.21.5 is loaded"), Error);
    CHECK_THROWS_WITH_AS(plan_quirks({kBlackwell}, 22105, env_of({})), doctest::Contains("libnccl2"), Error);
    CHECK(nccl_version_text(22809) == "2.28.9");
    CHECK(nccl_version_text(2708) == "2.7.8");
}
