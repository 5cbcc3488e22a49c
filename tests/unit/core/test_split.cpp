#include "levers/core/split.hpp"

#include <doctest/doctest.h>

using levers::split;
using V = std::vector<std::string>;

TEST_CASE("split: the items between separators, empty ones kept") {
    CHECK(split("a,b,c") == V{"a", "b", "c"});
    CHECK(split("a,,b") == V{"a", "", "b"});
    CHECK(split("a,") == V{"a", ""});
    CHECK(split("") == V{""});
    CHECK(split("one") == V{"one"});
    CHECK(split("x:y", ':') == V{"x", "y"});
}
